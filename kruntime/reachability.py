"""Whether a cluster answers again: the watches backing off on it retry at once, not after their backoff.

A watch that failed backs off exponentially (up to 30 s); after an outage its next try can come
long after the server is back. A health probe that sees the server answer again after failures
says so here, and every watch of that cluster (one object shared by a client and its siblings)
cuts its backoff short: the cache, and so the worker's health, follows the server within a probe.
"""

from __future__ import annotations

import asyncio
import contextlib


class Reachability:
    def __init__(self) -> None:
        self._back = asyncio.Event()
        #: times the server was seen answering again after failing
        self.recoveries = 0

    def answered_again(self) -> None:
        """Wake every backoff pause under way now (later pauses wait for the next recovery)."""
        self.recoveries += 1
        self._back.set()
        self._back = asyncio.Event()

    async def pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the server is seen answering again meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._back.wait(), seconds)
