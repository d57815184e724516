"""Work queue semantics: de-duplication, one worker per key, backoff, delayed adds."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from kruntime import metrics
from kruntime.ratelimit import TokenBucket, exponential_backoff
from kruntime.workqueue import ShutDown, WorkQueue


@pytest.mark.parametrize(
    ("failures", "base", "cap", "expected"),
    [
        (0, 1.0, 60.0, 0.0),
        (1, 1.0, 60.0, 1.0),
        (2, 1.0, 60.0, 2.0),
        (6, 1.0, 60.0, 32.0),
        (7, 1.0, 60.0, 60.0),
        (500, 10.0, 600.0, 600.0),
        (3, 0.005, 1000.0, 0.02),
    ],
)
def test_exponential_backoff(failures: int, base: float, cap: float, expected: float) -> None:
    assert exponential_backoff(failures, base, cap) == pytest.approx(expected)


def test_token_bucket_burst_then_rate() -> None:
    t = [0.0]
    bucket = TokenBucket(qps=10, burst=3, clock=lambda: t[0])  # type: ignore[arg-type]
    for _ in range(3):
        assert bucket.delay_for_next() == 0
        bucket._tokens -= 1
    assert bucket.delay_for_next() == pytest.approx(0.1)
    t[0] += 0.05
    assert bucket.delay_for_next() == pytest.approx(0.05)
    t[0] += 10
    assert bucket.delay_for_next() == 0
    assert bucket._tokens == 3  # refills to burst, not beyond


async def test_dedupes_keys_added_twice() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"


async def test_key_added_while_processing_runs_again_after_done() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    q.add("a")
    k = await q.get()
    q.add("a")  # dirty while processing: must not be handed to a second worker
    assert len(q) == 0
    q.done(k)
    assert len(q) == 1
    assert await q.get() == "a"


async def test_rate_limited_backoff_grows_and_forget_resets() -> None:
    q: WorkQueue[str] = WorkQueue("t", backoff_base=0.01, backoff_cap=1.0)
    assert q.add_rate_limited("a") == pytest.approx(0.01)
    assert q.add_rate_limited("a") == pytest.approx(0.02)
    assert q.add_rate_limited("a") == pytest.approx(0.04)
    assert q.num_requeues("a") == 3
    q.forget("a")
    assert q.num_requeues("a") == 0
    assert await asyncio.wait_for(q.get(), 1) == "a"


async def test_add_after_keeps_earliest_timer() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    q.add_after("a", 0.05)
    q.add_after("a", 10)
    assert await asyncio.wait_for(q.get(), 1) == "a"


async def test_workers_never_run_one_key_concurrently_and_retry_failures() -> None:
    q: WorkQueue[str] = WorkQueue("t", backoff_base=0.001, backoff_cap=0.01)
    running: set[str] = set()
    calls: dict[str, int] = {}
    overlap = False

    async def handler(key: str) -> None:
        nonlocal overlap
        if key in running:
            overlap = True
        running.add(key)
        calls[key] = calls.get(key, 0) + 1
        await asyncio.sleep(0.005)
        running.discard(key)
        if key == "flaky" and calls[key] < 3:
            raise RuntimeError("boom")

    task = asyncio.create_task(q.run_workers(4, handler))
    for _ in range(20):
        q.add("k")
        q.add("flaky")
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.3)
    await q.shutdown()
    await asyncio.wait_for(task, 2)
    assert not overlap
    assert calls["flaky"] >= 3
    assert q.num_requeues("flaky") == 0  # success after failures resets the count


async def test_get_raises_after_shutdown() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    await q.shutdown()
    with pytest.raises(ShutDown):
        await q.get()


async def test_idle_only_when_nothing_is_queued_or_processing() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    assert q.idle()
    q.add("a")
    assert not q.idle()
    key = await q.get()
    assert not q.idle()  # being processed
    q.add("a")  # re-added while processing: dirty, runs again after done
    q.done(key)
    assert not q.idle()
    q.done(await q.get())
    assert q.idle()
    q.add_after("b", 60)  # a timer does not count
    assert q.idle()
    await q.shutdown()


async def test_urgent_keys_are_served_first_even_if_already_queued() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    for k in ("a", "b", "c", "d"):
        q.add(k)
    q.add("c", urgent=True)  # already queued: moves ahead, runs once
    q.add("e", urgent=True)
    q.add("e", urgent=True)
    assert len(q) == 5
    got = [await q.get() for _ in range(5)]
    assert got == ["c", "e", "a", "b", "d"]
    assert len(q) == 0
    for k in got:
        q.done(k)
    assert q.idle() and len(q) == 0


async def test_urgent_keys_never_take_the_last_slots_while_others_wait() -> None:
    """A flood of urgent keys (a wave of copies finishing) holds at most ``urgent_slots`` passes
    while ordinary keys (the dispatches) wait: at 10,000 Jobs strict priority took all 32 and no
    copy was made for 4 s. With no ordinary key waiting they take any slot."""
    q: WorkQueue[str] = WorkQueue("t")
    q.urgent_slots = 2
    q.add("n1")
    q.add("n2")
    for i in range(1, 6):
        q.add(f"u{i}", urgent=True)
    assert [await q.get(), await q.get()] == ["u1", "u2"]
    assert await q.get() == "n1"  # two urgent passes running: the next slot goes to the others
    assert await q.get() == "n2"
    assert await q.get() == "u3"  # no ordinary key waits: urgent ones take any slot
    q.done("u1")
    q.done("n1")
    assert await q.get() == "u4"
    for k in ("u2", "n2", "u3", "u4"):
        q.done(k)
    assert await q.get() == "u5"
    q.done("u5")
    assert q.idle()


async def test_run_workers_keeps_an_eighth_of_its_loops_from_urgent_keys() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    task = asyncio.get_running_loop().create_task(q.run_workers(32, lambda k: asyncio.sleep(0, None)))
    await asyncio.sleep(0)
    assert q.urgent_slots == 28
    await q.shutdown()
    await task


async def test_urgent_add_while_processing_requeues_ahead_after_done() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    q.add("x")
    assert await q.get() == "x"
    q.add("y")
    q.add("x", urgent=True)  # running: runs again afterwards, before y
    assert len(q) == 1  # x is counted once its pass is done
    q.done("x")
    assert await q.get() == "x"
    q.done("x")
    assert await q.get() == "y"
    q.done("y")
    assert q.idle()


@pytest.mark.parametrize(("owns", "timers_left"), [(True, 0), (False, 1)])
async def test_a_pass_that_owns_its_timer_leaves_none_when_it_returns_none(owns: bool, timers_left: int) -> None:
    """The mirror queue: a pass re-reads everything, so its answer replaces an earlier pass's timer;
    a finished Job's last pass (None) leaves no resync behind to cost another pass."""
    q: WorkQueue[str] = WorkQueue("t", pass_owns_timer=owns)
    answers = [30.0, None]
    passes = 0

    async def handler(key: str) -> float | None:
        nonlocal passes
        passes += 1
        return answers.pop(0)

    task = asyncio.create_task(q.run_workers(1, handler))
    q.add("job")
    while passes < 1 or not q.idle():
        await asyncio.sleep(0.001)
    assert q.timers() == 1  # the resync
    q.add("job")  # an event: this pass finds the Job finished
    while passes < 2 or not q.idle():
        await asyncio.sleep(0.001)
    assert q.timers() == timers_left
    await q.shutdown()
    await asyncio.wait_for(task, 2)


