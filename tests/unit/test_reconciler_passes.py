"""The reconciler's passes as tables, on fake API servers (testkit/fakefleet.py).

Each case builds a fleet, shapes it as the scenario needs (a worker that refuses, a foreign
object of the copy's name, a concurrent writer), runs passes and asserts what the servers hold,
which events were written and how many calls each server got. The same behaviours run on real
API servers in tests/integration/; these tables reach the corners without one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kruntime.client import ApiError
from kruntime.resources import JOBS, PODS, Obj
from mirror.manager_writes import StatusRejected
from mirror.naming import ANNOTATION_CLUSTER, ANNOTATION_PIN, FINALIZER
from mirror.progress import Phase, Stuck
from testkit.fakefleet import FakeFleet, fake_fleet, job

T0 = "2026-11-25T00:00:00Z"
COMPLETE = {"conditions": [{"type": t, "status": "True", "lastProbeTime": T0, "lastTransitionTime": T0}
                           for t in ("SuccessCriteriaMet", "Complete")],
            "succeeded": 1, "active": 0, "ready": 0, "terminating": 0, "startTime": T0,
            "completionTime": "2026-11-25T00:00:05Z", "uncountedTerminatedPods": {}}
RUNNING = {"active": 1, "ready": 1, "terminating": 0, "startTime": T0, "uncountedTerminatedPods": {}}


def placed_on(f: FakeFleet, name: str = "a") -> str:
    got = f.job(name)
    assert got is not None
    return str(got["metadata"]["annotations"][ANNOTATION_CLUSTER])


async def worker_status(f: FakeFleet, worker: str, status: Obj, name: str = "a") -> None:
    """What the worker's Job controller would write on the copy."""
    client = f.workers[worker].client("kcm")
    current = await client.get(JOBS, "default", name)
    await client.replace(JOBS, "default", name, {**current, "status": status}, subresource="status")
    await f.settle()


def refuse(method: str, path_end: str = "/jobs", status: int = 403) -> Callable[[str, str, Any], ApiError | None]:
    """A reactor answering ``method`` on paths ending ``path_end`` with ``status`` (an admission webhook's no)."""
    def reactor(m: str, path: str, _: Any) -> ApiError | None:
        if m == method and path.endswith(path_end):
            return ApiError(status, "Invalid" if status == 422 else "Forbidden", f"admission webhook denied the {m}")
        return None
    return reactor


async def test_a_new_job_is_placed_and_copied_in_one_pass_with_one_manager_write() -> None:
    async with fake_fleet() as f:
        await f.create(job("a"))
        before = len(f.manager.calls)
        await f.sync("a")
        worker = placed_on(f)
        got = f.job("a")
        assert got is not None and FINALIZER in got["metadata"]["finalizers"]
        copy = f.copy(worker, "a")
        assert copy is not None and "managedBy" not in copy["spec"]
        # The one manager write is the placement; no Event: the annotations say where the copy went.
        assert [c.method for c in f.manager.calls[before:]] == ["PATCH"]
        assert f.workers[worker].count("POST", "/jobs") == 1
        assert f.reasons("a") == []


async def test_least_loaded_spreads_a_burst_across_workers() -> None:
    async with fake_fleet() as f:
        for n in ("a", "b", "c", "d"):
            await f.create(job(n))
            await f.sync(n)
        assert sorted(placed_on(f, n) for n in "abcd") == ["worker-1", "worker-1", "worker-2", "worker-2"]


@pytest.mark.parametrize(
    ("pinned", "want_worker", "want_reason"),
    [(False, "worker-2", "WorkerRefused"), (True, "worker-1", "WorkerRefused")],
    ids=["unpinned-moves", "pinned-backs-off"],
)
async def test_a_refused_create(pinned: bool, want_worker: str, want_reason: str) -> None:
    async with fake_fleet() as f:
        f.workers["worker-1"].react(refuse("POST"))
        await f.create(job("a", annotations={ANNOTATION_PIN: "worker-1"} if pinned else {}))
        after = await f.sync("a")
        assert placed_on(f) == want_worker
        assert f.reasons("a") == [want_reason]
        if pinned:
            assert after is not None and after > 0  # retried with backoff
        else:  # moved and created on the other worker in the same pass: no second pass for the move
            assert f.copy("worker-2", "a") is not None and f.copy("worker-1", "a") is None


