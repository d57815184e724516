"""WorkerEvents finds copies that make no progress and workers that run nothing (issue 36 item 2, 3).

On the fake fleet: the real reconciler places pinned Jobs on worker-1 (no Job controller
there: copies stay without pods unless a test writes them), and a WorkerEvents on worker-1
with a clock the test moves reads the copies' pods and the worker's Warning events.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from kruntime.events import ObjectEvents
from kruntime.resources import EVENTS, JOBS, PODS, Obj
from mirror import metrics
from mirror.jobs.kind import JOB_KIND
from mirror.naming import ANNOTATION_PIN
from mirror.progress import Phase, ProgressConfig, Stuck
from mirror.worker_events import WorkerEvents
from testkit.fakefleet import FakeFleet, fake_fleet, job

W = "worker-1"


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Bed:
    def __init__(self, fleet: FakeFleet, we: WorkerEvents, clock: Clock) -> None:
        self.fleet, self.we, self.clock = fleet, we, clock
        self.told: list[tuple[str, str, str]] = []
        self.stuck: list[Stuck] = []
        we.on_stuck = self._on_stuck

    def _on_stuck(self, obj: Obj, worker: str, stuck: Stuck) -> None:
        self.told.append((obj["metadata"]["name"], worker, stuck.message))
        self.stuck.append(stuck)

    async def place(self, name: str) -> Obj:
        await self.fleet.create(job(name, annotations={ANNOTATION_PIN: W}))
        await self.fleet.sync(name)
        remote = self.fleet.copy(W, name)
        assert remote is not None
        return remote

    async def check(self) -> None:
        await self.we.check_progress()
        await self.fleet.settle()


@pytest.fixture
async def fb() -> AsyncIterator[Bed]:
    async with fake_fleet((W, "worker-2")) as fleet:
        clock = Clock()
        we = WorkerEvents(fleet.clusters[W], JOB_KIND, fleet.jobs, ObjectEvents(fleet.recorder, JOBS),
                          unschedulable_timeout=300, clock=clock,
                          progress=ProgressConfig.model_validate({"maxLooksPerRound": 5}))
        task = asyncio.create_task(we.informer.run())
        await asyncio.wait_for(we.informer.wait_synced(), 5)
        try:
            yield Bed(fleet, we, clock)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def warning(reason: str, message: str, inv: Obj) -> Obj:
    return {"metadata": {"generateName": "ev-"}, "type": "Warning", "reason": reason, "message": message,
            "count": 1, "lastTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "involvedObject": inv}


async def test_a_copy_without_pod_or_status_is_told_once(fb: Bed) -> None:
    await fb.place("a")
    await fb.check()
    assert fb.told == []  # not past podsCreatedTimeout yet
    fb.clock.advance(121)
    await fb.check()
    assert fb.told == [("a", W, f"the copy default/a on worker {W} is stuck in phase created past podsCreatedTimeout "
                                 "(120s): no pod and no status from this worker's Job controller")]
    # what the reconciler decides a move with: the phase and the worker's words apart from the message
    assert (fb.stuck[0].phase, fb.stuck[0].cause) == (Phase.CREATED, "no pod and no status from this worker's Job "
                                                                     "controller")
    assert "CopyStuck" in fb.fleet.reasons("a")
    await fb.check()
    assert len(fb.told) == 1  # once per phase


async def test_the_worker_failedcreate_is_the_cause(fb: Bed) -> None:
    remote = await fb.place("q")
    quota = 'pods "q-x" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=0, limited: pods=0'
    fb.fleet.workers[W].seed(EVENTS.path("default"), warning("FailedCreate", quota, {
        "kind": "Job", "namespace": "default", "name": "q", "uid": remote["metadata"]["uid"]}))
    await fb.fleet.settle()
    fb.clock.advance(121)
    await fb.check()
    assert [why for _, _, why in fb.told] == [f"the copy default/q on worker {W} is stuck in phase created past "
                                               f"podsCreatedTimeout (120s): FailedCreate: {quota}"]
    assert fb.fleet.clusters[W].stalled is None  # a refusal the worker names is not a silent worker


async def test_bound_pods_that_cannot_pull_are_stuck_and_a_started_one_is_never_read_again(fb: Bed) -> None:
    remote = await fb.place("img")
    uid = remote["metadata"]["uid"]
    w = fb.fleet.workers[W]
    await w.client("kcm").patch(JOBS, "default", "img", {"status": {"active": 1, "startTime": "2026-01-01T00:00:00Z"}},
                                subresource="status")
    bound = (fb.clock.now - timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    w.seed(PODS.path("default"), {
        "metadata": {"name": "img-abcde", "labels": {"batch.kubernetes.io/controller-uid": uid}},
        "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "reg.example/app:1"}]},
        "status": {"phase": "Pending",
                   "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": bound}],
                   "containerStatuses": [{"name": "main", "restartCount": 0, "state": {"waiting": {
                       "reason": "ImagePullBackOff", "message": 'Back-off pulling image "reg.example/app:1"'}}}]}})
    await fb.fleet.settle()
    fb.clock.advance(301)
    await fb.check()
    assert [why for _, _, why in fb.told] == [
        f"the copy default/img on worker {W} is stuck in phase pods bound past containerStartTimeout (300s): "
        'container main of pod img-abcde: ImagePullBackOff: Back-off pulling image "reg.example/app:1"']
    # the image arrives: the container starts, and the copy is never read again
    pod = w.stored(PODS.path("default", "img-abcde"))
    assert pod is not None
    await w.client("kubelet").patch(PODS, "default", "img-abcde", {"status": {
        "phase": "Running", "containerStatuses": [{"name": "main", "started": True, "restartCount": 0,
                                                   "state": {"running": {"startedAt": bound}}}]}},
        subresource="status")
    await fb.check()
    reads = w.count("GET", "/pods")
    fb.clock.advance(600)
    await fb.check()
    assert w.count("GET", "/pods") == reads
    assert len(fb.told) == 1


async def test_a_worker_whose_copies_get_no_pod_is_stalled_until_its_controller_acts(fb: Bed) -> None:
    cluster = fb.fleet.clusters[W]
    for name in ("s1", "s2"):
        await fb.place(name)
    fb.clock.advance(121)
    await fb.check()
    assert cluster.stalled is None  # two silent copies: not yet (stalledCopies 3)
    await fb.place("s3")
    fb.clock.advance(121)
    await fb.check()
    assert cluster.stalled == (f"3 copies on worker {W} have had no pod for longer than podsCreatedTimeout (120s) and "
                               "its Job controller says nothing (no FailedCreate): is it running?")
    assert metrics.WORKER_STALLED.labels(W)._value.get() == 1
    assert cluster.describe()["stalled"] == cluster.stalled
    await fb.check()
    assert cluster.stalled is not None  # stays while nothing acts
    # the Job controller is back: it writes a status on one of the counted copies
    await fb.fleet.workers[W].client("kcm").patch(JOBS, "default", "s2", {"status": {
        "startTime": "2026-01-01T00:00:00Z", "active": 1}}, subresource="status")
    await fb.fleet.settle()
    await fb.check()
    assert cluster.stalled is None
    assert metrics.WORKER_STALLED.labels(W)._value.get() == 0


async def test_a_stall_ends_when_a_copy_that_stayed_changes_status_though_the_counted_ones_moved(fb: Bed) -> None:
    """Chaos job-controller-stopped: the silent copies were moved off (deleted), no copy is placed on the
    avoided worker; its Job controller returning shows only in a copy that stayed (its pods had started)."""
    cluster, kcm = fb.fleet.clusters[W], fb.fleet.workers[W].client("kcm")
    await fb.place("stayed")
    await kcm.patch(JOBS, "default", "stayed", {"status": {"startTime": "2026-01-01T00:00:00Z", "active": 1,
                                                            "ready": 1}}, subresource="status")
    for name in ("m1", "m2", "m3"):
        await fb.place(name)
    await fb.fleet.settle()
    fb.clock.advance(121)
    await fb.check()
    assert cluster.stalled is not None
    for name in ("m1", "m2", "m3"):  # moved off: deleted from the stalled worker
        await kcm.delete(JOBS, "default", name)
    await fb.fleet.settle()
    await fb.check()
    assert cluster.stalled is not None  # nothing has written a status yet
    await kcm.patch(JOBS, "default", "stayed", {"status": {"active": 0, "ready": 0, "succeeded": 1}},
                    subresource="status")
    await fb.fleet.settle()
    await fb.check()
    assert cluster.stalled is None
    assert metrics.WORKER_STALLED.labels(W)._value.get() == 0


async def test_pods_are_read_for_a_bounded_number_of_copies_per_round(fb: Bed) -> None:
    fb.we.progress = ProgressConfig.model_validate({"maxLooksPerRound": 2})
    for name in ("b1", "b2", "b3"):
        await fb.place(name)
    w = fb.fleet.workers[W]
    before = w.count("GET", "/pods")
    await fb.check()
    assert w.count("GET", "/pods") == before  # none past a deadline: no read at all
    fb.clock.advance(121)
    await fb.check()
    assert w.count("GET", "/pods") == before + 2
    await fb.check()  # the third, least recently read, comes first in the next round
    assert sorted(name for name, _, _ in fb.told) == ["b1", "b2", "b3"]


async def test_a_copy_being_deleted_is_not_read(fb: Bed) -> None:
    await fb.place("gone")
    w = fb.fleet.workers[W]
    await w.client("user").patch(JOBS, "default", "gone", {"metadata": {"finalizers": ["test.dev/hold"]}})
    await w.client("user").delete(JOBS, "default", "gone")
    await fb.fleet.settle()
    before = w.count("GET", "/pods")
    fb.clock.advance(121)
    await fb.check()
    assert w.count("GET", "/pods") == before and fb.told == []
