"""A stalled worker as users see it (issue 36 item 3): the inspect API's worker listing (health,
since when, why) and ``kubectl jobmirror status``, alone or beside ``--config``'s own probes."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kruntime.client import ApiError
from kruntime.resources import Obj
from mirror import metrics
from mirror.config import Worker
from mirror.inspect import api, plugin
from mirror.jobs.kind import JOB_KIND
from mirror.workers import WorkerCluster
from testkit.inspect_api import Reviews, get_once

NOW = datetime(2026, 11, 26, 23, 30, 0, tzinfo=UTC)
STALL = ("3 copies on worker w-silent have had no pod for longer than podsCreatedTimeout (120s) and its Job "
         "controller says nothing (no FailedCreate): is it running?")


def described(name: str, **over: Any) -> Obj:
    d: Obj = {"name": name, "healthy": True, "unhealthyFor": 0.0, "lastError": None, "copies": 4, "unfinished": 2,
              "isManager": False, "slow": None, "stalled": None, "stalledSince": None}
    d.update(over)
    return d


FLEET = [
    described("w-ok"),
    described("w-silent", stalled=STALL, stalledSince="2026-11-26T23:26:00Z"),
    described("w-slow", slow="a call has been waiting 7.0s (slow above 3s)"),
    described("w-down", healthy=False, unhealthyFor=90.0, lastError="GET https://10.0.0.7:6443/readyz: refused",
              stalled=STALL, stalledSince="2026-11-26T23:20:00Z"),
]


def test_the_workers_health_word_since_and_why() -> None:
    rows = {r["name"]: r for r in api.worker_rows(FLEET, NOW, full=True)}
    assert rows["w-ok"] == {"name": "w-ok", "health": "healthy", "since": None, "reason": None, "unfinished": 2,
                            "stalled": None, "stalledSince": None, "slow": None}
    assert (rows["w-silent"]["health"], rows["w-silent"]["since"], rows["w-silent"]["reason"]) == (
        "STALLED", "2026-11-26T23:26:00Z", STALL)
    assert (rows["w-slow"]["health"], rows["w-slow"]["since"]) == ("slow", None)
    assert rows["w-slow"]["reason"].startswith("a call has been waiting")
    # Unreachable wins over stalled (placement cannot use it at all); the stall is still listed.
    assert (rows["w-down"]["health"], rows["w-down"]["since"]) == ("UNHEALTHY", "2026-11-26T23:28:30Z")
    assert rows["w-down"]["reason"].endswith("refused") and rows["w-down"]["stalled"] == STALL


def test_a_namespaces_user_sees_the_stall_but_not_the_connection_error() -> None:
    rows = {r["name"]: r for r in api.worker_rows(FLEET, NOW, full=False)}
    assert rows["w-down"]["reason"] == api.WITHHELD_ERROR and "10.0.0.7" not in str(rows)
    assert rows["w-silent"]["reason"] == STALL


def test_status_prints_the_stalled_worker_with_since_and_reason() -> None:
    lines = plugin.format_workers(api.worker_rows(FLEET, NOW, full=True), NOW)
    assert lines[0].split() == ["WORKER", "HEALTH", "SINCE", "DETAIL"]
    assert lines[1].split() == ["w-ok", "healthy", "-", "2", "unfinished", "copies"]
    assert lines[2] == f"w-silent     STALLED    2026-11-26T23:26:00Z (4m)  {STALL}"
    assert lines[3].startswith("w-slow       slow       -  ")
    assert lines[4].startswith("w-down       UNHEALTHY  2026-11-26T23:28:30Z (90s) GET https://")
    assert lines[5] == f"{'':12s} also stalled since 2026-11-26T23:20:00Z (10m): {STALL}"
    assert len(lines) == 6


def test_status_config_shows_the_controllers_stall_beside_its_own_probe() -> None:
    """--config probes each worker itself: its API server answers (healthy), only the controller knows
    its copies never run, so the controller's STALLED takes the HEALTH column, with since and why."""
    probed = [{"name": "w-ok", "health": "healthy", "version": "v1.35.0", "detail": "https://a",
               "room": "cpu 1/2 free"},
              {"name": "w-silent", "health": "healthy", "version": "v1.35.0", "detail": "https://b"}]
    merged = plugin.merge_workers(probed, api.worker_rows(FLEET, NOW, full=True))
    assert merged is not None
    assert [m["health"] for m in merged] == ["healthy", "STALLED"]
    lines = plugin.format_probed_workers(merged, NOW)
    assert lines == [
        "WORKER       HEALTH     VERSION    DETAIL",
        "w-ok         healthy    v1.35.0    https://a",
        "             room: cpu 1/2 free",
        "w-silent     STALLED    v1.35.0    https://b",
        f"             controller: STALLED since 2026-11-26T23:26:00Z (4m): {STALL}",
    ]
    # No controller view (no inspect API to ask): the probe alone, as before.
    assert plugin.merge_workers(probed, None) == probed
    assert plugin.merge_workers(None, None) is None


