"""A rate-limited worker is not a slow one (issue 38 item 1): the wait for our own client's token
is measured apart and never judged slowness; a call whose token is far off parks its Job until its
turn instead of holding a slot or re-polling; a create counts as attempted only once it was sent."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kruntime.ratelimit import TokenBucket, TokenWait, measuring, service_seconds
from mirror import metrics
from mirror.config import Worker
from mirror.jobs.kind import JOB_KIND
from mirror.naming import ANNOTATION_PIN
from mirror.worker_line import STALE, TokenLine
from mirror.workers import WorkerCluster
from testkit.fakecluster import FakeApiServer
from testkit.fakefleet import fake_fleet, job


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- slowness is timed from the request sent -------------------------------------------------

@pytest.mark.parametrize(("elapsed", "token_wait", "served"), [
    (2.9, 0.0, 2.9),
    (9.0, 8.0, 1.0),  # 8 s queued for a token at 5 QPS, answered in 1 s: not slow
    (9.0, 2.0, 7.0),  # answered in 7 s after the token: slow
    (1.0, 1.5, 0.0),  # clocks a hair apart never make a negative duration
])
def test_the_server_is_timed_without_the_token_wait(elapsed: float, token_wait: float, served: float) -> None:
    assert service_seconds(elapsed, token_wait) == pytest.approx(served)


def worker(clock: Clock) -> WorkerCluster:
    return WorkerCluster(Worker(name="w1", kubeconfig=Path("/k")), None,  # type: ignore[arg-type]
                         kinds=[JOB_KIND], origin="o", clock=clock, max_in_flight=4, slow_after=3.0,
                         slow_hold=60.0, slow_slots=asyncio.Semaphore(1))


@pytest.mark.parametrize(("elapsed", "token_wait", "slow"), [
    (2.9, 0.0, False),
    (3.5, 0.0, True),
    (9.0, 8.0, False),  # issue 38: 2.8 s of the 3 s threshold was our own queue
    (9.0, 2.0, True),
])
async def test_a_call_slot_judges_the_worker_without_the_token_wait(elapsed: float, token_wait: float,
                                                                    slow: bool) -> None:
    clock = Clock()
    w = worker(clock)
    async with w.call_slot("a create call") as tokens:
        tokens.took_token(token_wait)
        clock.now += elapsed
    assert (w.slow() is not None) is slow, w.slow()


async def test_a_call_still_queued_for_its_token_is_not_a_call_the_worker_is_slow_on() -> None:
    clock = Clock()
    w = worker(clock)
    queued, release = asyncio.Event(), asyncio.Event()

    async def call() -> None:
        async with w.call_slot() as tokens:
            tokens.queueing = True
            queued.set()
            await release.wait()

    task = asyncio.create_task(call())
    await asyncio.wait_for(queued.wait(), 5)
    clock.now += 10.0
    assert w.slow() is None
    release.set()
    await task


class LimitedClient:
    """The part of ClusterClient that waits for tokens, with a limit of its own."""

    def __init__(self, qps: float, burst: int) -> None:
        self.name, self.purpose = "w", "reconcile"
        self.limiter = TokenBucket(qps, burst)
        self.requests_sent, self.token_wait_seconds = 0, 0.0


async def test_the_client_reports_its_token_wait_to_the_block_that_made_the_request() -> None:
    from kruntime.client import ClusterClient
    client = LimitedClient(qps=50, burst=1)
    take = ClusterClient._take_token
    sent: list[int] = []
    await take(client)  # type: ignore[arg-type]
    with measuring(TokenWait(on_sent=lambda: sent.append(1))) as tokens:
        await take(client)  # type: ignore[arg-type]
    assert tokens.sent == 1 and sent == [1] and 0.01 < tokens.seconds < 0.05 and not tokens.queueing
    assert client.requests_sent == 2 and client.token_wait_seconds == pytest.approx(tokens.seconds)


# -- the token bucket knows its queue --------------------------------------------------------

def test_the_token_bucket_counts_callers_already_waiting() -> None:
    """reservations: the 4th caller at burst 2 / 5 QPS waits behind two tokens promised to others"""
    clock = Clock(0.0)
    bucket = TokenBucket(qps=5, burst=2, clock=clock)
    assert [bucket.reserve() for _ in range(4)] == pytest.approx([0, 0, 0.2, 0.4])
    assert bucket.delay_for_next() == pytest.approx(0.6)
    clock.now += 0.5
    assert bucket.delay_for_next() == pytest.approx(0.1)
    bucket.give_back()  # a waiter cancelled: its token is the next one's
    assert bucket.delay_for_next() == 0


async def test_a_cancelled_wait_gives_its_token_back() -> None:
    bucket = TokenBucket(qps=2, burst=1)
    await bucket.acquire()
    task = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert bucket.delay_for_next() < 0.5


# -- the park/wake decision ------------------------------------------------------------------

LIMIT, QPS = 1.5, 5.0

#: steps of (seconds since start, uid, token delay, parked for: None = call now)
PARK_CASES = {
    "an idle worker: call now": [(0, "a", 0.0, None), (0, "b", 1.5, None)],
    "a token 3 s off: parked until it is 1.5 s off": [(0, "a", 3.0, 1.5)],
    "parked in turn, one token apart": [(0, "a", 3.0, 1.5), (0, "b", 3.0, 1.7), (0.1, "c", 2.9, 1.8)],
    "back early (an event): its place kept, no call": [(0, "a", 3.0, 1.5), (0.5, "a", 2.5, 1.0)],
    "back on its turn: called, and out of the line": [(0, "a", 3.0, 1.5), (1.5, "a", 1.6, None),
                                                      (1.6, "b", 0.0, None)],
    "a newcomer queues behind the parked even when a token is free": [(0, "a", 3.0, 1.5), (1.0, "b", 0.0, 0.7)],
    "its token went elsewhere: parked again, not called": [(0, "a", 3.0, 1.5), (1.5, "a", 4.0, 2.5)],
    "a parked Job that never came back stops holding others up": [(0, "a", 3.0, 1.5),
                                                                   (1.5 + STALE + 1, "b", 0.0, None)],
}


@pytest.mark.parametrize("steps", PARK_CASES.values(), ids=PARK_CASES.keys())
def test_the_park_and_wake_decision(steps: list[tuple[float, str, float, float | None]]) -> None:
    line = TokenLine(LIMIT)
    for at, uid, delay, parked in steps:
        got = line.admit(uid, 100.0 + at, delay, QPS)
        assert got == (None if parked is None else pytest.approx(parked)), (at, uid, delay)


def test_a_forgotten_job_leaves_the_line() -> None:
    line = TokenLine(LIMIT)
    line.admit("a", 0.0, 3.0, QPS)
    line.forget("a")
    assert len(line) == 0 and line.admit("b", 0.0, 0.0, QPS) is None


# -- on the reconciler -----------------------------------------------------------------------

def busy(worker: str, reason: str) -> float:
    return float(metrics.WORKER_BUSY.labels(worker, reason)._value.get())


async def test_a_job_parked_on_a_rate_limited_worker_sends_nothing_and_is_not_asked_about_twice() -> None:
    """the worker client's next token is 5 s off: the pass parks the Job (no slot, no request, no
    'attempted' mark), comes back at its turn, and then creates the copy without a GET first"""
    async with fake_fleet() as f:
        cluster = f.clusters["worker-1"]
        clock = Clock(time.monotonic())
        cluster.clock = clock
        cluster.client.limiter = TokenBucket(qps=1, burst=1, clock=clock)
        for _ in range(5):
            cluster.client.limiter.reserve()  # five calls queued ahead: the next token is 5 s off
        server: FakeApiServer = f.workers["worker-1"]
        await f.create(job("a", annotations={ANNOTATION_PIN: "worker-1"}))
        before, parked = len(server.calls), busy("worker-1", "rate_limited")
        after = await f.sync("a")
        assert after is not None and after == pytest.approx(5.0 - cluster.line.limit, abs=0.01)
        assert busy("worker-1", "rate_limited") == parked + 1
        assert len(server.calls) == before and f.copy("worker-1", "a") is None
        clock.now += 1.0
        early = await f.sync("a")  # an event brought it back early: still parked, nothing sent
        assert early is not None and early == pytest.approx(after - 1.0, abs=0.01) and len(server.calls) == before
        clock.now += early + 1.5  # its turn, and the tokens queued ahead of it spent
        assert await f.sync("a") is None  # created and in sync: no timer of its own
        made = [(c.method, c.path) for c in server.calls[before:]]
        assert ("POST", "/apis/batch/v1/namespaces/default/jobs") in made
        assert not any(m == "GET" and p.endswith("/jobs/a") for m, p in made), made
        assert f.copy("worker-1", "a") is not None and len(cluster.line) == 0