async def test_a_pass_that_owns_its_timer_replaces_an_earlier_one_with_its_own() -> None:
    q: WorkQueue[str] = WorkQueue("t", pass_owns_timer=True)
    answers = [0.05, 30.0]
    passes = 0

    async def handler(key: str) -> float | None:
        nonlocal passes
        passes += 1
        return answers.pop(0) if answers else None

    task = asyncio.create_task(q.run_workers(1, handler))
    q.add("job")
    while passes < 1 or not q.idle():
        await asyncio.sleep(0.001)
    q.add("job")  # runs before the 0.05-s timer and answers 30 s: the earlier timer goes
    while passes < 2 or not q.idle():
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.15)
    assert passes == 2 and q.timers() == 1
    await q.shutdown()
    await asyncio.wait_for(task, 2)


async def test_a_timer_set_while_the_pass_runs_outlives_it() -> None:
    """An event that arrives during a pass and asks for a later look must not be dropped by the
    pass's own answer: the pass may have read the object before the event."""
    q: WorkQueue[str] = WorkQueue("t", pass_owns_timer=True)
    passes = 0
    in_pass = asyncio.Event()
    release = asyncio.Event()

    async def handler(key: str) -> float | None:
        nonlocal passes
        passes += 1
        if passes == 1:
            in_pass.set()
            await release.wait()
        return None

    task = asyncio.create_task(q.run_workers(1, handler))
    q.add("job")
    await in_pass.wait()
    q.add_after("job", 0.05)  # the event handler's deferred look
    release.set()
    await asyncio.sleep(0.2)
    assert passes == 2
    await q.shutdown()
    await asyncio.wait_for(task, 2)