def test_the_worker_keeps_since_when_it_is_stalled_and_clears() -> None:
    w = WorkerCluster(Worker(name="w-st", kubeconfig=Path("/k")), object(),  # type: ignore[arg-type]
                      kinds=[JOB_KIND], origin="o")
    at = NOW - timedelta(minutes=4)
    w.set_stalled("Job", STALL, at)
    assert w.stalled == STALL and w.stalled_since == at
    assert w.describe()["stalled"] == STALL and w.describe()["stalledSince"] == "2026-11-26T23:26:00Z"
    assert metrics.WORKER_STALLED.labels("w-st")._value.get() == 1
    w.set_stalled("JobSet", "jobsets too", NOW)
    assert w.stalled_since == at  # the earliest of its kinds'
    w.set_stalled("Job", None)
    w.set_stalled("JobSet", None)
    assert w.stalled is None and w.stalled_since is None and w.describe()["stalledSince"] is None
    assert metrics.WORKER_STALLED.labels("w-st")._value.get() == 0


@pytest.mark.parametrize(("path", "allowed", "status", "withheld"), [
    ("/v1/workers", {("list", None)}, 200, False),
    ("/v1/workers", {("list", "team-a")}, 403, False),
    ("/v1/namespaces/team-a/workers", {("list", "team-a")}, 200, True),
    ("/v1/namespaces/team-a/workers", {("list", "team-b")}, 403, False),
    ("/v1/namespaces/Not_A_Namespace/workers", {("list", None)}, 400, False),
])
async def test_the_inspect_api_lists_the_workers_to_who_may_list_jobs(
        path: str, allowed: set[tuple[str, str | None]], status: int, withheld: bool) -> None:
    got, body = await get_once(path, allowed, fleet=lambda: list(FLEET))
    assert got == status, body
    if status != 200:
        assert "error" in body
        return
    rows = {r["name"]: r for r in body["items"]}
    assert rows["w-silent"]["health"] == "STALLED" and rows["w-silent"]["since"] == "2026-11-26T23:26:00Z"
    assert (rows["w-down"]["reason"] == api.WITHHELD_ERROR) is withheld


async def test_status_reads_the_workers_through_the_inspect_api(monkeypatch: pytest.MonkeyPatch) -> None:
    server = api.InspectApi("127.0.0.1:0", Reviews({("list", "team-a")}), {}, "jobmirror.dev/controller",  # type: ignore[arg-type]
                            fleet=lambda: list(FLEET))
    port = await server.start()
    try:
        monkeypatch.setattr(plugin, "direct_url_ssl", lambda url, ca: False)
        manager: Any = argparse.Namespace(timeout=5.0)
        t = plugin.Target(manager=manager, namespace="team-a", controller_name="jobmirror.dev/controller",
                          inspect_url=f"http://127.0.0.1:{port}", token="t")
        rows = await plugin.controller_workers(t)
        t.namespace = "team-b"  # may not list Jobs there: the reason, as a note
        refused = await plugin.controller_workers(t)
    finally:
        await server.stop()
    assert isinstance(rows, list) and [r["health"] for r in rows] == ["healthy", "STALLED", "slow", "UNHEALTHY"]
    assert isinstance(refused, str) and "403" in refused and "may not list jobs.batch" in refused
    t.token = None  # no token to pass on: no inspect API to ask, nothing said
    assert await plugin.controller_workers(t) is None


class _Manager:
    """A manager with no claimed Job (and no JobSet API): only the worker listing is under test."""

    timeout = 5.0

    async def list_all(self, resource: Any, namespace: str | None, **kw: Any) -> tuple[list[Obj], str]:
        if resource.group == "jobset.x-k8s.io":
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return [], "1"


@pytest.mark.parametrize("output", [None, "json"])
async def test_status_shows_the_controllers_view_of_the_workers(monkeypatch: pytest.MonkeyPatch,
                                                                output: str | None) -> None:
    server = api.InspectApi("127.0.0.1:0", Reviews({("list", "team-a")}), {}, "jobmirror.dev/controller",  # type: ignore[arg-type]
                            fleet=lambda: list(FLEET))
    port = await server.start()
    out: list[str] = []
    try:
        monkeypatch.setattr(plugin, "direct_url_ssl", lambda url, ca: False)
        t = plugin.Target(manager=_Manager(), namespace="team-a",  # type: ignore[arg-type]
                          controller_name="jobmirror.dev/controller", inspect_url=f"http://127.0.0.1:{port}", token="t")
        args = argparse.Namespace(kind=None, worker=None, state=None, output=output)
        assert await plugin.status(t, args, out.append) == 0
    finally:
        await server.stop()
    text = "\n".join(out)
    if output == "json":
        workers = {w["name"]: w for w in json.loads(text)["workers"]}
        assert workers["w-silent"]["health"] == "STALLED" and workers["w-silent"]["reason"] == STALL
        assert workers["w-down"]["reason"] == api.WITHHELD_ERROR  # a namespace's user
    else:
        row = next(ln for ln in out if ln.startswith("w-silent"))
        assert row.split()[1:3] == ["STALLED", "2026-11-26T23:26:00Z"] and row.endswith(STALL)
