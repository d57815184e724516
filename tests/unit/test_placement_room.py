"""RoomAware placement: never where the pod can never run, where it fits now when somewhere does.

The narrowing rule as a table (mirror/placement.py), then whole passes on fake workers whose
Nodes and Pods the room views watch (testkit/fakefleet.py).
"""

from __future__ import annotations

import asyncio
import random
import re

import pytest

from kruntime.resources import PODS, PRIORITY_CLASSES, Obj
from mirror.naming import ANNOTATION_CLUSTER, ANNOTATION_PIN, ANNOTATION_PLACEMENT_REASON, ANNOTATION_WORKER_SELECTOR
from mirror.placement import NoWorker, NoWorkerFits, WaitingForRoom, WorkerView, narrow_by_room, select_by_labels
from mirror.room.fit import WorkerFit
from mirror.scheduling.line import Waiting, WaitingLine, heads
from testkit.fakecluster import FakeClusterClient
from testkit.fakefleet import FakeFleet, fake_fleet, job

NEVER = WorkerFit(False, 0, "no node has example.com/gpu")
FULL = WorkerFit(True, 0, "no room now: largest free node has 1 cpu < 2 cpu requested")
ROOM = WorkerFit(True, 1, "1 of 1 pods fit now (3 cpu free)")


def views(*names: str, down: tuple[str, ...] = ()) -> list[WorkerView]:
    return [WorkerView(n, n not in down, 0, {}) for n in names]


@pytest.mark.parametrize(
    ("fits", "pin", "down", "healthy_after"),
    [
        ({"w1": NEVER, "w2": ROOM}, None, (), {"w2"}),
        ({"w1": FULL, "w2": ROOM}, None, (), {"w2"}),
        ({"w1": NEVER}, None, (), {"w2"}),  # w2's room unknown: it stays a candidate
        ({"w1": NEVER, "w2": ROOM}, "w1", (), {"w1", "w2"}),  # a pin wins over room
        ({"w1": ROOM, "w2": ROOM}, None, ("w1",), {"w2"}),  # an unhealthy worker stays out
        ({}, None, (), {"w1", "w2"}),
    ],
    ids=["never-left-out", "room-now-preferred", "unknown-kept", "pinned",
         "unhealthy", "no-views"],
)
def test_narrow_by_room(fits: dict[str, WorkerFit], pin: str | None, down: tuple[str, ...],
                        healthy_after: set[str]) -> None:
    got = narrow_by_room(views("w1", "w2", down=down), fits, pin)
    assert {w.name for w in got if w.healthy} == healthy_after


TWO = WorkerFit(True, 2, "2 of 4 pods fit now (4 cpu free)")
FOUR = WorkerFit(True, 4, "4 of 4 pods fit now (16 cpu free)")


@pytest.mark.parametrize(
    ("fits", "healthy_after"),
    [
        ({"w1": TWO, "w2": FOUR}, {"w2"}),  # where all of them start at once
        ({"w1": FOUR, "w2": FOUR}, {"w1", "w2"}),  # a tie: the policy's balance decides
        ({"w1": TWO}, {"w1", "w2"}),  # w2's room unknown: it may hold them all
        ({"w1": FULL, "w2": TWO}, {"w2"}),  # fewer now beats none now
    ],
    ids=["more-pods-now-wins", "tie", "unknown-kept", "some-beats-none"],
)
def test_the_worker_where_most_pods_fit_now_is_preferred(fits: dict[str, WorkerFit],
                                                         healthy_after: set[str]) -> None:
    got = narrow_by_room(views("w1", "w2"), fits, None)
    assert {w.name for w in got if w.healthy} == healthy_after


OLDER, NEWER = ("2026-11-25T10:00:00Z", "u-old"), ("2026-11-25T11:00:00Z", "u-new")


