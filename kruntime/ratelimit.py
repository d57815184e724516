"""Client-side QPS/burst limiting and exponential backoff math (pure, unit-tested)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    """Client QPS/burst limit, like client-go's flowcontrol token bucket.

    A non-positive ``qps`` disables limiting. Waiters are served in arrival order.
    """

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] | None = None) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._clock = clock or time.monotonic
        self._last = self._clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def delay_for_next(self) -> float:
        """Seconds until one token is available (0 when one is available now)."""
        if self.qps <= 0:
            return 0.0
        self._refill()
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) / self.qps

    async def acquire(self) -> float:
        """Take a token, sleeping if needed; returns the seconds waited."""
        if self.qps <= 0:
            return 0.0
        async with self._lock:
            waited = 0.0
            while (d := self.delay_for_next()) > 0:
                await asyncio.sleep(d)
                waited += d
            self._tokens -= 1
            return waited


def exponential_backoff(failures: int, base: float, cap: float) -> float:
    """Delay after ``failures`` consecutive failures: base * 2^(failures-1), capped."""
    if failures <= 0:
        return 0.0
    # Avoid float overflow for long failure streaks.
    exp = min(failures - 1, 62)
    return float(min(cap, base * (2**exp)))
