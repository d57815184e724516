"""A stalled event loop says where it was (kruntime.stalls): the fleet start's 3 s stall was found so."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import time

import pytest

from kruntime.lifecycle import run_controller
from kruntime.stalls import CollectorClock, StallReporter, where


def _inner() -> tuple[str, ...]:
    frame = sys._getframe()
    return where(frame, depth=2)


def test_where_names_the_innermost_frames_by_file_function_and_line() -> None:
    got = _inner()
    assert len(got) == 2
    assert got[0].startswith("tests/unit/test_loop_stalls.py:_inner:") and ":test_where_names" in got[1]


def test_a_stall_is_reported_once_when_it_ends_with_its_length_and_places() -> None:
    said: list[str] = []
    reporter = StallReporter(lambda: 0.0, threshold=1.0, report=said.append)
    frame = sys._getframe()
    for overdue in (0.2, 1.2, 1.5, 2.4):  # below the threshold: nothing; then three samples
        reporter.look(overdue, frame)
    assert said == []
    reporter.look(0.0, frame)  # the loop woke: one report
    reporter.look(0.0, frame)
    assert len(said) == 1 and reporter.reported == 1
    assert said[0].startswith("event loop stalled 2.4s (collector ")
    assert "3 samples): 3x tests/unit/test_loop_stalls.py:test_a_stall_is_reported_once" in said[0]


def test_a_stall_without_a_sample_says_so() -> None:
    said: list[str] = []
    reporter = StallReporter(lambda: 0.0, threshold=1.0, report=said.append)
    reporter.look(3.0, None)
    reporter.look(0.0, None)
    assert said and said[0].endswith("no sample (one C call held the interpreter)")


def test_the_collector_clock_adds_up_collections() -> None:
    clock = CollectorClock()
    clock.install()
    try:
        gc.collect()
    finally:
        clock.remove()
    assert clock.seconds > 0 and clock not in gc.callbacks


def test_a_controller_whose_loop_blocks_logs_where(caplog: pytest.LogCaptureFixture) -> None:
    class Seen:
        def observe(self, amount: float) -> None:
            pass

    def blocking_step() -> None:
        end = time.monotonic() + 2.0
        while time.monotonic() < end:  # Python code: the reporter's thread gets the interpreter to sample
            sum(range(1000))

    async def main() -> None:
        await asyncio.sleep(0.1)
        blocking_step()
        await asyncio.sleep(0.7)  # the watch wakes, the stall ends, the reporter says so

    with caplog.at_level(logging.WARNING, logger="kruntime.stalls"):
        run_controller(main(), loop_lag=Seen())
    stalls = [r.getMessage() for r in caplog.records if r.name == "kruntime.stalls"]
    assert len(stalls) == 1, stalls
    assert "event loop stalled" in stalls[0] and "blocking_step" in stalls[0], stalls[0]


@pytest.mark.parametrize("over, reported", [(None, False), (0.1, True)])
def test_a_shorter_stall_is_reported_when_asked(caplog: pytest.LogCaptureFixture, over: float | None,
                                                reported: bool) -> None:
    """--report-stalls-over 0.1 names the 0.1-0.3 s lags behind a loop-lag p99; by default only a
    stall over a second is logged."""
    class Seen:
        def observe(self, amount: float) -> None:
            pass

    def short_step() -> None:
        end = time.monotonic() + 0.6
        while time.monotonic() < end:
            sum(range(1000))

    async def main() -> None:
        await asyncio.sleep(0.1)
        short_step()
        await asyncio.sleep(0.7)

    with caplog.at_level(logging.WARNING, logger="kruntime.stalls"):
        if over is None:
            run_controller(main(), loop_lag=Seen())
        else:
            run_controller(main(), loop_lag=Seen(), report_stalls_over=over)
    stalls = [r.getMessage() for r in caplog.records if r.name == "kruntime.stalls"]
    assert bool(stalls) is reported, stalls
    assert not stalls or "short_step" in stalls[0], stalls


@pytest.mark.parametrize("flag, error", [("0", "positive"), ("-1", "positive"), ("soon", "not a number"),
                                         ("inf", "positive")])
def test_report_stalls_over_names_a_bad_value(capsys: pytest.CaptureFixture[str], flag: str, error: str) -> None:
    from mirror.cli import build_parser
    with pytest.raises(SystemExit):
        build_parser("jobmirror").parse_args(["--report-stalls-over", flag, "run"])
    err = capsys.readouterr().err
    assert "--report-stalls-over" in err and error in err, err


def test_both_controllers_take_report_stalls_over() -> None:
    from builtin_controller.cli import parse_args
    from mirror.cli import build_parser
    assert build_parser("jobmirror").parse_args(["--report-stalls-over", "0.05", "run"]).report_stalls_over == 0.05
    assert parse_args(["--kubeconfig", "k", "--report-stalls-over", "0.05"]).report_stalls_over == 0.05
