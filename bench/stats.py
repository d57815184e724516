"""Percentiles and latency summaries (pure)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def rounded(x: float | None, digits: int) -> float | None:
    """``x`` rounded for a results file (``None``, an unmeasured figure, stays ``None``)."""
    return None if x is None else round(x, digits)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) with linear interpolation between closest ranks.

    This is the usual definition (numpy's default, Hyndman & Fan type 7): rank
    ``(n - 1) * q / 100`` in the sorted sample, interpolated. ``None`` for an empty sample.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    data = sorted(v for v in values if not math.isnan(v))
    if not data:
        return None
    if len(data) == 1:
        return float(data[0])
    rank = (len(data) - 1) * q / 100.0
    lo = math.floor(rank)
    hi = math.ceil(rank)
    frac = rank - lo
    return float(data[lo] + (data[hi] - data[lo]) * frac)


def summarize(values: Iterable[float | None], *, digits: int = 4) -> dict[str, float | int | None]:
    """count/min/mean/p50/p95/p99/max of the known values (``None`` entries are counted as missing)."""
    raw = list(values)
    data = [float(v) for v in raw if v is not None and not math.isnan(v)]

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, digits)

    return {
        "count": len(data),
        "missing": len(raw) - len(data),
        "min": r(min(data)) if data else None,
        "mean": r(sum(data) / len(data)) if data else None,
        "p50": r(percentile(data, 50)),
        "p95": r(percentile(data, 95)),
        "p99": r(percentile(data, 99)),
        "max": r(max(data)) if data else None,
    }


def rate(count: int, seconds: float | None) -> float | None:
    """Events per second, or ``None`` when the interval is unknown or empty."""
    if seconds is None or seconds <= 0:
        return None
    return count / seconds


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b`` or ``None`` when either side is unknown or ``b`` is zero."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def not_below_zero(diffs: Iterable[float | None]) -> tuple[list[float | None], int]:
    """``diffs`` with negatives raised to 0, and how many were.

    For a latency whose end cannot precede its start in fact, timed by the receive times of two
    watch streams on one clock: a negative value only says the start's stream delivered later
    than the end's whole path did, so the true latency lies between 0 and that delivery skew; 0
    is the nearest value it can have. The count says how often that happened.
    """
    out: list[float | None] = []
    raised = 0
    for d in diffs:
        if d is not None and d < 0:
            raised += 1
            d = 0.0
        out.append(d)
    return out, raised


def longest_wait_without_progress(arrived: Sequence[float], served: Sequence[float],
                                  end: float | None = None) -> tuple[float, float] | None:
    """The longest stretch during which some item had arrived and no item was served: ``(seconds, start)``.

    A dispatch stall is what a waiting tenant sees: a Job is in the manager and no copy is being
    made for anyone. Items are served in any order, so the k-th serve is matched with the k-th
    arrival: between the (k-1)-th serve and the k-th, something was waiting from the later of
    that serve and the k-th arrival. With ``end`` (a run that stopped with items unserved) the
    wait from the last serve to ``end`` counts too. ``None`` when there was nothing to wait for.
    """
    a = sorted(arrived)
    s = sorted(served)
    stretches: list[tuple[float, float]] = []
    prev: float | None = None
    for k, done in enumerate(s + ([end] if end is not None and len(s) < len(a) else [])):
        waiting_from = a[k] if k < len(a) else done
        if prev is not None:
            waiting_from = max(waiting_from, prev)
        stretches.append((max(done - waiting_from, 0.0), waiting_from))
        prev = done
    return max(stretches, key=lambda st: st[0], default=None)