@pytest.mark.parametrize(
    ("fits", "waiting", "healthy_after", "waits"),
    [
        ({"w1": FULL, "w2": FULL}, {}, None, "no worker has room for its pod now: w1: no room now"),
        ({"w1": NEVER, "w2": FULL}, {}, None, "no worker has room for its pod now: w2: no room now"),
        ({"w1": ROOM, "w2": ROOM}, {"u-old": Waiting(OLDER, frozenset({"w2"}))}, {"w1"}, None),
        ({"w1": NEVER, "w2": ROOM}, {"u-old": Waiting(OLDER, frozenset({"w2"}))}, None,
         "w2 has room now but Jobs ahead of it in line wait for it there"),
        ({"w1": ROOM, "w2": ROOM}, {"u-later": Waiting(("2026-11-25T12:00:00Z", "u"), frozenset({"w1", "w2"}))},
         {"w1", "w2"}, None),  # a later Job waiting holds nothing against an earlier one
    ],
    ids=["none-has-room", "the-one-that-could-is-full", "older-holds-w2", "held-only-worker", "later-holds-nothing"],
)
def test_first_come_first_placed(fits: dict[str, WorkerFit], waiting: dict[str, Waiting],
                                 healthy_after: set[str] | None, waits: str | None) -> None:
    if waits is not None:
        with pytest.raises(WaitingForRoom, match=re.escape(waits)) as wait:
            narrow_by_room(views("w1", "w2"), fits, None, rank=NEWER, waiting=WaitingLine(waiting))
        assert wait.value.could == {n for n, f in fits.items() if f.ever}
        return
    got = narrow_by_room(views("w1", "w2"), fits, None, rank=NEWER, waiting=WaitingLine(waiting))
    assert {w.name for w in got if w.healthy} == healthy_after


def test_the_head_of_each_workers_line_is_the_one_to_wake() -> None:
    waiting = WaitingLine({"old-w2": Waiting(OLDER, frozenset({"w2"}), "ns/a"),
                           "new-both": Waiting(NEWER, frozenset({"w1", "w2"}), "ns/b"),
                           "newest-w1": Waiting(("2026-11-25T12:00:00Z", "u"), frozenset({"w1"}), "ns/c")})
    assert heads(waiting, ["w1"]) == ["new-both"]  # the oldest that could run on w1
    assert heads(waiting, ["w2"]) == ["old-w2"]
    assert heads(waiting, ["w1", "w2"]) == ["new-both", "old-w2"]
    assert heads(waiting, ["w3"]) == [] and heads(WaitingLine(), ["w1"]) == []
    assert waiting.is_first("new-both") and waiting.is_first("old-w2") and not waiting.is_first("newest-w1")
    waiting.pop("new-both")  # placed: the one behind it on w1 is first now
    assert heads(waiting, ["w1"]) == ["newest-w1"] and waiting.is_first("newest-w1")


def test_the_waiting_line_answers_as_a_scan_of_every_waiting_job_would() -> None:
    """Seeded random adds (some re-added unchanged or with other workers) and removals: the heaps'
    answers equal the scan they replace, after every step."""
    rng = random.Random(23)
    line, jobs = WaitingLine(), {}
    workers = ["w1", "w2", "w3"]
    for step in range(3000):
        uid = f"u{rng.randrange(60)}"
        if rng.random() < 0.35:
            line.pop(uid)
            jobs.pop(uid, None)
        else:
            w = jobs.get(uid) if rng.random() < 0.3 and uid in jobs else Waiting(
                (f"2026-11-25T{rng.randrange(24):02d}:00:00Z", uid),
                frozenset(rng.sample(workers, rng.randint(1, 3))))
            line.add(uid, w)
            jobs[uid] = w
        order = (f"2026-11-25T{rng.randrange(24):02d}:30:00Z", "x")
        assert line.held_before(order).keys() == set().union(*(w.could for w in jobs.values() if w.order < order)), step
        for worker in workers:
            want = min((u for u, w in jobs.items() if worker in w.could), key=lambda u: jobs[u].order, default=None)
            assert line.first(worker) == want, step
        assert dict(line) == jobs


def test_when_no_worker_could_ever_run_it_every_worker_says_why() -> None:
    said = "w1: no node has example.com/gpu; w2: no node has example.com/gpu"
    with pytest.raises(NoWorkerFits, match=re.escape(said)):
        narrow_by_room(views("w1", "w2"), {"w1": NEVER, "w2": NEVER}, None)


GPU = "example.com/gpu"


def node(name: str, cpu: str, extra: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"name": name, "labels": {}}, "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110", **(extra or {})},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


NODES = {"worker-1": [node("a1", "2"), node("a2", "2")], "worker-2": [node("b1", "8", {GPU: "4"})]}


def placed(f: FakeFleet, name: str) -> dict[str, str]:
    got = f.job(name)
    assert got is not None
    return dict(got["metadata"]["annotations"])


