"""Indexed Job interval strings ("1,3-5,7") as used by completedIndexes and failedIndexes.

Worker statuses are read leniently: a remote written by another Kubernetes version, or a Job
whose completions were just scaled down, may carry fragments the manager's API server would
reject. The translator keeps the parts that are valid and drops the rest, so the manager never
inherits a malformed string.
"""

from __future__ import annotations

from collections.abc import Iterable


def parse_indexes(text: object, limit: int | None = None) -> set[int]:
    """Every index named in ``text`` that is a valid, non-negative integer below ``limit``.

    Bad fragments are skipped rather than failing the whole string: progress recorded in the
    good fragments is still real progress.
    """
    if not isinstance(text, str) or not text:
        return set()
    out: set[int] = set()
    for fragment in text.split(","):
        parts = fragment.split("-")
        if len(parts) > 2 or not all(_is_decimal(p) for p in parts):
            continue
        first = int(parts[0])
        last = int(parts[-1])
        if last < first:
            continue
        if limit is not None:
            if first >= limit:
                continue
            last = min(last, limit - 1)
        out.update(range(first, last + 1))
    return out


def format_indexes(indexes: Iterable[int]) -> str:
    """The canonical interval string the upstream Job controller writes.

    Runs of three or more become ``a-b``; a pair stays ``a,b``. Matching upstream keeps the
    manager's value byte-identical to what a built-in controller would have written, so
    clients comparing strings see no spurious change.
    """
    ordered = sorted(set(indexes))
    pieces: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        first, last = ordered[i], ordered[j]
        if first == last:
            pieces.append(str(first))
        elif last == first + 1:
            pieces.extend((str(first), str(last)))
        else:
            pieces.append(f"{first}-{last}")
        i = j + 1
    return ",".join(pieces)


def _is_decimal(text: str) -> bool:
    # str.isdigit accepts non-ASCII digits ("²") that Go's strconv.Atoi rejects.
    return bool(text) and text.isascii() and text.isdigit()
