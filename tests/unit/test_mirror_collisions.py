"""Table tests for the pure name-collision decisions in mirror/decisions.py."""

from __future__ import annotations

import pytest

from mirror.decisions import CollisionAction, collision_action, retry_delay


@pytest.mark.parametrize(
    ("pinned", "same_workload", "expected"),
    [
        (False, False, CollisionAction.REPLACE),
        (True, False, CollisionAction.REPORT),
        (False, True, CollisionAction.REPORT),
        (True, True, CollisionAction.REPORT),
    ],
    ids=["unpinned-foreign-moves", "pinned-stays", "own-uid-other-origin-stays", "pinned-own-uid-stays"],
)
def test_collision_action(pinned: bool, same_workload: bool, expected: CollisionAction) -> None:
    assert collision_action(pinned=pinned, same_workload=same_workload) is expected


@pytest.mark.parametrize(
    ("reports", "expected"),
    [(0, 30.0), (1, 30.0), (2, 60.0), (4, 240.0), (5, 300.0), (50, 300.0)],
    ids=["none-yet", "first", "second", "fourth", "capped", "long-after"],
)
def test_retry_delay_doubles_and_is_bounded(reports: int, expected: float) -> None:
    assert retry_delay(reports, base=30.0) == expected
