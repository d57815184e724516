"""bench.stats: percentile math and summaries."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.stats import longest_wait_without_progress, percentile, rate, ratio, summarize


def test_percentile_known_values() -> None:
    data = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert percentile(data, 0) == 1
    assert percentile(data, 100) == 10
    assert percentile(data, 50) == 5.5
    # rank (n-1)*q = 9*0.95 = 8.55 -> 9 + 0.55*(10-9)
    assert percentile(data, 95) == pytest.approx(9.55)
    assert percentile(data, 99) == pytest.approx(9.91)


def test_percentile_order_does_not_matter_and_nan_is_ignored() -> None:
    assert percentile([5, 1, 3, math.nan], 50) == 3


def test_percentile_edges() -> None:
    assert percentile([], 50) is None
    assert percentile([7.5], 99) == 7.5
    with pytest.raises(ValueError):
        percentile([1, 2], 101)


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


try:  # the oracle; matplotlib (the bench extra) brings it
    import numpy as np
except ImportError:  # pragma: no cover
    np = None  # type: ignore[assignment]


@settings(deadline=None)  # the machine is shared: no timing assertions
@given(st.lists(finite, min_size=1, max_size=50), st.floats(min_value=0, max_value=100))
def test_percentile_matches_numpy_linear(values: list[float], q: float) -> None:
    if np is None:
        pytest.skip("numpy not installed")
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-6)


@settings(deadline=None)
@given(st.lists(finite, min_size=1, max_size=50), st.floats(0, 100), st.floats(0, 100))
def test_percentile_is_monotone_and_bounded(values: list[float], q1: float, q2: float) -> None:
    lo, hi = sorted((q1, q2))
    a, b = percentile(values, lo), percentile(values, hi)
    assert a is not None and b is not None
    assert min(values) - 1e-9 <= a <= b + 1e-9 <= max(values) + 2e-9


def test_summarize_counts_missing() -> None:
    s = summarize([0.1, None, 0.3, 0.2])
    assert s["count"] == 3
    assert s["missing"] == 1
    assert s["p50"] == 0.2
    assert s["min"] == 0.1 and s["max"] == 0.3
    assert s["mean"] == pytest.approx(0.2)


def test_summarize_empty() -> None:
    s = summarize([None])
    assert s["count"] == 0 and s["missing"] == 1 and s["p99"] is None and s["mean"] is None


def test_rate_and_ratio() -> None:
    assert rate(100, 4.0) == 25
    assert rate(100, 0) is None and rate(1, None) is None
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(1.0, 0) is None and ratio(None, 1.0) is None


@pytest.mark.parametrize(("diffs", "expected", "raised"), [
    ([0.2, None, 0.0], [0.2, None, 0.0], 0),
    ([-0.1, 0.3, -2.0], [0.0, 0.3, 0.0], 2),
    ([], [], 0),
], ids=["untouched", "negatives-raised", "empty"])
def test_not_below_zero_raises_negatives_and_counts_them(diffs: list[float | None], expected: list[float | None],
                                                         raised: int) -> None:
    from bench.stats import not_below_zero

    assert not_below_zero(diffs) == (expected, raised)


@pytest.mark.parametrize(
    ("arrived", "served", "end", "want"),
    [
        pytest.param([], [], None, None, id="nothing-arrived"),
        pytest.param([0.0, 0.0, 0.0], [1.0, 2.0, 8.0], None, (6.0, 2.0), id="gap-between-serves"),
        pytest.param([0.0], [5.0], None, (5.0, 0.0), id="first-serve-waits-from-arrival"),
        # Nothing waited between 2 and 10: the third Job arrived at 10, served at 11.
        pytest.param([0.0, 1.0, 10.0], [1.5, 2.0, 11.0], None, (1.5, 0.0), id="idle-is-not-a-stall"),
        pytest.param([0.0, 0.0], [1.0], 30.0, (29.0, 1.0), id="unserved-until-the-end"),
        pytest.param([0.0, 0.0], [1.0, 2.0], 30.0, (1.0, 0.0), id="end-ignored-when-all-served"),
        pytest.param([3.0, 0.0], [2.0, 1.0], None, (1.0, 0.0), id="order-does-not-matter"),
    ],
)
def test_longest_wait_without_progress(arrived: list[float], served: list[float], end: float | None,
                                       want: tuple[float, float] | None) -> None:
    assert longest_wait_without_progress(arrived, served, end) == want
