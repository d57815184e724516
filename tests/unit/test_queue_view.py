"""The waiting line as users see it: the inspect API's queue (positions over the whole line, only
the Jobs a caller may list), and the plugin's table."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from mirror.inspect import api, plugin
from mirror.placer import QueueEntry
from testkit.inspect_api import Reviews, get_once

LINE = [
    QueueEntry("Job", "team-a/big", "a", 1000, 0.25, 40.0, "no worker has room for its pod now", 12.0),
    QueueEntry("Job", "team-b/one", "b", 0, 0.0, 5.0, "w1 has room now but Jobs ahead of it in line wait for it"),
    QueueEntry("JobSet", "team-a/train", "a", 0, 0.25, 3.0, "tenant a is at its quota: cpu 60+8 > quota 64"),
]


@pytest.mark.parametrize(("namespace", "tenant", "positions"), [
    (None, None, [1, 2, 3]),
    ("team-a", None, [1, 3]),
    ("team-b", None, [2]),
    (None, "b", [2]),
    ("team-a", "b", []),
    ("team-c", None, []),
])
def test_queue_rows_keep_positions_in_the_whole_line(namespace: str | None, tenant: str | None,
                                                     positions: list[int]) -> None:
    rows = api.queue_rows(LINE, namespace, tenant)
    assert [r["position"] for r in rows] == positions
    for r in rows:
        e = LINE[r["position"] - 1]
        assert f"{r['namespace']}/{r['name']}" == e.key and r["tenant"] == e.tenant and r["why"] == e.why


def test_the_table_says_what_waits_and_what_is_hidden() -> None:
    text = plugin.format_queue(api.queue_rows(LINE, "team-a", None), waiting=3)
    assert text.splitlines()[0].split() == ["POS", "KIND", "NAMESPACE", "NAME", "TENANT", "PRIORITY", "SHARE",
                                            "WAITED", "STARTS-IN", "WHY"]
    assert "big" in text and "train" in text and "one" not in text
    assert "12s" in text and "2 shown, 3 waiting in all" in text
    assert plugin.format_queue([], waiting=3) == "no Job of yours waits (3 waiting in all)"


@pytest.mark.parametrize(("path", "allowed", "status", "names"), [
    ("/v1/namespaces/team-a/queue", {("list", "team-a")}, 200, ["big", "train"]),
    ("/v1/namespaces/team-a/queue?tenant=a", {("list", "team-a")}, 200, ["big", "train"]),
    ("/v1/namespaces/team-a/queue", {("list", "team-b")}, 403, []),
    ("/v1/queue", {("list", "team-a")}, 403, []),
    ("/v1/queue", {("list", None)}, 200, ["big", "one", "train"]),
    ("/v1/namespaces/Not_A_Namespace/queue", {("list", None)}, 400, []),
])
async def test_the_inspect_api_shows_the_line_to_who_may_list_jobs_there(
        path: str, allowed: set[tuple[str, str | None]], status: int, names: list[str]) -> None:
    got, body = await get_once(path, allowed, queue=lambda: list(LINE))
    assert got == status, body
    if status == 200:
        assert [r["name"] for r in body["items"]] == names and body["waiting"] == 3
    else:
        assert "error" in body


async def test_the_plugin_reads_the_queue_through_the_inspect_api(monkeypatch: pytest.MonkeyPatch) -> None:
    server = api.InspectApi("127.0.0.1:0", Reviews({("list", "team-b")}), {}, "jobmirror.dev/controller",  # type: ignore[arg-type]
                            queue=lambda: list(LINE))
    port = await server.start()
    try:
        # The test server speaks plain http: the plugin's https-only rule is checked in its own test.
        monkeypatch.setattr(plugin, "direct_url_ssl", lambda url, ca: False)
        manager: Any = argparse.Namespace(timeout=5.0)
        t = plugin.Target(manager=manager, namespace="team-b", controller_name="jobmirror.dev/controller",
                          inspect_url=f"http://127.0.0.1:{port}", token="t")
        out: list[str] = []
        assert await plugin.queue(t, argparse.Namespace(tenant=None, output=None), out.append) == 0
    finally:
        await server.stop()
    assert "team-b" in out[0] and "1 shown, 3 waiting in all" in out[0]
