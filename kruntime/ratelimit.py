"""Client-side QPS/burst limiting and exponential backoff math (pure, unit-tested)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass


class TokenBucket:
    """Client QPS/burst limit, like client-go's flowcontrol token bucket.

    A non-positive ``qps`` disables limiting. A caller reserves its token when it asks (the count
    goes below zero while callers wait), so waiters are served in arrival order and
    :meth:`delay_for_next` tells a new caller how long the calls queued before it make it wait.
    """

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] | None = None) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        #: below zero: tokens promised to callers still waiting for them
        self._tokens = float(self.burst)
        self._clock = clock or time.monotonic
        self._last = self._clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def delay_for_next(self) -> float:
        """Seconds a call asking now would wait for its token, behind the callers already waiting
        (0 when one is available now)."""
        if self.qps <= 0:
            return 0.0
        self._refill()
        return max(0.0, (1 - self._tokens) / self.qps)

    def reserve(self) -> float:
        """Take the next token, possibly one not refilled yet; the seconds until it is due."""
        delay = self.delay_for_next()
        if self.qps > 0:
            self._tokens -= 1
        return delay

    def give_back(self) -> None:
        """Return a reserved token its caller will not use (it was cancelled while waiting)."""
        if self.qps > 0:
            self._tokens = min(float(self.burst), self._tokens + 1)

    async def acquire(self) -> float:
        """Take a token, sleeping if needed; returns the seconds waited."""
        delay = self.reserve()
        if delay > 0:
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                self.give_back()
                raise
        return delay


@dataclass
class TokenWait:
    """What the requests made inside one :func:`measuring` block waited for client-side tokens.

    Our own queue is not the server's slowness: a worker is judged on the time after its request
    was sent (issue 38), so the token wait is kept apart from the call's duration.
    """

    #: seconds spent waiting for tokens, waits that ended
    seconds: float = 0.0
    #: a request of the block is waiting for its token now
    queueing: bool = False
    #: requests sent (each took a token)
    sent: int = 0
    #: called once per request, as it is sent (after its token, before the bytes go out)
    on_sent: Callable[[], None] | None = None

    def took_token(self, waited: float) -> None:
        self.seconds += waited
        self.sent += 1
        if self.on_sent is not None:
            self.on_sent()


_TOKEN_WAIT: contextvars.ContextVar[TokenWait | None] = contextvars.ContextVar("kruntime_token_wait", default=None)


@contextlib.contextmanager
def measuring(wait: TokenWait | None = None) -> Iterator[TokenWait]:
    """Requests made in this block (in this task) add their token waits to ``wait`` (a new one by default)."""
    wait = wait if wait is not None else TokenWait()
    token = _TOKEN_WAIT.set(wait)
    try:
        yield wait
    finally:
        _TOKEN_WAIT.reset(token)


def current_wait() -> TokenWait | None:
    """The :class:`TokenWait` of the enclosing :func:`measuring` block, if any."""
    return _TOKEN_WAIT.get()


def service_seconds(elapsed: float, token_wait: float, loop_stall: float = 0.0) -> float:
    """How long the server took: the call's duration without the wait for our own client's token and
    without the time our own event loop was stalled meanwhile (kruntime.lifecycle.LoopStall)."""
    return max(0.0, elapsed - token_wait - loop_stall)


def exponential_backoff(failures: int, base: float, cap: float) -> float:
    """Delay after ``failures`` consecutive failures: base * 2^(failures-1), capped."""
    if failures <= 0:
        return 0.0
    # Avoid float overflow for long failure streaks.
    exp = min(failures - 1, 62)
    return float(min(cap, base * (2**exp)))
