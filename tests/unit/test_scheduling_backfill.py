"""Bounded backfill (issue 35 item 3): a Job's known length, the estimated start of the Job first in
line for a worker, and the property that a backfilled Job never delays that start
(mirror/scheduling/backfill.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.scheduling.backfill import Release, estimated_start, expected_length, may_backfill, parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90.0), ("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("250ms", 0.25),
    ("2m500ms", 120.5), (" 45s ", 45.0), ("1e3", 1000.0), ("0.5", 0.5), ("1h0m1s", 3601.0),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "says"), [
    ("", "is not a duration"), ("soon", "is not a duration"), ("5 m", "is not a duration"),
    ("1h 30m", "is not a duration"), ("5d", "is not a duration"), ("-5s", "is not a duration"),
    ("m5", "is not a duration"), ("5mx", "is not a duration"),
    ("0", "is not a positive duration"), ("0s", "is not a positive duration"), ("-5", "is not a positive duration"),
    ("inf", "is not a positive duration"), ("nan", "is not a positive duration"),
])
def test_parse_duration_refuses_what_is_not_a_positive_duration(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_duration(text)


@pytest.mark.parametrize(("deadline", "annotation", "length"), [
    (None, None, None),
    (600, None, 600.0),
    (None, "10m", 600.0),
    (600, "5m", 300.0),  # the smaller of the two
    (120, "1h", 120.0),
    (0, None, None),  # not a deadline the API server accepts: not known
    (-5, "30s", 30.0),
    (True, None, None),  # a bool is not a number of seconds
    ("600", None, None),
    (600.0, None, None),
    (None, "", None),
])
def test_expected_length(deadline: object, annotation: str | None, length: float | None) -> None:
    assert expected_length(deadline, annotation) == length


def test_expected_length_says_which_annotation_does_not_parse() -> None:
    with pytest.raises(ValueError, match="'an hour' is not a duration"):
        expected_length(600, "an hour")


CPU4 = {"cpu": 4000}


@pytest.mark.parametrize(("free", "releases", "demand", "starts"), [
    ({"cpu": 4000}, [], CPU4, 100.0),  # fits now
    ({"cpu": 1000}, [Release(160.0, {"cpu": 2000}), Release(130.0, {"cpu": 1000})], CPU4, 160.0),
    ({"cpu": 1000}, [Release(160.0, {"cpu": 2000}), Release(130.0, {"cpu": 3000})], CPU4, 130.0),  # the earliest due
    ({"cpu": 1000}, [Release(None, {"cpu": 3000}), Release(500.0, {"cpu": 3000})], CPU4, 100.0),  # unknown: now
    ({"cpu": 1000}, [Release(50.0, {"cpu": 3000})], CPU4, 100.0),  # overdue: now
    ({"cpu": 1000}, [Release(200.0, {"cpu": 1000})], CPU4, math.inf),  # never, even when all ends
    ({"cpu": 8000, "nvidia.com/gpu": 0}, [Release(300.0, {"nvidia.com/gpu": 1})], {"cpu": 1000, "nvidia.com/gpu": 1},
     300.0),  # the GPU decides
    ({}, [], {}, 100.0),  # asks nothing
    ({"cpu": 0}, [Release(150.0, {"memory": 2**30}), Release(170.0, {"cpu": 5000})], CPU4, 170.0),
], ids=["fits-now", "both-needed", "one-enough", "unknown-counts-as-now", "overdue-counts-as-now", "never",
        "extended-resource", "no-demand", "other-resource-ignored"])
def test_estimated_start(free: dict[str, int], releases: list[Release], demand: dict[str, int],
                         starts: float) -> None:
    assert estimated_start(100.0, free, releases, demand) == starts


@pytest.mark.parametrize(("length", "margin", "head_starts", "backfills"), [
    (None, 0.0, math.inf, False),  # length not known: never
    (50.0, 5.0, 155.0, True),  # ends exactly margin before
    (50.0, 5.0, 154.9, False),
    (50.0, 0.0, 150.0, True),
    (1e9, 5.0, math.inf, True),  # the head could never start there
    (1.0, 0.0, 100.0, False),  # the head starts now
])
def test_may_backfill(length: float | None, margin: float, head_starts: float, backfills: bool) -> None:
    assert may_backfill(100.0, length, margin, head_starts) is backfills


# -- the property: a backfilled Job never delays the head ---------------------------------------------

RESOURCES = ("cpu", "memory", "nvidia.com/gpu")
NOW = 1000.0


def true_start(free: Mapping[str, int], ends: Sequence[tuple[float, Mapping[str, int]]], demand: Mapping[str, int],
               taken: Mapping[str, int] = {}, until: float = NOW) -> float:
    """When the head really starts: the first instant at or after NOW when the free room, plus what the
    running work gave back by its actual end, less ``taken`` before ``until``, covers its demand."""
    for t in sorted({NOW, until, *(e for e, _ in ends if e >= NOW)}):
        room = {r: free.get(r, 0) - (taken.get(r, 0) if t < until else 0)
                + sum(a.get(r, 0) for e, a in ends if e <= t) for r in demand}
        if all(room[r] >= want for r, want in demand.items()):
            return t
    return math.inf


amounts = st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, 8), max_size=3)
#: (amounts, its end after NOW, whether the scheduler knows that end): mostly known, or nothing backfills
running = st.lists(st.tuples(amounts, st.integers(1, 500), st.integers(0, 3).map(bool)), max_size=6)


@st.composite
def backfill_cases(draw: st.DrawFn, upper_bounds: bool) -> tuple[dict[str, int], list[tuple[dict[str, int], float,
                                                                                         float | None]],
                                                                  dict[str, int], dict[str, int], float, float]:
    """free room, running work as (amounts, actual end, end the scheduler knows or None), the head's
    demand, a candidate that fits now, its length and the margin."""
    free = draw(amounts)
    work = []
    for amount, end, known in draw(running):
        actual = NOW + end
        if upper_bounds and known:  # the known length is a deadline: it may end before it
            actual = NOW + draw(st.integers(1, end))
        work.append((amount, actual, NOW + end if known else None))
    # mostly a head that does not fit now but will once some of the running work ends
    asked = draw(st.lists(st.sampled_from(RESOURCES), min_size=1, max_size=3, unique=True))
    head = {r: free.get(r, 0) + draw(st.integers(0 if len(asked) > 1 else 1,
                                                 max(1, sum(a.get(r, 0) for a, _, _ in work))))
            for r in asked}
    candidate = {r: draw(st.integers(0, v)) for r, v in free.items()}
    margin = float(draw(st.sampled_from([0, 1, 5, 30])))
    # mostly a length that may backfill: up to the scheduler's estimate less the margin
    estimate = estimated_start(NOW, free, [Release(known, a) for a, _, known in work], head)
    room = int(min(estimate - NOW - margin, 600)) if estimate > NOW + margin else 0
    length = float(draw(st.integers(1, 600) if room < 1 or draw(st.integers(0, 3)) == 0 else st.integers(1, room)))
    return free, work, head, candidate, length, margin


@settings(max_examples=150, deadline=None)
@given(backfill_cases(upper_bounds=False))
def test_a_backfilled_job_never_delays_the_head(case: tuple[dict[str, int], list[tuple[dict[str, int], float,
                                                                                      float | None]],
                                                            dict[str, int], dict[str, int], float, float]) -> None:
    """Known ends are the actual ends; unknown ones (Jobs of no known length, other pods) are counted as
    ending now by the scheduler. If it lets the candidate backfill, the head's true start is the same
    with and without the candidate's room taken until now+length."""
    free, work, head, candidate, length, margin = case
    estimate = estimated_start(NOW, free, [Release(known, a) for a, _, known in work], head)
    if not may_backfill(NOW, length, margin, estimate):
        return
    ends = [(actual, a) for a, actual, _ in work]
    assert true_start(free, ends, head, candidate, NOW + length) == true_start(free, ends, head)