async def test_each_pass_is_counted_by_what_queued_its_key_first() -> None:
    """jobmirror_runtime_queue_passes_total says which triggers the passes come from (issue 38: passes per Job)."""

    def passes(why: str) -> float:
        return metrics.QUEUE_PASSES.labels("why-test", why)._value.get()

    q: WorkQueue[str] = WorkQueue("why-test")
    q.add("a", why="copy-modified")
    q.add("a", why="manager-modified")  # folded into the same pass: the first reason counts
    q.add("b")
    assert await q.get() == "a"
    q.add("a", why="room")  # while its pass runs: the next pass's reason
    q.done("a")
    assert await q.get() == "b"
    q.done("b")
    assert await q.get() == "a"
    q.done("a")
    q.add_after("c", 0.01)
    assert await asyncio.wait_for(q.get(), 2) == "c"
    q.done("c")
    assert (passes("copy-modified"), passes("manager-modified"), passes("event"), passes("room"),
            passes("after")) == (1, 0, 1, 1, 1)
    assert not q._queued  # nothing kept for keys without a pending pass


def waited(queue: str, urgent: str) -> tuple[float, float]:
    """The seconds and the passes jobmirror_runtime_queue_wait_seconds observed for one queue and lane."""
    h = metrics.QUEUE_WAIT.labels(queue, urgent)
    return h._sum.get(), sum(b.get() for b in h._buckets)


async def test_each_pass_observes_how_long_its_key_waited() -> None:
    """jobmirror_runtime_queue_wait_seconds: from the first add since the key's last pass to the pass, urgent apart."""
    q: WorkQueue[str] = WorkQueue("wait-test")
    q.add("a")
    await asyncio.sleep(0.05)
    q.add("a")  # folded: the wait counts from the first add
    q.add("b", urgent=True)
    assert await q.get() == "b"
    assert await q.get() == "a"
    q.done("a")
    q.done("b")
    (waited_a, n_a), (waited_b, n_b) = waited("wait-test", "false"), waited("wait-test", "true")
    assert (n_a, n_b) == (1, 1)
    assert 0.05 <= waited_a < 1 and waited_b < 0.05
    assert not q._queued  # nothing kept for keys without a pending pass


async def test_an_urgent_wait_counts_from_when_the_key_was_made_urgent() -> None:
    """A key queued ordinarily behind a backlog, then made urgent (a copy's running counters, then its
    Complete): the urgent lane's wait is the time since the second add, the first says nothing of it."""
    q: WorkQueue[str] = WorkQueue("urgent-since-test")
    q.add("backlog")
    q.add("a")
    await asyncio.sleep(0.2)
    q.add("a", urgent=True)
    assert await q.get() == "a"
    q.done("a")
    seconds, n = waited("urgent-since-test", "true")
    assert n == 1 and seconds < 0.1
    assert not q._urgent_since  # nothing kept once the key was handed out


async def test_a_waiting_loop_is_woken_by_an_add_and_by_shutdown() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    first, second = asyncio.create_task(q.get()), asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not first.done() and not second.done()
    q.add("a")
    await asyncio.sleep(0)
    assert first.done() and first.result() == "a" and not second.done()
    await q.shutdown()
    await asyncio.sleep(0)
    with pytest.raises(ShutDown):
        second.result()


async def test_a_wake_given_to_a_cancelled_loop_goes_to_another() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    first, second = asyncio.create_task(q.get()), asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("a")  # wakes the first...
    first.cancel()  # ...which is cancelled before it runs
    assert await asyncio.wait_for(second, 1) == "a"
    assert first.cancelled()


async def test_a_loop_gives_up_the_event_loop_between_passes_that_never_wait() -> None:
    """Passes of Jobs in sync make no call; a loop must still let the rest of the process run
    between them (the Lease, the probes, the watches)."""
    q: WorkQueue[int] = WorkQueue("t")
    seen: list[str] = []

    async def in_sync(key: int) -> None:
        seen.append("pass")
        if key == 19:
            await q.shutdown()

    async def others() -> None:
        while True:
            seen.append("turn")
            await asyncio.sleep(0)

    for k in range(20):
        q.add(k)
    ticker = asyncio.create_task(others())
    await asyncio.wait_for(q.run_workers(1, in_sync), 5)
    ticker.cancel()
    passes = [i for i, s in enumerate(seen) if s == "pass"]
    assert len(passes) == 20
    assert all(b - a > 1 for a, b in itertools.pairwise(passes)), seen
