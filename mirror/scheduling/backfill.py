"""Backfill: a later Job may use room on a worker the Job first in line for it waits for, when it
ends before that Job's estimated start there, so the first Job's start is never delayed.

The estimate adds up room over the worker as a whole (free now, plus what running work releases
when it ends): node by node the Job could only start later, never earlier, so the estimate errs on
the early side, which is the safe side. Work whose end is not known counts as ending now.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float:
    """Seconds in ``"90"``, ``"90s"``, ``"5m"``, ``"1h30m"`` (Go's duration units h, m, s, ms).
    Raises ValueError naming the text."""
    t = text.strip()
    try:
        seconds = float(t)
    except ValueError:
        parts = _PART.findall(t)
        if not parts or "".join(n + u for n, u in parts) != t:
            raise ValueError(f"{text!r} is not a duration (write e.g. 90s, 5m, 1h30m)") from None
        seconds = sum(float(n) * _UNIT[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    return seconds


def expected_length(active_deadline: object, annotation: str | None) -> float | None:
    """How long a Job runs at most once started: ``activeDeadlineSeconds`` (the API server ends it
    then) or the expected-duration annotation, the smaller when both are set; None: not known."""
    known = []
    if isinstance(active_deadline, int) and not isinstance(active_deadline, bool) and active_deadline > 0:
        known.append(float(active_deadline))
    if annotation:
        known.append(parse_duration(annotation))
    return min(known) if known else None


@dataclass(frozen=True)
class Release:
    """Room running work gives back when it ends: at ``at`` (None: not known, counted as now)."""

    at: float | None
    amounts: Mapping[str, int]


def estimated_start(now: float, free: Mapping[str, int], releases: Iterable[Release],
                    demand: Mapping[str, int]) -> float:
    """The earliest time at which ``free`` room plus the releases due by then covers ``demand``
    (``now`` when it does already, inf when even every release does not)."""
    have = {r: free.get(r, 0) for r in demand}

    def covered() -> bool:
        return all(have[r] >= want for r, want in demand.items())

    timed: list[tuple[float, Mapping[str, int]]] = []
    for rel in releases:
        if rel.at is None or rel.at <= now:
            for r in demand:
                have[r] += rel.amounts.get(r, 0)
        else:
            timed.append((rel.at, rel.amounts))
    if covered():
        return now
    for at, amounts in sorted(timed, key=lambda t: t[0]):
        for r in demand:
            have[r] += amounts.get(r, 0)
        if covered():
            return at
    return math.inf


def may_backfill(now: float, length: float | None, margin: float, head_starts: float) -> bool:
    """Whether a Job of known ``length`` placed now ends ``margin`` before the head's estimated start."""
    return length is not None and now + length + margin <= head_starts


def start_on_worker(now: float, allocatable: Mapping[str, int], requested: Mapping[str, int],
                    ending: Iterable[tuple[float | None, Mapping[str, int]]], demand: Mapping[str, int]) -> float:
    """When a Job of ``demand`` could start on a worker at the earliest: its free room now, plus what
    its running Jobs of known length (``ending``: their end, or None, and what they hold) give back
    when they end; all else it has requested (other pods, Jobs of unknown length, Jobs placed before
    this process) counted as ending now: the earliest start, so backfill is the rarer — the safe side."""
    free = {r: allocatable.get(r, 0) - requested.get(r, 0) for r in demand}
    known: dict[str, int] = {}
    releases: list[Release] = []
    for ends_at, holds in ending:
        if ends_at is not None:
            releases.append(Release(ends_at, holds))
            for res, v in holds.items():
                known[res] = known.get(res, 0) + v
    unknown = {res: max(0, requested.get(res, 0) - known.get(res, 0)) for res in demand}
    return estimated_start(now, free, [*releases, Release(None, unknown)], demand)