async def hog_on_b1(f: FakeFleet, *, cpu: str) -> FakeClusterClient:
    """A running pod taking ``cpu`` of worker-2's node b1; the client that made it (to delete it)."""
    kubelet = f.workers["worker-2"].client("kubelet")
    await kubelet.create(PODS, "default", {"metadata": {"name": "hog"}, "spec": {"nodeName": "b1", "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}, "status": {"phase": "Running"}})
    await f.settle()
    return kubelet


async def test_a_job_goes_where_its_extended_resource_is() -> None:
    async with fake_fleet(nodes=NODES) as f:
        for n in ("a", "b", "c"):  # LeastLoaded alone would alternate
            await f.create(job(n, requests={"cpu": "1", GPU: "1"}))
            await f.sync(n)
            assert placed(f, n)[ANNOTATION_CLUSTER] == "worker-2"
        assert "room on worker-2: 1 of 1 pods fit now" in placed(f, "c")[ANNOTATION_PLACEMENT_REASON]


async def test_a_job_no_worker_can_ever_run_stays_in_the_manager_with_the_reasons() -> None:
    async with fake_fleet(nodes=NODES) as f:
        await f.create(job("big", requests={"cpu": "16"}))
        await f.sync("big")
        await f.sync("big")
        assert ANNOTATION_CLUSTER not in placed(f, "big")
        events = [(r, m) for r, m in f.events("big") if r == "NoWorkerFits"]
        assert len(events) == 1  # said once, not every pass
        assert "worker-1: largest node has 2 cpu < 16 cpu requested" in events[0][1]
        assert "worker-2: largest node has 8 cpu < 16 cpu requested" in events[0][1]
        assert all(s.count("POST", "/jobs") == 0 for s in f.workers.values())


async def test_room_now_wins_and_follows_the_pods_on_the_nodes() -> None:
    async with fake_fleet(nodes=NODES) as f:
        kubelet = await hog_on_b1(f, cpu="7")
        await f.create(job("a", requests={"cpu": "1500m"}))
        await f.sync("a")
        assert placed(f, "a")[ANNOTATION_CLUSTER] == "worker-1"  # worker-2 has 1 cpu left
        await kubelet.delete(PODS, "default", "hog")
        await f.settle()
        await f.create(job("b", requests={"cpu": "3"}))
        await f.sync("b")
        assert placed(f, "b")[ANNOTATION_CLUSTER] == "worker-2"  # worker-1's nodes have 2 cpu each


async def test_a_job_of_many_pods_goes_where_most_of_them_start_now() -> None:
    async with fake_fleet(nodes=NODES) as f:
        await f.create(job("first", annotations={ANNOTATION_PIN: "worker-2"}))
        await f.sync("first")  # worker-2 has a copy now: by count alone the next Job goes to worker-1
        await f.create(job("four", parallelism=4, completions=4, requests={"cpu": "2"}))
        await f.sync("four")  # worker-1's two 2-cpu nodes hold 2 of its pods, worker-2's 8-cpu node all 4
        assert placed(f, "four")[ANNOTATION_CLUSTER] == "worker-2"
        assert "4 of 4 pods fit now" in placed(f, "four")[ANNOTATION_PLACEMENT_REASON]


async def test_a_pin_still_wins() -> None:
    async with fake_fleet(nodes=NODES) as f:
        await f.create(job("p", requests={GPU: "1"}, annotations={ANNOTATION_PIN: "worker-1"}))
        await f.sync("p")
        assert placed(f, "p")[ANNOTATION_CLUSTER] == "worker-1"


async def test_a_job_waits_for_room_and_is_placed_when_it_appears_before_later_jobs() -> None:
    async with fake_fleet(nodes=NODES) as f:
        woken: list[str] = []  # what the controller would put on its queue at once
        f.reconciler.places.wake = lambda keys, urgent=True: woken.extend(k.key for k in keys)
        for room in f.reconciler.rooms.values():
            room.on_room = f.reconciler.places.room_freed  # as the controller wires it
        kubelet = await hog_on_b1(f, cpu="7")
        await f.create(job("big", requests={"cpu": "4"}))  # only worker-2's 8-cpu node could hold it
        assert await f.sync("big") is None  # no timer of its own: the placer wakes the first in line
        await f.sync("big")
        assert ANNOTATION_CLUSTER not in placed(f, "big")
        assert [r for r in f.reasons("big") if r == "WaitingForRoom"] == ["WaitingForRoom"]  # said once
        await asyncio.sleep(1.05)  # creationTimestamp has whole seconds: the next ones are later
        await f.create(job("gpu", requests={"cpu": "500m", GPU: "1"}))  # fits now, but only on worker-2
        await f.sync("gpu")
        assert ANNOTATION_CLUSTER not in placed(f, "gpu")
        assert any("worker-2 has room now but Jobs ahead of it in line wait for it there" in m
                   for r, m in f.events("gpu") if r == "WaitingForRoom")
        await f.create(job("small", requests={"cpu": "500m"}))  # fits now on both: goes where no one waits
        await f.sync("small")
        assert placed(f, "small")[ANNOTATION_CLUSTER] == "worker-1"
        await kubelet.delete(PODS, "default", "hog")
        await f.settle()
        assert woken == ["default/big"]  # room appeared on worker-2: the first in its line looks at once
        await f.sync("gpu")  # still behind "big" until "big" is placed
        assert ANNOTATION_CLUSTER not in placed(f, "gpu")
        await f.sync("big")
        assert placed(f, "big")[ANNOTATION_CLUSTER] == "worker-2"
        assert woken[-1] == "default/gpu"  # "big" held worker-2 against it: now it is first in line
        await f.sync("gpu")
        assert placed(f, "gpu")[ANNOTATION_CLUSTER] == "worker-2"
        assert f.reconciler.places.waiting == {}


@pytest.mark.parametrize(
    ("selector", "healthy_after", "error"),
    [
        ("region=eu", {"w1"}, None),
        ("gpu", {"w2"}, None),
        ("region in (eu, us),!gpu", {"w1"}, None),
        ("region=asia", None, "no configured worker has labels matching jobmirror.dev/worker-selector 'region=asia'"),
        ("region in (eu", None, "annotation jobmirror.dev/worker-selector:"),
    ],
    ids=["equality", "exists", "set-and-not", "none-matches", "unparsable"],
)
def test_select_by_labels(selector: str, healthy_after: set[str] | None, error: str | None) -> None:
    workers = [WorkerView("w1", True, 0, {"region": "eu"}), WorkerView("w2", True, 0, {"region": "us", "gpu": "a100"})]
    if error is not None:
        with pytest.raises(NoWorker, match=re.escape(error)):
            select_by_labels(workers, selector)
        return
    assert {w.name for w in select_by_labels(workers, selector) if w.healthy} == healthy_after


async def test_the_worker_selector_picks_among_the_configured_labels() -> None:
    async with fake_fleet(labels={"worker-1": {"tier": "batch"}, "worker-2": {"tier": "gpu"}}) as f:
        for n in ("a", "b"):
            await f.create(job(n, annotations={ANNOTATION_WORKER_SELECTOR: "tier=gpu"}))
            await f.sync(n)
            assert placed(f, n)[ANNOTATION_CLUSTER] == "worker-2"  # LeastLoaded alone would alternate
        await f.create(job("bad", annotations={ANNOTATION_WORKER_SELECTOR: "tier in (gpu"}))
        await f.sync("bad")
        assert ANNOTATION_CLUSTER not in placed(f, "bad")
        assert [r for r, m in f.events("bad") if "jobmirror.dev/worker-selector" in m] == ["NoWorker"]


def with_class(name: str, cls: str) -> Obj:
    j = job(name)
    j["spec"]["template"]["spec"]["priorityClassName"] = cls
    return j


async def test_a_worker_that_lacks_the_jobs_priority_class_is_never_chosen() -> None:
    """Its API server would refuse every pod of the copy: the fit says never, naming the class."""
    async with fake_fleet(nodes=NODES) as f:
        f.workers["worker-2"].seed(PRIORITY_CLASSES.path(), {"metadata": {"name": "high"}, "value": 1000})
        await f.settle()
        await f.create(with_class("urgent", "high"))
        await f.sync("urgent")
        assert placed(f, "urgent")[ANNOTATION_CLUSTER] == "worker-2"  # least loaded would tie-break to worker-1
        await f.create(with_class("nowhere", "critical"))
        await f.sync("nowhere")
        assert ANNOTATION_CLUSTER not in placed(f, "nowhere")
        assert [m for r, m in f.events("nowhere") if r == "NoWorkerFits"] == [
            "cannot dispatch: no worker could ever run its pod: worker-1: serves no PriorityClass critical (create it "
            "there); worker-2: serves no PriorityClass critical (create it there)"]