@pytest.mark.parametrize(("pinned", "moved"), [(False, True), (True, False)], ids=["unpinned", "pinned"])
async def test_a_foreign_object_of_the_copys_name_is_never_touched(pinned: bool, moved: bool) -> None:
    async with fake_fleet() as f:
        foreign = f.workers["worker-1"].seed(JOBS.path("default"), job("a", managed_by="someone-else"))
        await f.create(job("a", annotations={ANNOTATION_PIN: "worker-1"} if pinned else {}))
        await f.sync("a")
        await f.sync("a")
        assert (placed_on(f) == "worker-2") is moved
        assert "NameCollision" in f.reasons("a")
        kept = f.copy("worker-1", "a")
        assert kept is not None and kept["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]
        assert f.workers["worker-1"].count("DELETE") == f.workers["worker-1"].count("PATCH") == 0


async def test_a_finished_copy_finishes_the_job_deletes_the_copy_and_releases_the_finalizer() -> None:
    async with fake_fleet() as f:
        await f.create(job("a"))
        await f.sync("a")
        worker = placed_on(f)
        await worker_status(f, worker, RUNNING)
        await f.sync("a")
        mirrored = f.job("a")
        assert mirrored is not None and mirrored["status"]["active"] == 1
        await worker_status(f, worker, COMPLETE)
        before = len(f.manager.calls)
        assert await f.sync("a") is None
        done = f.job("a")
        assert done is not None and done["metadata"]["finalizers"] == []
        assert [c["type"] for c in done["status"]["conditions"]] == ["SuccessCriteriaMet", "Complete"]
        assert f.copy(worker, "a") is None
        assert f.workers[worker].count("POST", "/jobs") == 1 and f.workers[worker].count("DELETE", "/jobs/a") == 1
        # The normal path writes no Event: the Complete condition says the Job is over (issue 23).
        assert [c.method for c in f.manager.calls[before:]] == ["PUT", "PATCH"]
        assert f.reasons("a") == []


async def test_a_finished_job_gives_back_the_room_reserved_for_its_pods() -> None:
    """Its pods may have been bound and ended between two looks at the room: the reservation must
    not hold their room until it lapses (it capped dispatch at a worker's pod slots per minute)."""
    ready = [{"type": "Ready", "status": "True"}]
    nodes = [{"metadata": {"name": "n1", "labels": {}}, "spec": {},
              "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}, "conditions": ready}}]
    async with fake_fleet(nodes={"worker-1": nodes, "worker-2": nodes}) as f:
        await f.create(job("a"))
        await f.sync("a")
        worker = placed_on(f)
        uid = f.job("a")["metadata"]["uid"]  # type: ignore[index]
        assert uid in f.reconciler.rooms[worker].reserved  # no pod of it bound yet
        await worker_status(f, worker, COMPLETE)
        assert await f.sync("a") is None
        assert f.copy(worker, "a") is None
        assert all(uid not in room.reserved for room in f.reconciler.rooms.values())


async def test_deleting_the_manager_job_deletes_its_copy_first() -> None:
    async with fake_fleet() as f:
        await f.create(job("a"))
        await f.sync("a")
        worker = placed_on(f)
        await f.manager.client("user").delete(JOBS, "default", "a")
        await f.settle()
        held = f.job("a")
        assert held is not None and held["metadata"]["deletionTimestamp"]  # our finalizer holds it
        await f.sync("a")
        assert f.copy(worker, "a") is None and f.job("a") is None
        assert f.reasons("a") == ["RemoteDeleted"]  # unlike a finished Job's cleanup, a deletion is evented


async def test_a_suspended_job_is_held_without_a_copy() -> None:
    async with fake_fleet() as f:
        await f.create(job("a", suspend=True))
        await f.sync("a")
        held = f.job("a")
        assert held is not None and FINALIZER in held["metadata"]["finalizers"]
        assert [c["type"] for c in held["status"]["conditions"]] == ["Suspended"]
        assert all(s.count("POST", "/jobs") == 0 for s in f.workers.values())


async def test_a_concurrent_write_loses_the_placement_race_and_nothing_is_created() -> None:
    async with fake_fleet() as f:
        await f.create(job("a"))
        user = f.manager.client("user")
        await user.patch(JOBS, "default", "a", {"metadata": {"labels": {"edited": "yes"}}})
        f.jobs.cache["default/a"] = {**f.jobs.cache["default/a"]}  # the cache still holds the older version
        stale = f.manager.stored(JOBS.path("default", "a"))
        assert stale is not None
        f.jobs.cache["default/a"]["metadata"] = {**stale["metadata"], "resourceVersion": "1"}
        with pytest.raises(ApiError) as lost:
            await f.reconciler.reconcile("default/a")
        assert lost.value.conflict
        assert all(s.count("POST", "/jobs") == 0 for s in f.workers.values())


async def test_a_rejected_status_is_evented_and_raised_for_a_retry() -> None:
    async with fake_fleet() as f:
        await f.create(job("a"))
        await f.sync("a")
        await worker_status(f, placed_on(f), RUNNING)
        f.manager.react(refuse("PUT", "/status", 422))
        with pytest.raises(StatusRejected):
            await f.sync("a")
        await f.settle()
        assert "StatusRejected" in f.reasons("a")


async def test_a_worker_lost_between_placement_and_create_is_left_at_once() -> None:
    async with fake_fleet() as f:
        await f.create(job("a", annotations={ANNOTATION_PIN: "worker-1"}))
        await f.sync("a")
        await f.create(job("b"))  # least loaded: worker-2

        def worker_2_goes_away(method: str, path: str, _: Any) -> None:
            if method == "PATCH" and path.endswith("/jobs/b"):
                f.clusters["worker-2"].mark_suspect("connection refused")

        f.manager.react(worker_2_goes_away)
        await f.sync("b")  # one pass: moved, and its copy created on worker-1 (no second pass for the move)
        assert placed_on(f, "b") == "worker-1"
        assert f.reasons("b") == ["Redispatched"]
        assert f.copy("worker-1", "b") is not None
        assert f.workers["worker-2"].count("POST", "/jobs") == 0


@pytest.mark.parametrize(("pinned", "started", "moved"), [(False, False, True), (False, True, False),
                                                          (True, False, False)],
                         ids=["moved", "a-container-started", "pinned"])
async def test_a_copy_whose_pods_never_scheduled_is_moved(pinned: bool, started: bool, moved: bool) -> None:
    """RoomAware (room views on both workers): the stuck copy goes where room is known to be now"""
    ready = [{"type": "Ready", "status": "True"}]
    nodes = [{"metadata": {"name": "n1", "labels": {}}, "spec": {},
              "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}, "conditions": ready}}]
    async with fake_fleet(nodes={"worker-1": nodes, "worker-2": nodes}) as f:
        await f.create(job("a", annotations={ANNOTATION_PIN: "worker-1"} if pinned else {}))
        await f.sync("a")
        assert placed_on(f) == "worker-1"
        copy = f.copy("worker-1", "a")
        assert copy is not None
        pod: Obj = {"metadata": {"name": "a-x7k2p", "labels": {
            "batch.kubernetes.io/controller-uid": copy["metadata"]["uid"]}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}
        pod["spec"]["nodeName"] = "n1"  # bound, but no container started: nothing ran, it may move
        kubelet = f.workers["worker-1"].client("kcm")
        pod = await kubelet.create(PODS, "default", pod)
        if started:  # the kubelet says its container runs (status is written apart, as a kubelet does)
            pod["status"] = {"phase": "Running", "containerStatuses": [
                {"name": "c", "state": {"running": {"startedAt": "2026-11-26T00:00:00Z"}}}]}
            await kubelet.replace(PODS, "default", "a-x7k2p", pod, subresource="status")
        uid = f.job("a")["metadata"]["uid"]  # type: ignore[index]
        f.reconciler.copy_stuck(uid, "worker-1", Stuck(Phase.PODS_CREATED, "pod a-x7k2p not bound: 0/1 nodes",
                                                       "its pod a-x7k2p has been unschedulable since …"))
        await f.sync("a")
        await f.sync("a")
        assert (placed_on(f) == "worker-2") is moved
        assert (f.copy("worker-1", "a") is None) is moved and (f.copy("worker-2", "a") is not None) is moved
        assert ("Replaced" in f.reasons("a")) is moved
        if moved:
            message = next(m for r, m in f.events("a") if r == "Replaced")
            assert message.startswith("moved from worker worker-1 to worker-2: its pod a-x7k2p has been")


async def test_without_room_views_a_stuck_copy_only_gets_the_event() -> None:
    async with fake_fleet() as f:  # LeastLoaded: no worker is known to have room
        await f.create(job("a"))
        await f.sync("a")
        f.reconciler.copy_stuck(f.job("a")["metadata"]["uid"], "worker-1",  # type: ignore[index]
                                Stuck(Phase.PODS_CREATED, "pod a-x not bound: 0/1 nodes", "unschedulable"))
        await f.sync("a")
        assert placed_on(f) == "worker-1" and f.copy("worker-1", "a") is not None and "Replaced" not in f.reasons("a")


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


NO_CONTROLLER = "no pod and no status from this worker's Job controller"
IMAGE = "container c of pod a-x: ErrImagePull: pull access denied for img"


def stuck(phase: Phase, cause: str) -> Stuck:
    return Stuck(phase, cause, f"the copy is stuck in phase {phase.label}: {cause}")


async def report_stuck(f: FakeFleet, worker: str, s: Stuck) -> None:
    """What worker events tell the reconciler (any placement policy: the cause is the worker's), then a pass."""
    f.reconciler.copy_stuck(f.job("a")["metadata"]["uid"], worker, s)  # type: ignore[index]
    await f.sync("a")


async def test_a_copy_stuck_without_a_job_controller_moves_under_any_policy() -> None:
    """LeastLoaded (no room views): a cause that is the worker's (not room) still moves the Job."""
    async with fake_fleet() as f:
        await f.create(job("a"))
        await f.sync("a")
        await report_stuck(f, "worker-1", stuck(Phase.CREATED, NO_CONTROLLER))
        assert placed_on(f) == "worker-2" and f.copy("worker-1", "a") is None and f.copy("worker-2", "a") is not None
        message = next(m for r, m in f.events("a") if r == "Replaced")
        assert message.startswith("moved from worker worker-1 to worker-2: the copy is stuck in phase created")


async def test_a_job_every_worker_fails_the_same_way_stays_with_one_warning() -> None:
    """An image that exists nowhere: moved once, then it stays on the second worker, told once per cause."""
    async with fake_fleet() as f:
        await f.create(job("a"))
        await f.sync("a")
        await report_stuck(f, "worker-1", stuck(Phase.PODS_BOUND, IMAGE))
        assert placed_on(f) == "worker-2"
        await report_stuck(f, "worker-2", stuck(Phase.PODS_BOUND, IMAGE.replace("a-x", "a-y")))
        assert placed_on(f) == "worker-2" and f.copy("worker-2", "a") is not None
        told = [m for r, m in f.events("a") if r == "CopyNotMoved"]
        assert told == ["stuck in phase pods bound on workers worker-1, worker-2: container c of pod a-y: "
                        "ErrImagePull: pull access denied for img; every worker it may use fails the same way "
                        "(pods bound: ErrImagePull): it stays on worker-2"]
        await report_stuck(f, "worker-2", stuck(Phase.PODS_BOUND, IMAGE))  # found again: not told again
        assert [r for r, _ in f.events("a")].count("CopyNotMoved") == 1 and placed_on(f) == "worker-2"


async def test_moves_back_off_and_are_bounded() -> None:
    """Three workers, a different cause on each: the second move waits moveBackoff, then maxMoves holds it."""
    clock = Clock()
    async with fake_fleet(("worker-1", "worker-2", "worker-3"), clock=clock,
                          progress={"maxMoves": 2, "moveBackoff": 60, "avoidFor": 1000}) as f:
        await f.create(job("a", annotations={}))
        await f.sync("a")
        first = placed_on(f)
        await report_stuck(f, first, stuck(Phase.CREATED, NO_CONTROLLER))
        second = placed_on(f)
        assert second != first
        f.reconciler.copy_stuck(f.job("a")["metadata"]["uid"], second,  # type: ignore[index]
                                stuck(Phase.PODS_BOUND, IMAGE))
        assert await f.sync("a") == pytest.approx(60)  # the backoff since the first move
        assert placed_on(f) == second
        clock.t += 61
        await f.sync("a")
        third = placed_on(f)
        assert third not in (first, second) and f.copy(second, "a") is None
        await report_stuck(f, third, stuck(Phase.CREATED, "FailedCreate: pods are forbidden: exceeded quota"))
        assert placed_on(f) == third and f.copy(third, "a") is not None
        told = [m for r, m in f.events("a") if r == "CopyNotMoved"]
        assert told == [f"stuck in phase created on worker {third}: FailedCreate: pods are forbidden: exceeded "
                        "quota; moved 2 times already (at most 2): it stays on " + third]


async def test_a_stuck_copy_with_no_other_worker_up_moves_once_one_is() -> None:
    """The only other worker is down when the copy is found stuck: the Job stays (no CopyNotMoved: a worker
    down is not one that failed it) and is asked again each resync; once the worker is back it moves."""
    async with fake_fleet() as f:
        await f.create(job("a"))
        await f.sync("a")
        first = placed_on(f)
        other = "worker-2" if first == "worker-1" else "worker-1"
        f.clusters[other].mark_suspect("connection refused")
        f.reconciler.copy_stuck(f.job("a")["metadata"]["uid"], first,  # type: ignore[index]
                                stuck(Phase.CREATED, NO_CONTROLLER))
        assert await f.sync("a") == f.cfg.resync_period
        assert placed_on(f) == first and "CopyNotMoved" not in f.reasons("a") and "Replaced" not in f.reasons("a")
        await f.clusters[other].probe_once()  # back
        await f.sync("a")
        assert placed_on(f) == other and f.copy(first, "a") is None and f.copy(other, "a") is not None
        assert f.reasons("a").count("Replaced") == 1
