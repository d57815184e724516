"""A de-duplicating work queue with per-key exponential backoff, as client-go's.

A key is processed by at most one worker at a time; adding a key while it is being
processed marks it dirty so it runs once more afterwards (no lost update, no
concurrent reconcile of one object). Failures re-queue the key after
``base * 2^(n-1)`` capped at ``cap``; success resets the count.

Keys added as ``urgent`` are served before the others, even if already queued: a
controller uses it for work that finishes something (a mirrored status) so that a burst
of new work does not hold it back behind thousands of keys. Not with every slot: while
ordinary keys wait, urgent ones take at most ``urgent_slots`` of the handler's concurrent
passes (all but an eighth under :meth:`run_workers`), so a flood of urgent work (a wave of
copies finishing together) slows the rest but never stops it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from kruntime import metrics
from kruntime.ratelimit import exponential_backoff

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down and drained."""


class WorkQueue(Generic[K]):
    def __init__(self, name: str, *, backoff_base: float = 0.005, backoff_cap: float = 60.0,
                 pass_owns_timer: bool = False) -> None:
        """``pass_owns_timer``: a handler that returns (without raising) decides when its key is looked
        at again, replacing the timer an earlier pass left (a level-triggered handler re-reads
        everything, so that timer's reason is already judged; None then means no timer). A timer set
        while the pass ran (an event it may not have seen) is kept."""
        self.name = name
        self.pass_owns_timer = pass_owns_timer
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._queue: deque[K] = deque()
        self._urgent: deque[K] = deque()
        #: the keys queued as urgent and when each was made urgent: its wait is timed from then, not
        #: from an ordinary add that queued it behind the backlog first (which says nothing of the lane)
        self._urgent_since: dict[K, float] = {}
        #: keys being processed that were handed out as urgent, and how many of those there may be
        #: while ordinary keys wait (None: no bound). At 10,000 Jobs a wave of finished copies held
        #: every slot and no copy was made for 4 s; every fifth turn to the others instead cost the
        #: 1000-Job status p99 0.9 s (docs/performance.md)
        self._urgent_running: set[K] = set()
        self.urgent_slots: int | None = None
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, asyncio.TimerHandle] = {}
        #: what queued each dirty key first since its last pass, and when (jobmirror_runtime_queue_passes_total,
        #: jobmirror_runtime_queue_wait_seconds)
        self._queued: dict[K, tuple[str, float]] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shutdown = False
        self._depth = metrics.QUEUE_DEPTH.labels(self.name)  # set on every add and get: looked up once

    def __len__(self) -> int:
        """Keys waiting to be handed out (a key is counted once, wherever it is queued)."""
        return len(self._dirty) - len(self._processing & self._dirty)

    def in_pass(self, key: K) -> bool:
        """Whether a pass of ``key`` runs now."""
        return key in self._processing

    def idle(self) -> bool:
        """Nothing queued or being processed (keys waiting on a timer do not count): what a test
        waits for to know that every pass an event queued has run."""
        return not self._dirty and not self._processing

    def _gauge(self) -> None:
        self._depth.set(len(self))

    def _push(self, key: K, urgent: bool = False) -> None:
        (self._urgent if urgent else self._queue).append(key)
        self._gauge()
        self._wake_one()

    def _wake_one(self) -> None:
        """Wake one loop waiting in :meth:`get` (a future each: no task per add, as a Condition needs)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def add(self, key: K, *, urgent: bool = False, why: str = "event") -> None:
        """Queue ``key`` (once, however often it is added before its pass); ``why`` names what queued it,
        counted per pass by the first reason."""
        if self._shutdown:
            return
        if key not in self._queued:
            self._queued[key] = (why, time.monotonic())
        newly_urgent = urgent and key not in self._urgent_since
        if key in self._dirty and not newly_urgent:
            return
        if newly_urgent:
            self._urgent_since[key] = time.monotonic()
        self._dirty.add(key)
        if key not in self._processing:  # else done() re-queues it, ahead if urgent
            self._push(key, urgent=urgent)  # an ordinary entry it already had becomes stale

    def add_after(self, key: K, delay: float, *, why: str = "after") -> None:
        """Add ``key`` after ``delay`` seconds; an earlier pending timer for it wins."""
        if self._shutdown:
            return
        if delay <= 0:
            self.add(key, why=why)
            return
        loop = asyncio.get_running_loop()
        existing = self._timers.get(key)
        if existing is not None and existing.when() <= loop.time() + delay:
            return
        if existing is not None:
            existing.cancel()

        def fire() -> None:
            self._timers.pop(key, None)
            self.add(key, why=why)

        self._timers[key] = loop.call_later(delay, fire)

    def cancel_after(self, key: K) -> None:
        """Drop ``key``'s pending timer, if any."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def timers(self) -> int:
        """Keys waiting on a timer."""
        return len(self._timers)

    def add_rate_limited(self, key: K) -> float:
        n = self._failures.get(key, 0) + 1
        self._failures[key] = n
        delay = exponential_backoff(n, self.backoff_base, self.backoff_cap)
        metrics.QUEUE_RETRIES.labels(self.name).inc()
        self.add_after(key, delay, why="retry")
        return delay

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K:
        while True:
            key = self._pop()
            if key is not None:
                break
            if self._shutdown:
                raise ShutDown()
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken, then cancelled: the wake goes to another loop
                raise
        self._gauge()
        self._dirty.discard(key)
        made_urgent = self._urgent_since.pop(key, None)
        urgent = made_urgent is not None
        self._processing.add(key)
        if urgent:
            self._urgent_running.add(key)
        why, since = self._queued.pop(key, ("event", None))
        if urgent:
            since = made_urgent
        metrics.QUEUE_PASSES.labels(self.name, why).inc()
        if since is not None:
            metrics.QUEUE_WAIT.labels(self.name, "true" if urgent else "false").observe(time.monotonic() - since)
        return key

    def _pop(self) -> K | None:
        """The next live key, urgent ones first unless they hold ``urgent_slots`` passes already;
        entries left behind by an urgent re-add are skipped."""
        full = self.urgent_slots is not None and len(self._urgent_running) >= self.urgent_slots
        for q in (self._queue, self._urgent) if full else (self._urgent, self._queue):
            while q:
                key = q.popleft()
                if key in self._dirty and key not in self._processing:
                    return key
        return None

    def done(self, key: K) -> None:
        self._processing.discard(key)
        self._urgent_running.discard(key)
        if key in self._dirty:
            self._push(key, urgent=key in self._urgent_since)

    async def shutdown(self) -> None:
        self._shutdown = True
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()
        while self._waiters:
            self._wake_one()

    async def run_workers(self, workers: int, handler: Callable[[K], Awaitable[float | None]]) -> None:
        """Run ``workers`` concurrent loops until shutdown.

        ``handler`` may return a delay in seconds to re-check the key later (a
        deliberate requeue, not a failure). Exceptions re-queue with backoff. An eighth of the
        loops (at least one) is kept from urgent keys while ordinary ones wait. Keeping only one
        was measured (docs/performance.md): better status p99 at 1000 Jobs side by side, worse in a
        10,000-Job pair, so not adopted.
        """
        if self.urgent_slots is None and workers > 1:
            self.urgent_slots = workers - max(1, workers // 8)

        async def loop() -> None:
            while True:
                try:
                    key = await self.get()
                except ShutDown:
                    return
                before = self._timers.get(key)  # a timer set while the pass runs is newer than what it read
                try:
                    again = await handler(key)
                    self.forget(key)
                    if self.pass_owns_timer and before is not None and self._timers.get(key) is before:
                        self.cancel_after(key)
                    if again is not None and again >= 0:
                        self.add_after(key, again)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    delay = self.add_rate_limited(key)
                    # A write conflict only means our cache was a step behind: routine, not a warning.
                    level = logging.DEBUG if _is_conflict(exc) else logging.WARNING
                    log.log(level, "%s: %s failed (attempt %d, retry in %.2fs): %s", self.name, key,
                            self.num_requeues(key), delay, exc, exc_info=not _expected(exc))
                finally:
                    self.done(key)
                # A pass with nothing to wait for (a Job in sync) never gives up the loop, and neither
                # does get() with keys queued: without this one loop ran the 20,000 passes of a new
                # leader back to back (bench fleet: 0.16-0.17 s loop lag at failover).
                await asyncio.sleep(0)

        await asyncio.gather(*(loop() for _ in range(workers)))


def _expected(exc: Exception) -> bool:
    """API errors and errors a controller raises on purpose need no traceback in the log."""
    from kruntime.client import ApiError

    return isinstance(exc, ApiError) or getattr(exc, "expected", False)


def _is_conflict(exc: Exception) -> bool:
    return getattr(exc, "status", None) == 409
