"""Where the event loop was while it stalled: a stall says what it was doing, not only how long.

The loop-lag histogram tells that the loop ran a timer seconds late; it cannot tell why, and a
stall of a few seconds in a fleet-sized controller (issue 38: p99 4 s while a million pods are
relisted) is gone before anyone attaches a profiler. A daemon thread looks every ``every`` seconds
at how overdue the loop-lag watch's wake-up is (:class:`kruntime.lifecycle.LoopStall`); past
``threshold`` it samples the loop thread's stack, and when the stall ends it logs one warning: how
long, the seconds the cyclic collector ran meanwhile, and the innermost frames it was found in
most often. The thread needs the GIL to sample, so a stall inside one C call (a collection, a JSON
decode) shows as few samples and its collector seconds.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)

#: frames of a sample that name it (innermost first)
FRAMES = 8
#: the most frequent samples a report names
SHOWN = 3


class CollectorClock:
    """Seconds the cyclic garbage collector has run in this process since it was installed."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.seconds = 0.0
        self._began: float | None = None

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = self.clock()
        elif self._began is not None:
            self.seconds += self.clock() - self._began
            self._began = None

    def install(self) -> None:
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def remove(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)


def where(frame: FrameType | None, depth: int = FRAMES) -> tuple[str, ...]:
    """The innermost ``depth`` frames of a stack, as ``module.py:function:line``."""
    out: list[str] = []
    while frame is not None and len(out) < depth:
        code = frame.f_code
        out.append(f"{_short(code.co_filename)}:{code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return tuple(out)


def _short(path: str) -> str:
    """A source path from the project's root (``mirror/room/view.py``) or from its library on
    (``asyncio/events.py``, ``aiohttp/client.py``), else its last three parts."""
    if path.startswith(_ROOT):
        return path[len(_ROOT):]
    parts = path.replace("\\", "/").split("/")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in ("site-packages", "lib") or parts[i].startswith("python3"):
            return "/".join(parts[i + 1:])
    return "/".join(parts[-3:])


#: the directory that holds this project's packages
_ROOT = str(Path(__file__).resolve().parents[1]) + os.sep


@dataclass
class Stall:
    """One stall as the reporter saw it."""

    longest: float = 0.0
    collector_at_start: float = 0.0
    samples: Counter[tuple[str, ...]] = field(default_factory=Counter)

    def message(self, collector_now: float) -> str:
        places = "; ".join(f"{n}x {' < '.join(frames)}" for frames, n in self.samples.most_common(SHOWN))
        return (f"event loop stalled {self.longest:.1f}s (collector {collector_now - self.collector_at_start:.2f}s, "
                f"{sum(self.samples.values())} samples): {places or 'no sample (one C call held the interpreter)'}")


class StallReporter:
    """Samples the loop thread's stack while the loop is stalled; logs each stall once it ends."""

    def __init__(self, overdue: Callable[[], float], *, threshold: float = 1.0, every: float = 0.1,
                 collector: CollectorClock | None = None,
                 report: Callable[[str], None] = log.warning) -> None:
        self.overdue = overdue
        self.threshold = threshold
        self.every = every
        self.collector = collector or CollectorClock()
        self.report = report
        self._loop_thread = threading.get_ident()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stall: Stall | None = None
        self.reported = 0

    def start(self) -> None:
        """Watch the loop of the calling thread."""
        self._loop_thread = threading.get_ident()
        self.collector.install()
        self._thread = threading.Thread(target=self._run, name="loop-stall-reporter", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.collector.remove()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.look(self.overdue(), sys._current_frames().get(self._loop_thread))

    def look(self, overdue: float, frame: FrameType | None) -> None:
        """One look: a sample while stalled past the threshold, the report once it is over."""
        if overdue > self.threshold:
            if self._stall is None:
                self._stall = Stall(collector_at_start=self.collector.seconds)
            self._stall.longest = max(self._stall.longest, overdue)
            if frame is not None:
                self._stall.samples[where(frame)] += 1
        elif self._stall is not None:
            stall, self._stall = self._stall, None
            self.reported += 1
            self.report(stall.message(self.collector.seconds))
