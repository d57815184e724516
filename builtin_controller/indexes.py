"""Completion indexes as ordered, non-overlapping closed intervals.

``status.completedIndexes`` / ``failedIndexes`` and success-policy rules use the
compressed text form ``"1,3-5,7"``; Jobs can have 10^5 indexes, so everything here works on
intervals, never on expanded sets. The parser is lenient in the same way the upstream
controller is (corrupt pieces are skipped, indexes beyond ``completions`` are cut off),
because it reads what is already stored and must not wedge a Job on a bad value.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

Interval = tuple[int, int]


class Intervals:
    """An immutable, sorted list of disjoint ``(first, last)`` intervals."""

    __slots__ = ("_ivs",)

    def __init__(self, intervals: Iterable[Interval] = ()) -> None:
        self._ivs: tuple[Interval, ...] = tuple(intervals)

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str | None, completions: int) -> Intervals:
        """Parse the text form, keeping only indexes below ``completions``.

        Adjacent pieces (``"1,2"``) are joined. Parsing stops at the first piece whose
        start is out of range, as the stored form is ordered.
        """
        if not text:
            return cls()
        out: list[list[int]] = []
        for piece in text.split(","):
            bounds = piece.split("-")
            try:
                first = int(bounds[0], 10)
            except ValueError:
                continue
            if first >= completions:
                break
            if len(bounds) > 1:
                try:
                    last = int(bounds[1], 10)
                except ValueError:
                    continue
                last = min(last, completions - 1)
            else:
                last = first
            if out and out[-1][1] == first - 1:
                out[-1][1] = last
            else:
                out.append([first, last])
        return cls((a, b) for a, b in out)

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
