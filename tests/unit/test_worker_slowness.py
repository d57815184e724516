"""A slow worker is a state of its own (issue 19 item 7): chosen last, its calls confined to the
shared slow slots, never unhealthy for being slow."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mirror.config import Worker
from mirror.jobs.kind import JOB_KIND
from mirror.placement import LeastLoaded, NoWorker, WorkerView, explain
from mirror.workers import WorkerBusy, WorkerCluster


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def worker(clock: Clock, slots: asyncio.Semaphore, name: str = "w1") -> WorkerCluster:
    return WorkerCluster(Worker(name=name, kubeconfig=Path("/k")), None,  # type: ignore[arg-type]
                         kinds=[JOB_KIND], origin="o", clock=clock, max_in_flight=4, slow_after=3.0,
                         slow_hold=60.0, slow_slots=slots)


async def test_a_slow_call_makes_the_worker_slow_for_a_while() -> None:
    clock, slots = Clock(), asyncio.Semaphore(1)
    w = worker(clock, slots)
    async with w.call_slot("a create call"):
        clock.now += 2.9
    assert w.slow() is None
    async with w.call_slot("a create call"):
        clock.now += 9.0
    assert "a create call took 9.0s" in (w.slow() or "")
    clock.now += 59.0
    assert w.slow() is not None
    clock.now += 2.0
    assert w.slow() is None


async def test_a_call_still_waiting_counts_before_it_ends() -> None:
    clock, slots = Clock(), asyncio.Semaphore(1)
    w = worker(clock, slots)
    started = asyncio.Event()
    release = asyncio.Event()

    async def call() -> None:
        async with w.call_slot():
            started.set()
            await release.wait()

    task = asyncio.create_task(call())
    await started.wait()
    clock.now += 3.5
    assert "has been waiting 3.5s" in (w.slow() or "")
    release.set()
    await task


async def test_slow_workers_share_one_pool_of_slots() -> None:
    """two slow workers, one shared slot: the second worker's call is turned away (WorkerBusy), so
    together they never hold more than the pool, and a fast worker always gets its own"""
    clock, slots = Clock(), asyncio.Semaphore(1)
    a, b, fast = worker(clock, slots, "a"), worker(clock, slots, "b"), worker(clock, slots, "fast")
    for w in (a, b):
        async with w.call_slot():
            clock.now += 10
    assert a.slow() and b.slow() and not fast.slow()
    hold = asyncio.Event()

    async def long_call() -> None:
        async with a.call_slot():
            await hold.wait()

    task = asyncio.create_task(long_call())
    await asyncio.sleep(0)
    with pytest.raises(WorkerBusy):
        async with b.call_slot(wait=0.05):
            pass
    async with fast.call_slot(wait=0.05):
        pass
    hold.set()
    await task
    async with b.call_slot(wait=0.05):
        pass
    assert slots._value == 1  # every slot given back


def views(slow: dict[str, bool], load: dict[str, int]) -> list[WorkerView]:
    return [WorkerView(n, True, load[n], {}, slow=slow[n]) for n in sorted(load)]


@pytest.mark.parametrize(("slow", "load", "pinned", "chosen"), [
    ({"a": True, "b": False}, {"a": 0, "b": 50}, None, "b"),  # the less loaded one is slow: the other
    ({"a": True, "b": True}, {"a": 0, "b": 50}, None, "a"),  # all slow: load decides
    ({"a": True, "b": False}, {"a": 0, "b": 50}, "a", "a"),  # a pin is a pin
])
def test_a_slow_worker_is_chosen_only_when_no_other_can(slow: dict[str, bool], load: dict[str, int],
                                                        pinned: str | None, chosen: str) -> None:
    assert LeastLoaded().choose(views(slow, load), pinned) == chosen


def test_the_placement_reason_says_slow() -> None:
    assert explain("LeastLoaded", views({"a": True, "b": False}, {"a": 0, "b": 5}), "b", None) == (
        "LeastLoaded: chose b; unfinished copies per worker then: a=0 (slow), b=5")
    with pytest.raises(NoWorker):
        LeastLoaded().choose([WorkerView("a", False, 0, {}, slow=True)], None)


async def test_our_own_loop_stalled_during_a_call_is_not_the_workers_slowness() -> None:
    """A relist of a million pods keeps our event loop busy: a call (or probe) that spans it took
    long by our clock, not by the worker's; only what is left after the stall counts."""
    clock, slots, stall = Clock(), asyncio.Semaphore(1), [0.0]
    w = WorkerCluster(Worker(name="w1", kubeconfig=Path("/k")), None,  # type: ignore[arg-type]
                      kinds=[JOB_KIND], origin="o", clock=clock, max_in_flight=4, slow_after=3.0,
                      slow_hold=60.0, slow_slots=slots, loop_stall=lambda: stall[0])
    async with w.call_slot("a create call"):
        clock.now += 9.0
        stall[0] += 7.0  # 7 of the 9 s our loop ran nothing
        assert w.slow() is None  # still in flight: 2 s of it are the worker's
    assert w.slow() is None
    async with w.call_slot("a create call"):
        clock.now += 9.0
        stall[0] += 5.0  # 4 s left: the worker's own
    assert "a create call took 4.0s" in (w.slow() or "")


def test_loop_stall_adds_each_lateness_and_the_one_overdue_now() -> None:
    from kruntime.lifecycle import LoopStall

    now = [10.0]
    s = LoopStall(clock=lambda: now[0])
    s.expect(10.5)
    now[0] = 12.0
    assert s.seconds() == pytest.approx(1.5)  # overdue now, while the loop is still stalled
    s.woke(1.5)
    s.expect(12.5)
    now[0] = 12.5
    assert s.seconds() == pytest.approx(1.5)  # on time: nothing more