@settings(max_examples=150, deadline=None)
@given(backfill_cases(upper_bounds=True))
def test_when_known_lengths_are_deadlines_a_backfilled_job_never_delays_the_head_past_its_estimated_start(
        case: tuple[dict[str, int], list[tuple[dict[str, int], float, float | None]], dict[str, int],
                    dict[str, int], float, float]) -> None:
    """activeDeadlineSeconds and the expected-duration annotation bound a Job's length from above:
    running work may end before the scheduler expects. Then the head may start before its estimate
    and a backfilled Job may keep it until the backfilled Job ends, but never past the estimate."""
    free, work, head, candidate, length, margin = case
    estimate = estimated_start(NOW, free, [Release(known, a) for a, _, known in work], head)
    if not may_backfill(NOW, length, margin, estimate):
        return
    ends = [(actual, a) for a, actual, _ in work]
    without, with_candidate = true_start(free, ends, head), true_start(free, ends, head, candidate, NOW + length)
    assert with_candidate <= max(without, estimate - margin)


def test_a_running_job_that_ends_before_its_deadline_lets_a_backfilled_one_delay_the_head() -> None:
    """What the property above allows, as one row: the head needs the room of a Job whose deadline is
    NOW+100; it ends at NOW+20. The candidate (NOW+50 at most) was allowed in, and the head starts at
    NOW+50, not NOW+20 — still before the NOW+100 it was estimated to start at."""
    free, ending, head, candidate = {"cpu": 2}, {"cpu": 4}, {"cpu": 5}, {"cpu": 2}
    estimate = estimated_start(NOW, free, [Release(NOW + 100, ending)], head)
    assert estimate == NOW + 100 and may_backfill(NOW, 50.0, 5.0, estimate)
    assert true_start(free, [(NOW + 20, ending)], head) == NOW + 20
    assert true_start(free, [(NOW + 20, ending)], head, candidate, NOW + 50) == NOW + 50
