"""How late the event loop wakes a sleeper: in wall time, and as the part of it the loop thread
spent on the CPU.

The second is what a test of "nothing holds the loop" bounds: on a machine shared with other CI
lanes a runnable process is often given no core for a while, which makes the loop late without
any work of ours running on it.
"""

from __future__ import annotations

import asyncio
import time


class LoopGaps:
    """The largest lateness seen by :meth:`sleep` (``largest``) and its busy part (``largest_busy``)."""

    def __init__(self) -> None:
        self.largest = 0.0
        self.largest_busy = 0.0

    async def sleep(self, seconds: float) -> None:
        before, cpu_before = time.monotonic(), time.thread_time()
        await asyncio.sleep(seconds)
        late = time.monotonic() - before - seconds
        self.largest = max(self.largest, late)
        # late by work on the loop: the loop thread spent at least that much CPU in the window
        self.largest_busy = max(self.largest_busy, min(late, time.thread_time() - cpu_before))

    async def run(self, interval: float) -> None:
        """Sleep ``interval`` after ``interval`` until cancelled."""
        while True:
            await self.sleep(interval)
