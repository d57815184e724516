"""Table tests for mirror/placement.py: LeastLoaded (the default), RoundRobin, policy_for."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from mirror.config import PlacementPolicy as PolicyName
from mirror.placement import LeastLoaded, NoWorker, RoundRobin, WorkerView, policy_for


def w(name: str, unfinished: int = 0, healthy: bool = True) -> WorkerView:
    return WorkerView(name=name, healthy=healthy, unfinished=unfinished, labels={})


@pytest.mark.parametrize(
    ("workers", "pinned", "expected"),
    [
        ([w("worker-1", 3), w("worker-2", 1)], None, "worker-2"),
        ([w("worker-1", 0), w("worker-2", 5)], None, "worker-1"),
        ([w("worker-2", 2), w("worker-1", 2)], None, "worker-1"),
        ([w("b", 0), w("c", 0), w("a", 0)], None, "a"),
        ([w("worker-1", 0, healthy=False), w("worker-2", 50)], None, "worker-2"),
        ([w("a", 1, healthy=False), w("b", 9), w("c", 4)], None, "c"),
        ([w("worker-1", 0), w("worker-2", 100)], "worker-2", "worker-2"),
        ([w("only", 7)], None, "only"),
        ([w("worker-1", 1), w("worker-2", 0)], "", "worker-2"),
    ],
    ids=["fewest-unfinished", "fewest-unfinished-first", "tie-by-name", "tie-by-name-unsorted-input",
         "skips-unhealthy-even-if-empty", "skips-unhealthy-picks-least", "pinned-beats-load", "single-worker",
         "empty-pin-means-none"],
)
def test_least_loaded_chooses(workers: Sequence[WorkerView], pinned: str | None, expected: str) -> None:
    assert LeastLoaded().choose(workers, pinned) == expected


@pytest.mark.parametrize("policy", [LeastLoaded, RoundRobin], ids=["LeastLoaded", "RoundRobin"])
@pytest.mark.parametrize(
    ("workers", "pinned", "reason"),
    [
        ([w("worker-1", healthy=False), w("worker-2", healthy=False)], None, "no healthy worker"),
        ([], None, "no healthy worker"),
        ([w("worker-1"), w("worker-2", healthy=False)], "worker-2", "'worker-2' is not healthy"),
        ([w("worker-1"), w("worker-2")], "worker-9", "'worker-9' is not configured"),
    ],
    ids=["all-unhealthy", "no-workers", "pinned-unhealthy", "pinned-unknown"],
)
def test_no_worker(policy: type[LeastLoaded] | type[RoundRobin], workers: Sequence[WorkerView],
                   pinned: str | None, reason: str) -> None:
    with pytest.raises(NoWorker, match=reason):
        policy().choose(workers, pinned)


def test_least_loaded_spreads_a_burst_when_load_is_counted() -> None:
    """Fed back its own choices (as the reconciler does with pending dispatches), it balances."""
    load = {"worker-1": 4, "worker-2": 0, "worker-3": 1}
    policy = LeastLoaded()
    for _ in range(7):
        chosen = policy.choose([w(n, c) for n, c in load.items()], None)
        assert chosen is not None
        load[chosen] += 1
    assert load == {"worker-1": 4, "worker-2": 4, "worker-3": 4}


@pytest.mark.parametrize(
    ("workers", "expected"),
    [
        ([w("b"), w("a"), w("c")], ["a", "b", "c", "a", "b", "c", "a"]),
        ([w("a", 100), w("b", 0)], ["a", "b", "a", "b", "a", "b", "a"]),
        ([w("a"), w("b", healthy=False), w("c")], ["a", "c", "a", "c", "a", "c", "a"]),
    ],
    ids=["cycles-in-name-order", "ignores-load", "skips-unhealthy"],
)
def test_round_robin_sequence(workers: Sequence[WorkerView], expected: list[str]) -> None:
    rr = RoundRobin()
    assert [rr.choose(workers, None) for _ in expected] == expected


def test_round_robin_honours_pin_and_keeps_cycling() -> None:
    rr = RoundRobin()
    ws = [w("a"), w("b")]
    assert [rr.choose(ws, "b") for _ in range(3)] == ["b", "b", "b"]
    assert rr.choose(ws, None) in {"a", "b"}


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("LeastLoaded", LeastLoaded),
        ("RoundRobin", RoundRobin),
        (PolicyName.LEAST_LOADED, LeastLoaded),
        (PolicyName.ROUND_ROBIN, RoundRobin),
        ("", LeastLoaded),
    ],
    ids=["least-loaded", "round-robin", "enum-least-loaded", "enum-round-robin", "default"],
)
def test_policy_for(name: str, cls: type) -> None:
    assert isinstance(policy_for(name), cls)


def test_policy_for_gives_independent_round_robin_state() -> None:
    ws = [w("a"), w("b")]
    p1, p2 = policy_for("RoundRobin"), policy_for("RoundRobin")
    assert p1.choose(ws, None) == "a"
    assert p2.choose(ws, None) == "a"
