"""The event-loop lag metric both controllers export (issue 32 item 10): how late a fixed sleep woke."""

from __future__ import annotations

import asyncio
import time

import pytest

from builtin_controller import metrics as builtin_metrics
from kruntime.lifecycle import LOOP_STALL, run_controller, watch_loop_lag
from mirror import metrics as mirror_metrics


class Seen:
    def __init__(self) -> None:
        self.values: list[float] = []

    def observe(self, amount: float) -> None:
        self.values.append(amount)


@pytest.mark.parametrize(
    ("woke_after", "expected"),
    [
        ([0.5, 0.5], [0.0, 0.0]),  # on time
        ([0.5, 0.75, 10.5], [0.0, 0.25, 10.0]),  # a quarter second late, then a 10 s stall
        ([0.4], [0.0]),  # a clock that says early never makes a negative lag
    ],
    ids=["on-time", "late-then-stalled", "early"],
)
async def test_lag_is_the_time_past_the_interval(woke_after: list[float], expected: list[float]) -> None:
    now = [100.0]
    wakes = iter(woke_after)
    seen = Seen()

    async def sleep(interval: float) -> None:
        assert interval == 0.5
        try:
            now[0] += next(wakes)
        except StopIteration:
            raise asyncio.CancelledError from None

    with pytest.raises(asyncio.CancelledError):
        await watch_loop_lag(seen, interval=0.5, clock=lambda: now[0], sleep=sleep)
    assert seen.values == pytest.approx(expected)


def test_run_controller_measures_a_blocked_loop_and_stops_with_the_controller() -> None:
    seen = Seen()

    async def main() -> str:
        await asyncio.sleep(0.6)  # the watcher's second sleep (due at 1.0 s) ends while the loop is blocked
        time.sleep(1.0)
        await asyncio.sleep(0.1)
        return "done"

    stalled = LOOP_STALL.seconds()
    assert run_controller(main(), loop_lag=seen) == "done"
    assert seen.values and max(seen.values) >= 0.4, seen.values
    # the same lateness adds up where the workers' slowness reads it
    assert LOOP_STALL.seconds() - stalled == pytest.approx(sum(seen.values))


def test_both_controllers_have_the_histogram_under_their_prefix() -> None:
    assert mirror_metrics.EVENT_LOOP_LAG._name == "jobmirror_event_loop_lag_seconds"
    assert builtin_metrics.EVENT_LOOP_LAG._name == "job_controller_event_loop_lag_seconds"
