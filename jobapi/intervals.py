"""Completion indexes as ordered, non-overlapping closed intervals.

``status.completedIndexes`` / ``failedIndexes`` and success-policy rules use the
compressed text form ``"1,3-5,7"``; an Indexed Job can have millions of completions, so
everything here works on intervals and never expands them into a set of every index.

Two parsers, different on purpose:

* :meth:`Intervals.parse` reads a value the way the upstream Job controller reads its own
  stored value (ordered pieces, stop at the first piece beyond ``completions``, corrupt
  pieces skipped): the builtin controller must reach kube-controller-manager's result;
* :meth:`Intervals.parse_lenient` reads a value some *other* writer produced (the mirror
  reading a worker of any version): pieces in any order, anything the API server's
  validation would reject dropped, the valid rest kept, so progress is never lost and a
  malformed string is never passed on.

Both read numbers as Go's ``strconv.Atoi`` does (``"1_0"`` is not 10).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from jobapi.names import atoi

Interval = tuple[int, int]


class Intervals:
    """An immutable, sorted list of disjoint ``(first, last)`` intervals."""

    __slots__ = ("_ivs",)

    def __init__(self, intervals: Iterable[Interval] = ()) -> None:
        self._ivs: tuple[Interval, ...] = tuple(intervals)

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str | None, completions: int) -> Intervals:
        """Parse a stored value as the upstream controller does, keeping indexes below ``completions``.

        Adjacent pieces (``"1,2"``) are joined. Parsing stops at the first piece whose
        start is out of range, as the stored form is ordered.
        """
        if not text:
            return cls()
        out: list[list[int]] = []
        for piece in text.split(","):
            bounds = piece.split("-")
            first = atoi(bounds[0])
            if first is None:
                continue
            if first >= completions:
                break
            if len(bounds) > 1:
                parsed_last = atoi(bounds[1])
                if parsed_last is None:
                    continue
                last = min(parsed_last, completions - 1)
            else:
                last = first
            if out and out[-1][1] == first - 1:
                out[-1][1] = last
            else:
                out.append([first, last])
        return cls((a, b) for a, b in out)

    @classmethod
    def parse_lenient(cls, text: object, limit: int | None = None) -> Intervals:
        """Every valid piece of a value from another writer, in any order, below ``limit``.

        A piece is kept when it is ``a`` or ``a-b`` with non-negative decimals and ``a <= b``;
        anything else is skipped rather than failing the whole string, because progress
        recorded in the good pieces is still real progress. Pieces starting at or beyond
        ``limit`` are dropped, the others cut at ``limit - 1``. Overlaps are merged.
        """
        if not isinstance(text, str) or not text:
            return cls()
        pieces: list[Interval] = []
        for piece in text.split(","):
            bounds = piece.split("-")
            if len(bounds) > 2 or not all(b[:1].isdigit() for b in bounds):
                continue  # also refuses a sign, which Atoi would take but the text form never has
            first, last = atoi(bounds[0]), atoi(bounds[-1])
            if first is None or last is None or last < first:
                continue
            if limit is not None:
                if first >= limit:
                    continue
                last = min(last, limit - 1)
            pieces.append((first, last))
        pieces.sort()
        return cls().merge(cls(pieces))

    @classmethod
    def of(cls, indexes: Iterable[int]) -> Intervals:
        return cls().with_indexes(sorted(set(indexes)))

    # -- algebra ----------------------------------------------------------------------------

    def merge(self, other: Intervals) -> Intervals:
        """Union of two interval lists (both already ordered)."""
        result: list[list[int]] = []

        def push(iv: Interval) -> None:
            if not result or iv[0] > result[-1][1] + 1:
                result.append([iv[0], iv[1]])
            elif result[-1][1] < iv[1]:
                result[-1][1] = iv[1]

        a, b = self._ivs, other._ivs
        i = j = 0
        while i < len(a) and j < len(b):
            if a[i][0] < b[j][0]:
                push(a[i])
                i += 1
            else:
                push(b[j])
                j += 1
        for iv in a[i:]:
            push(iv)
        for iv in b[j:]:
            push(iv)
        return Intervals((x, y) for x, y in result)

    def __or__(self, other: Intervals) -> Intervals:
        return self.merge(other)

    def __sub__(self, other: Intervals) -> Intervals:
        """The indexes in ``self`` that are not in ``other``."""
        result: list[Interval] = []
        theirs = other._ivs
        j = 0
        for first, last in self._ivs:
            while j < len(theirs) and theirs[j][1] < first:
                j += 1
            k = j
            start = first
            while k < len(theirs) and theirs[k][0] <= last:
                if theirs[k][0] > start:
                    result.append((start, theirs[k][0] - 1))
                start = max(start, theirs[k][1] + 1)
                k += 1
            if start <= last:
                result.append((start, last))
        return Intervals(result)

    def with_indexes(self, ordered: Iterable[int]) -> Intervals:
        """Union with single indexes given in increasing order."""
        return self.merge(Intervals((i, i) for i in ordered))

    def total(self) -> int:
        return sum(last - first + 1 for first, last in self._ivs)

    def has(self, index: int) -> bool:
        pos = bisect.bisect_left(self._ivs, index, key=lambda iv: iv[1])
        return pos < len(self._ivs) and self._ivs[pos][0] <= index

    def __contains__(self, index: object) -> bool:
        return isinstance(index, int) and self.has(index)

    def indexes(self) -> Iterator[int]:
        for first, last in self._ivs:
            yield from range(first, last + 1)

    # -- presentation -----------------------------------------------------------------------

    def __str__(self) -> str:
        parts = []
        for first, last in self._ivs:
            if last == first:
                parts.append(str(first))
            elif last == first + 1:
                parts.append(f"{first},{last}")
            else:
                parts.append(f"{first}-{last}")
        return ",".join(parts)

    def __repr__(self) -> str:
        return f"Intervals({list(self._ivs)!r})"

    def __iter__(self) -> Iterator[Interval]:
        return iter(self._ivs)

    def __len__(self) -> int:
        return len(self._ivs)

    def __bool__(self) -> bool:
        return bool(self._ivs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Intervals) and self._ivs == other._ivs

    def __hash__(self) -> int:
        return hash(self._ivs)


def count(text: str | None, completions: int) -> int:
    """How many indexes a stored interval string names (0 for ``None``)."""
    return Intervals.parse(text, completions).total() if text is not None else 0
