"""What both controller commands share: logging flags and setup, the event loop, signal handling.

``jobmirror run`` and ``jobmirror-builtin`` take the same ``--log-level``/``--log-format``
flags, log JSON lines unless stderr is a terminal, and stop on SIGTERM/SIGINT through
:func:`run_until_signalled`; each controller decides only *how* it winds down (the mirror
cancels, the builtin controller lets in-flight syncs finish within a grace period).
Both controllers name their hooks alike: ``liveness()``/``readiness()`` for the health
server and ``stop()`` to wind down.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

import uvloop

from kruntime import heap
from kruntime.logging_setup import setup_logging
from kruntime.stalls import StallReporter

T = TypeVar("T")

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: seconds between two loop-lag samples: often enough to catch a stall, cheap (one timer)
LOOP_LAG_INTERVAL = 0.5


class Observer(Protocol):
    def observe(self, amount: float) -> None: ...


#: a stall of the event loop longer than this is logged with where the loop was (kruntime.stalls)
REPORT_STALLS_OVER = 1.0


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0, the bad value named."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text!r}")
    return value


def add_logging_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help="log level")
    parser.add_argument("--log-format", choices=["auto", "json", "text"], default="auto",
                        help="auto: JSON lines unless stderr is a terminal")
    parser.add_argument("--report-stalls-over", type=positive_seconds, default=REPORT_STALLS_OVER,
                        metavar="SECONDS", help="a controller logs where its event loop was when it stalled longer "
                        "than this (0.05 to hunt the lags behind a loop-lag p99)")


def setup_logging_from(args: argparse.Namespace) -> None:
    setup_logging(args.log_level, args.log_format)


class LoopStall:
    """How late, in all, this process's event loop has run the loop-lag watch's timer: each wake-up's
    lateness, and the current one's as far as it is overdue now. A call timed across a stall of our
    own loop (a relist of a million pods decoding) did not wait that long for its server; a worker's
    slowness leaves it out (mirror.workers)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._late = 0.0
        self._due: float | None = None

    def expect(self, at: float) -> None:
        self._due = at

    def woke(self, late: float) -> None:
        self._late += late
        self._due = None

    def overdue(self) -> float:
        """How late the expected wake-up is now (0 when none is expected or it is not yet due)."""
        due = self._due
        return max(0.0, self.clock() - due) if due is not None else 0.0

    def seconds(self) -> float:
        return self._late + self.overdue()


#: this process's: measured while run_controller's loop-lag watch runs, 0 otherwise
LOOP_STALL = LoopStall()


async def watch_loop_lag(lag: Observer, *, interval: float = LOOP_LAG_INTERVAL,
                         clock: Callable[[], float] = time.monotonic,
                         sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
                         stall: LoopStall | None = None) -> None:
    """Sleep ``interval`` again and again and observe how late each wake-up came: the time any
    callback waited for the loop then. One tenant's object that costs the loop seconds shows here
    before the Lease is lost (issue 32); it runs until cancelled. ``stall`` adds up the lateness."""
    while True:
        start = clock()
        if stall is not None:
            stall.expect(start + interval)
        late = 0.0
        try:
            await sleep(interval)
            late = max(0.0, clock() - start - interval)
            lag.observe(late)
        finally:  # cancelled too: no wake-up stays expected after the watch
            if stall is not None:
                stall.woke(late)


async def _with_loop_lag(main: Coroutine[Any, Any, T], lag: Observer, report_stalls_over: float) -> T:
    watcher = asyncio.create_task(watch_loop_lag(lag, stall=LOOP_STALL), name="event-loop-lag")
    settler = asyncio.create_task(heap.keep_settled(), name="heap-settle")  # no collection walks the caches
    # a stall says where the loop was (kruntime.stalls), looked at five times within the threshold
    reporter = StallReporter(LOOP_STALL.overdue, threshold=report_stalls_over, every=min(0.1, report_stalls_over / 5))
    reporter.start()
    try:
        return await main
    finally:
        reporter.stop()
        await cancel_and_wait(settler)
        await cancel_and_wait(watcher)


def run_controller(main: Coroutine[Any, Any, T], *, loop_lag: Observer | None = None,
                   report_stalls_over: float = REPORT_STALLS_OVER) -> T:
    """Run a controller's main coroutine on uvloop: its cheaper transports and callbacks cut the
    mirror controller's CPU per Job by a fifth and raised its dispatch rate (issue 23's A/B,
    results/ab-issue23.json). With ``loop_lag`` (the controller's event-loop lag histogram,
    kruntime.metrics.event_loop_lag) the loop's lateness is measured while it runs, and a stall
    longer than ``report_stalls_over`` seconds is logged with where the loop was."""
    return uvloop.run(main if loop_lag is None else _with_loop_lag(main, loop_lag, report_stalls_over))


async def run_until_signalled(
    work: Coroutine[Any, Any, None] | asyncio.Future[None], on_signal: Callable[[asyncio.Task[None]], Awaitable[None]]
) -> asyncio.Task[None] | None:
    """Run ``work`` until it ends by itself or SIGTERM/SIGINT arrives.

    On a signal, ``on_signal(task)`` winds the work down and None is returned; when the
    work ended by itself, its (done) task is returned for the caller to judge.
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = (signal.SIGTERM, signal.SIGINT)
    for sig in signals:
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    task: asyncio.Task[None] = asyncio.ensure_future(work)
    stopper = asyncio.create_task(stop.wait())
    try:
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task
        await on_signal(task)
        return None
    finally:
        stopper.cancel()
        for sig in signals:
            with contextlib.suppress(NotImplementedError):
                loop.remove_signal_handler(sig)


async def cancel_and_wait(task: asyncio.Task[None]) -> None:
    """The wind-down of work that cleans up in its own ``finally``: cancel it and let it finish."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
