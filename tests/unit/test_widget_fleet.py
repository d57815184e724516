"""A second kind proven in a fleet: the Widget (testkit/widget.py) through fake API servers end to end.

The same reconciler, worker caches, placer and writes that mirror Jobs run a Widget from
create to cleanup: placed, copied to a worker, its status mirrored, finished, its copy deleted
and the finalizer released — and a Widget and a Job of the same name on one fleet's servers
never touch each other. Nothing in mirror/ names the Widget (test_mirror_kinds.py checks the
imports); what this kind needs from the core is only :class:`mirror.kinds.MirroredKind`.
"""

from __future__ import annotations

from kruntime.resources import JOBS, Obj
from mirror.naming import ANNOTATION_CLUSTER, FINALIZER
from testkit.fakefleet import CONTROLLER, FakeFleet, fake_fleet, job
from testkit.widget import WIDGET, WIDGETS, WidgetKind, make_widget
from tests.unit.test_reconciler_passes import refuse


async def worker_phase(f: FakeFleet, worker: str, phase: str, name: str = "w") -> None:
    """What the worker's Widget controller would write on the copy."""
    client = f.workers[worker].client("widget-controller")
    current = await client.get(WIDGETS, "default", name)
    await client.replace(WIDGETS, "default", name, {**current, "status": {"phase": phase}}, subresource="status")
    await f.settle()


def placed_on(f: FakeFleet, name: str = "w") -> str:
    got = f.job(name)
    assert got is not None
    return str(got["metadata"]["annotations"][ANNOTATION_CLUSTER])


async def test_a_widget_runs_through_the_fleet_from_create_to_cleanup() -> None:
    async with fake_fleet(kind=WIDGET) as f:
        await f.create(make_widget("w", owner=CONTROLLER, size=2))
        await f.sync("w")
        worker = placed_on(f)
        mirrored = f.job("w")
        assert mirrored is not None and FINALIZER in mirrored["metadata"]["finalizers"]
        copy = f.copy(worker, "w")
        assert copy is not None and copy["spec"] == {"size": 2}
        assert f.workers[worker].count("POST", "/widgets") == 1

        await worker_phase(f, worker, "Running")
        await f.sync("w")
        running = f.job("w")
        assert running is not None and running["status"] == {"phase": "Running"}

        await patch_size(f, 3)  # the user changes the mutable spec: it follows to the copy
        await f.sync("w")
        copy = f.copy(worker, "w")
        assert copy is not None and copy["spec"] == {"size": 3}

        await worker_phase(f, worker, "Done")
        assert await f.sync("w") is None
        done = f.job("w")
        assert done is not None and done["status"] == {"phase": "Done"} and done["metadata"]["finalizers"] == []
        assert f.copy(worker, "w") is None
        assert f.workers[worker].count("DELETE", "/widgets/w") == 1
        assert f.reasons("w") == []


async def patch_size(f: FakeFleet, size: int, name: str = "w") -> None:
    await f.manager.client("user").patch(WIDGETS, "default", name, {"spec": {"size": size}})
    await f.settle()


async def test_a_widget_not_claimed_is_left_alone() -> None:
    async with fake_fleet(kind=WIDGET) as f:
        await f.create(make_widget("w", owner="someone-else"))
        assert await f.sync("w") is None
        got = f.job("w")
        assert got is not None and not got["metadata"].get("finalizers")
        assert all(f.copy(w, "w") is None for w in f.workers)


async def test_a_widget_and_a_job_of_the_same_name_do_not_touch_each_other() -> None:
    """a Job named like the Widget already on the worker is a different kind: not a collision"""
    async with fake_fleet(("worker-1",), kind=WIDGET) as f:
        other: Obj = f.workers["worker-1"].seed(JOBS.path("default"), job("w"))
        await f.create(make_widget("w", owner=CONTROLLER))
        await f.sync("w")
        assert placed_on(f) == "worker-1" and f.copy("worker-1", "w") is not None
        assert "NameCollision" not in f.reasons("w")
        kept = f.workers["worker-1"].stored(JOBS.path("default", "w"))
        assert kept is not None and kept["metadata"]["resourceVersion"] == other["metadata"]["resourceVersion"]


async def test_deleting_a_widget_deletes_its_copy_first() -> None:
    async with fake_fleet(kind=WIDGET) as f:
        await f.create(make_widget("w", owner=CONTROLLER))
        await f.sync("w")
        worker = placed_on(f)
        await f.manager.client("user").delete(WIDGETS, "default", "w")
        await f.settle()
        held = f.job("w")
        assert held is not None and held["metadata"]["deletionTimestamp"]  # our finalizer holds it
        await f.sync("w")
        assert f.copy(worker, "w") is None and f.job("w") is None
        assert f.reasons("w") == ["RemoteDeleted"]


async def test_with_room_views_a_widget_is_placed_without_a_room_judgement() -> None:
    """RoomAware placement: a kind with no pod demand is placed by load, its pods never reserved"""
    ready = [{"type": "Ready", "status": "True"}]
    nodes = [{"metadata": {"name": "n1", "labels": {}}, "spec": {},
              "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "1"}, "conditions": ready}}]
    async with fake_fleet(nodes={"worker-1": nodes, "worker-2": nodes}, kind=WIDGET) as f:
        for n in ("a", "b", "c"):
            await f.create(make_widget(n, owner=CONTROLLER))
            await f.sync(n)
        assert sorted(placed_on(f, n) for n in "abc") in (["worker-1", "worker-1", "worker-2"],
                                                           ["worker-1", "worker-2", "worker-2"])
        assert all(not room.reserved for room in f.reconciler.rooms.values())


async def test_a_refused_widget_moves_to_the_other_worker_in_the_same_pass() -> None:
    async with fake_fleet(kind=WIDGET) as f:
        f.workers["worker-1"].react(refuse("POST", "/widgets"))
        await f.create(make_widget("w", owner=CONTROLLER))
        await f.sync("w")
        assert placed_on(f) == "worker-2" and f.copy("worker-2", "w") is not None
        assert f.reasons("w") == ["WorkerRefused"]


class RecreatingWidget(WidgetKind):
    """A Widget whose size change applies only to a paused copy (as a Job's template rewrite does)."""

    def recreate_when_refused(self, patch: Obj) -> bool:
        return True


async def test_a_refused_patch_of_a_paused_copy_recreates_it() -> None:
    """the plan's RECREATE_COPY on a kind without followed pods: nothing can still run, so the copy
    is deleted at once and made again from the manager's spec"""
    async with fake_fleet(("worker-1",), kind=RecreatingWidget()) as f:
        await f.create(make_widget("w", owner=CONTROLLER, size=1))
        await f.sync("w")
        worker = f.workers["worker-1"]
        first = await worker.client("widget-user").patch(WIDGETS, "default", "w", {"spec": {"paused": True}})
        worker.react(refuse("PATCH", "/widgets/w", status=422))
        await patch_size(f, 3)
        assert await f.sync("w") == 0.0  # deleted: looked at again at once
        assert f.copy("worker-1", "w") is None and f.reasons("w") == ["RemoteDeleted", "CopyRecreated"]
        await f.sync("w")
        again = f.copy("worker-1", "w")
        assert again is not None and again["spec"] == {"size": 3}
        assert again["metadata"]["uid"] != first["metadata"]["uid"]
