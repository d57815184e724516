"""Fit catches a missing ServiceAccount before placing (issue 36 item 4).

The worker's ServiceAccount admission plugin refuses every pod naming a ServiceAccount its
namespace lacks (``FailedCreate: ... error looking up service account ns/name``), so RoomAware
watches each worker's ServiceAccounts by name, in the namespaces copies go to, and such a worker
is never a fit. ``default`` is made by the worker's own kube-controller-manager (even in a
namespace the controller creates with the copy), and accounts not known yet — not listed, not
readable — are no reason to refuse: unknown is not never.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kruntime.resources import Obj
from mirror.naming import ANNOTATION_CLUSTER, ANNOTATION_PIN
from mirror.room.view import SERVICE_ACCOUNTS, RoomView, service_account_of
from testkit.fakecluster import FakeApiServer
from testkit.fakefleet import fake_fleet, job
from tests.unit.test_placement_room import NODES, placed


def account(ns: str, name: str) -> Obj:
    return {"metadata": {"name": name, "namespace": ns}, "secrets": [{"name": f"{name}-token"}]}


def running_as(name: str, sa: str, *, field: str = "serviceAccountName", **kw: object) -> Obj:
    j = job(name, **kw)  # type: ignore[arg-type]
    j["spec"]["template"]["spec"][field] = sa
    return j


@pytest.mark.parametrize(("spec", "want"), [
    ({}, ""),
    ({"serviceAccountName": "builder"}, "builder"),
    ({"serviceAccount": "legacy"}, "legacy"),  # the deprecated field, read when the name is unset
    ({"serviceAccountName": "builder", "serviceAccount": "legacy"}, "builder"),
    ({"serviceAccountName": ""}, ""),
])
def test_the_service_account_a_template_runs_as(spec: Obj, want: str) -> None:
    assert service_account_of({"spec": spec}) == want


async def _run(view: RoomView) -> list[asyncio.Task[None]]:
    tasks = [asyncio.create_task(i.run()) for i in view.informers()]
    await asyncio.gather(*(i.wait_synced(2) for i in view.informers()))
    return tasks


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    s = FakeApiServer()
    s.seed(SERVICE_ACCOUNTS.path("team-a"), account("team-a", "builder"))
    s.seed(SERVICE_ACCOUNTS.path("team-b"), account("team-b", "deployer"))
    yield s


@pytest.mark.parametrize(("namespaces", "ns", "name", "lacks"), [
    ((), "team-a", "builder", False),
    ((), "team-a", "deployer", True),  # in another namespace only
    ((), "team-c", "builder", True),  # a namespace the worker does not have: created with the copy, empty
    ((), "team-c", "default", False),  # made by the worker's kcm with the namespace
    ((), "team-a", "", False),  # no name: the default one
    (("team-a",), "team-a", "deployer", True),
    (("team-a",), "team-b", "deployer", False),  # not watched: unknown, so not refused
], ids=["present", "other-namespace", "new-namespace", "default", "unnamed", "listed-ns", "unwatched-ns"])
async def test_a_worker_lacks_an_account_only_when_it_surely_does(
        server: FakeApiServer, namespaces: tuple[str, ...], ns: str, name: str, lacks: bool) -> None:
    view = RoomView("w1", server.client("w1"), namespaces=namespaces)
    tasks = await _run(view)
    try:
        assert view.lacks_account(ns, name) is lacks
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_accounts_not_known_yet_are_no_reason_to_refuse(server: FakeApiServer) -> None:
    view = RoomView("w1", server.client("w1"))  # never listed (no RBAC on the worker: the same)
    assert not view.lacks_account("team-a", "nobody")


async def test_an_account_created_later_is_seen(server: FakeApiServer) -> None:
    view = RoomView("w1", server.client("w1"))
    tasks = await _run(view)
    try:
        assert view.lacks_account("team-a", "late")
        server.seed(SERVICE_ACCOUNTS.path("team-a"), account("team-a", "late"))
        for _ in range(50):
            if not view.lacks_account("team-a", "late"):
                break
            await asyncio.sleep(0.02)
        assert not view.lacks_account("team-a", "late")
        # Kept by namespace and name only: a ServiceAccount's secrets are never cached.
        kept = view.accounts.get("team-a/builder")
        assert kept is not None and "secrets" not in kept
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_job_goes_where_its_service_account_is_and_waits_naming_it_when_nowhere() -> None:
    async with fake_fleet(nodes=NODES) as f:
        f.workers["worker-2"].seed(SERVICE_ACCOUNTS.path("default"), account("default", "builder"))
        await f.settle()
        for i, field in enumerate(("serviceAccountName", "serviceAccount")):
            await f.create(running_as(f"build-{i}", "builder", field=field))
            await f.sync(f"build-{i}")
            # least loaded would have tie-broken to worker-1 for the first
            assert placed(f, f"build-{i}")[ANNOTATION_CLUSTER] == "worker-2"
        await f.create(running_as("plain", "default"))
        await f.sync("plain")
        assert placed(f, "plain")[ANNOTATION_CLUSTER] == "worker-1"  # default is everywhere: load decides
        await f.create(running_as("nowhere", "ghost"))
        await f.sync("nowhere")
        assert ANNOTATION_CLUSTER not in placed(f, "nowhere")
        assert [m for r, m in f.events("nowhere") if r == "NoWorkerFits"] == [
            "cannot dispatch: no worker could ever run its pod: worker-1: has no ServiceAccount default/ghost "
            "(create it there); worker-2: has no ServiceAccount default/ghost (create it there)"]
        # A pin wins over the fit, as over room: the copy goes there, and the worker's own FailedCreate and
        # CopyStuck tell the user why it does not run (a pinned Job is never moved).
        await f.create(running_as("pinned", "builder", annotations={ANNOTATION_PIN: "worker-1"}))
        await f.sync("pinned")
        assert placed(f, "pinned")[ANNOTATION_CLUSTER] == "worker-1"
        # Created there: the Job waiting for it is placed at its next look.
        f.workers["worker-1"].seed(SERVICE_ACCOUNTS.path("default"), account("default", "ghost"))
        await f.settle()
        await f.sync("nowhere")
        assert placed(f, "nowhere")[ANNOTATION_CLUSTER] == "worker-1"


def test_the_accounts_watch_takes_no_connection_of_the_workers_watch_pool(server: FakeApiServer) -> None:
    """The worker's watch client has a pool sized for the copy, event and room watches (a watch holds a
    connection as long as it runs): one more watch there would leave another waiting for a connection."""
    client = server.client("w1")
    view = RoomView("w1", client)
    assert view.accounts.client is not client and view.accounts.client.purpose == "room-accounts"
    assert all(i.client is client for i in (view.nodes, view.pods, view.classes))
