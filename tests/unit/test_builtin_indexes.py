"""Completion-index interval algebra (parse, format, union, membership), table-driven."""

from __future__ import annotations

import pytest

from jobapi.intervals import Intervals, count


@pytest.mark.parametrize(
    ("text", "completions", "want", "want_text"),
    [
        ("", 10, [], ""),
        (None, 10, [], ""),
        ("3", 10, [(3, 3)], "3"),
        ("1,3", 10, [(1, 1), (3, 3)], "1,3"),
        ("1,2", 10, [(1, 2)], "1,2"),
        ("1-3", 10, [(1, 3)], "1-3"),
        ("1-3,4", 10, [(1, 4)], "1-4"),
        ("0-2,5-7", 10, [(0, 2), (5, 7)], "0-2,5-7"),
        ("1-3,8-12", 10, [(1, 3), (8, 9)], "1-3,8,9"),  # cut at completions
        ("1,12,13", 10, [(1, 1)], "1"),  # stops at the first out-of-range piece
        ("x,2,y-4,5", 10, [(2, 2), (5, 5)], "2,5"),  # corrupt pieces skipped
        ("2-x,4", 10, [(4, 4)], "4"),
        ("0-9", 3, [(0, 2)], "0-2"),
    ],
)
def test_parse_and_format(text: str | None, completions: int, want: list[tuple[int, int]], want_text: str) -> None:
    got = Intervals.parse(text, completions)
    assert list(got) == want
    assert str(got) == want_text


@pytest.mark.parametrize(
    ("prev", "new", "want"),
    [
        ("", [], ""),
        ("", [0], "0"),
        ("", [1, 2, 3], "1-3"),
        ("", [1, 3, 5], "1,3,5"),
        ("0-2", [3], "0-3"),
        ("0-2", [4], "0-2,4"),
        ("3-5", [1], "1,3-5"),
        ("3-5", [2], "2-5"),
        ("1,5", [3], "1,3,5"),
        ("1,5", [2, 3, 4], "1-5"),
        ("0-9", [4], "0-9"),  # within
        ("2-3,7-8", [0, 5, 10], "0,2,3,5,7,8,10"),
        ("1", [1, 1], "1"),  # duplicates are harmless
    ],
)
def test_with_indexes(prev: str, new: list[int], want: str) -> None:
    assert str(Intervals.parse(prev, 100).with_indexes(new)) == want


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        ("", "", ""),
        ("0-2", "", "0-2"),
        ("", "4,6", "4,6"),
        ("0-2", "3-5", "0-5"),
        ("0-2,8", "4-5", "0-2,4,5,8"),
        ("0-10", "2-3", "0-10"),
        ("1,3,5", "2,4", "1-5"),
    ],
)
def test_merge(a: str, b: str, want: str) -> None:
    ia, ib = Intervals.parse(a, 100), Intervals.parse(b, 100)
    assert str(ia.merge(ib)) == want
    assert str(ib.merge(ia)) == want


@pytest.mark.parametrize(
    ("text", "index", "want"),
    [
        ("", 0, False),
        ("3-5", 2, False),
        ("3-5", 3, True),
        ("3-5", 5, True),
        ("3-5", 6, False),
        ("1,3-5,9", 9, True),
        ("1,3-5,9", 7, False),
        ("1,3-5,9", 1, True),
    ],
)
def test_has(text: str, index: int, want: bool) -> None:
    ivs = Intervals.parse(text, 100)
    assert ivs.has(index) is want
    assert (index in ivs) is want


@pytest.mark.parametrize(("text", "total"), [("", 0), ("0", 1), ("0-9", 10), ("1,3-5,7", 5)])
def test_total_and_count(text: str, total: int) -> None:
    assert Intervals.parse(text, 100).total() == total
    assert count(text, 100) == total
    assert count(None, 100) == 0


def test_of_and_iteration() -> None:
    ivs = Intervals.of([5, 1, 2, 3, 9, 2])
    assert str(ivs) == "1-3,5,9"
    assert list(ivs.indexes()) == [1, 2, 3, 5, 9]
    assert len(ivs) == 3
    assert ivs == Intervals.parse("1-3,5,9", 10)
    assert not Intervals()
