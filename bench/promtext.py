"""Parse the Prometheus text exposition format and diff counters (pure).

Enough of the format for ``/metrics`` of kube-apiserver, kube-controller-manager and
prometheus_client: ``# HELP``/``# TYPE`` comments, ``name{l="v",...} value [timestamp]``,
escaped label values (``\\\\``, ``\\"``, ``\\n``), ``+Inf``/``-Inf``/``NaN``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Labels = Mapping[str, str]


class MetricsParseError(ValueError):
    """A line is not valid exposition text; the message quotes it."""


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    value: float = 0.0


def _parse_value(tok: str) -> float:
    t = tok.strip()
    low = t.lower()
    if low in ("+inf", "inf"):
        return math.inf
    if low == "-inf":
        return -math.inf
    if low == "nan":
        return math.nan
    return float(t)


def _parse_labels(text: str, line: str) -> tuple[dict[str, str], int]:
    """Parse ``{a="b",c="d"}`` starting at ``text[0] == '{'``; return labels and the end index."""
    labels: dict[str, str] = {}
    i = 1
    n = len(text)
    while True:
        while i < n and text[i] in " \t,":
            i += 1
        if i >= n:
            raise MetricsParseError(f"unterminated label set: {line!r}")
        if text[i] == "}":
            return labels, i + 1
        eq = text.find("=", i)
        if eq < 0:
            raise MetricsParseError(f"label without '=': {line!r}")
        key = text[i:eq].strip()
        i = eq + 1
        while i < n and text[i] == " ":
            i += 1
        if i >= n or text[i] != '"':
            raise MetricsParseError(f"label value not quoted: {line!r}")
        i += 1
        buf: list[str] = []
        while True:
            if i >= n:
                raise MetricsParseError(f"unterminated label value: {line!r}")
            ch = text[i]
            if ch == "\\" and i + 1 < n:
                nxt = text[i + 1]
                buf.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, "\\" + nxt))
                i += 2
                continue
            if ch == '"':
                i += 1
                break
            buf.append(ch)
            i += 1
        labels[key] = "".join(buf)


def parse_line(line: str) -> Sample | None:
    """One exposition line as a sample; ``None`` for blank lines and comments."""
    s = line.strip()
    if not s or s.startswith("#"):
        return None
    brace = s.find("{")
    space = min((p for p in (s.find(" "), s.find("\t")) if p >= 0), default=-1)
    if brace >= 0 and (space < 0 or brace < space):
        name = s[:brace]
        labels, end = _parse_labels(s[brace:], line)
        rest = s[brace + end:].split()
    else:
        parts = s.split()
        name, labels, rest = parts[0], {}, parts[1:]
    if not name or not rest:
        raise MetricsParseError(f"sample without a value: {line!r}")
    try:
        value = _parse_value(rest[0])
    except ValueError as exc:
        raise MetricsParseError(f"bad sample value {rest[0]!r}: {line!r}") from exc
    return Sample(name, labels, value)


def parse(text: str) -> list[Sample]:
    """Every sample in an exposition text, in order."""
    out = []
    for line in text.splitlines():
        smp = parse_line(line)
        if smp is not None:
            out.append(smp)
    return out


Matcher = Mapping[str, str] | Callable[[Labels], bool] | None


def _matches(labels: Labels, where: Matcher) -> bool:
    if where is None:
        return True
    if callable(where):
        return bool(where(labels))
    return all(labels.get(k, "") == v for k, v in where.items())


def total(samples: Iterable[Sample], name: str, where: Matcher = None) -> float:
    """Sum of the values of ``name`` whose labels match ``where`` (a dict of equalities or a predicate)."""
    return sum(s.value for s in samples if s.name == name and _matches(s.labels, where))


def grouped(samples: Iterable[Sample], name: str, by: tuple[str, ...], where: Matcher = None) -> dict[tuple[str, ...],
                                                                                                       float]:
    """Sum of ``name`` per combination of the ``by`` labels (missing labels count as ``""``)."""
    out: dict[tuple[str, ...], float] = {}
    for s in samples:
        if s.name == name and _matches(s.labels, where):
            k = tuple(s.labels.get(b, "") for b in by)
            out[k] = out.get(k, 0.0) + s.value
    return out


def counter_delta(before: Iterable[Sample], after: Iterable[Sample], name: str, by: tuple[str, ...] = (),
                  where: Matcher = None) -> dict[tuple[str, ...], float]:
    """How much counter ``name`` grew between two scrapes, per ``by`` group (zero growth omitted).

    A group whose value went down (the process restarted) counts its whole ``after`` value.
    """
    b = grouped(before, name, by, where)
    a = grouped(after, name, by, where)
    out: dict[tuple[str, ...], float] = {}
    for k, v in a.items():
        prev = b.get(k, 0.0)
        d = v - prev if v >= prev else v
        if d:
            out[k] = d
    return out


def mean_from_histogram(before: Iterable[Sample], after: Iterable[Sample], name: str, by: tuple[str, ...] = (),
                        where: Matcher = None) -> dict[tuple[str, ...], float]:
    """Mean observation between two scrapes of histogram/summary ``name`` (from ``_sum`` and ``_count``)."""
    b, a = list(before), list(after)
    sums = counter_delta(b, a, f"{name}_sum", by, where)
    counts = counter_delta(b, a, f"{name}_count", by, where)
    return {k: sums.get(k, 0.0) / c for k, c in counts.items() if c > 0}


def quantile_from_histogram(before: Iterable[Sample], after: Iterable[Sample], name: str, q: float,
                            where: Matcher = None) -> float | None:
    """The ``q`` quantile of histogram ``name``'s observations between two scrapes, interpolated inside
    its bucket as Prometheus' histogram_quantile does (None: nothing observed; the highest finite
    bound when it falls in the ``+Inf`` bucket)."""
    was = grouped(before, f"{name}_bucket", ("le",), where)
    bounds = sorted((float(le), n - was.get((le,), 0.0))
                    for (le,), n in grouped(after, f"{name}_bucket", ("le",), where).items())
    if not bounds or bounds[-1][1] <= 0:
        return None
    rank, lower, below = q * bounds[-1][1], 0.0, 0.0
    for bound, cumulative in bounds:
        if cumulative >= rank:
            if math.isinf(bound):
                return lower
            inside = cumulative - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, cumulative
    return lower


def apiserver_requests(before: list[Sample], after: list[Sample], idle_rate: float, seconds: float, units: int,
                       unit: str) -> dict[str, Any]:
    """An API server's ``apiserver_request_total`` between two scrapes, per Job or per Pod (``unit``)."""
    by = counter_delta(before, after, "apiserver_request_total", ("verb", "resource", "subresource"))
    total = sum(by.values())
    net = max(0.0, total - idle_rate * seconds)
    lat = mean_from_histogram(before, after, "apiserver_request_duration_seconds", ("verb",),
                              lambda lb: lb.get("verb") not in ("WATCH", "CONNECT"))
    return {
        "total": int(total),
        f"per{unit}": round(total / units, 3),
        "serverMeanLatencyMsByVerb": {k[0]: round(v * 1000, 1) for k, v in sorted(lat.items())},
        "idleRequestsPerSecond": round(idle_rate, 2),
        f"per{unit}ExcludingIdle": round(net / units, 3),
        "byVerbResource": {" ".join(p for p in k if p): int(v) for k, v in sorted(by.items(), key=lambda kv: -kv[1])},
    }
