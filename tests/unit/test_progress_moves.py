"""Moves of a stuck Job, as pure tables (issue 36 item 2): bounded, with a doubling backoff, none where
every worker fails the same way, and one Warning per cause (mirror/progress.py)."""

from __future__ import annotations

import pytest

from mirror.progress import (
    Finding,
    MoveLimits,
    Phase,
    Verdict,
    avoided,
    cause_kind,
    causes_to_tell,
    decide_move,
    move_backoff,
)

LIMITS = MoveLimits(max_moves=3, backoff=60, backoff_max=300, avoid_for=300)
PULL = "container main of pod train-x7k2p: ErrImagePull: failed to pull image \"reg.example/train:9\": not found"
PULL_2 = "container main of pod train-q9z1c: ImagePullBackOff: Back-off pulling image \"reg.example/train:9\""
PULL_3 = "container main of pod train-b3c4d: ErrImagePull: rpc error: code = NotFound"
QUOTA = "FailedCreate: Error creating: pods \"train-\" is forbidden: exceeded quota: q, requested: pods=1"
SILENT = "no pod and no status from this worker's Job controller"
CONFIG = "container main of pod train-a: CreateContainerConfigError: secret \"token\" not found"
MOUNT = "pod train-a: FailedMount: MountVolume.SetUp failed for volume \"creds\": secret \"creds\" not found"


def found(worker: str, cause: str, at: float, phase: Phase = Phase.PODS_BOUND) -> Finding:
    return Finding(worker, phase, cause, at)


@pytest.mark.parametrize(("phase", "cause", "kind"), [
    (Phase.PODS_BOUND, PULL, "pods bound: ErrImagePull"),
    (Phase.PODS_BOUND, PULL_3, "pods bound: ErrImagePull"),  # another kubelet's words, the same kind
    (Phase.PODS_BOUND, PULL_2, "pods bound: ImagePullBackOff"),
    (Phase.PODS_BOUND, CONFIG, "pods bound: CreateContainerConfigError"),
    (Phase.PODS_BOUND, MOUNT, "pods bound: FailedMount"),
    (Phase.PODS_BOUND, "no container status from the kubelet of node n1", "pods bound: no container status"),
    (Phase.CREATED, QUOTA, "created: FailedCreate"),
    (Phase.CREATED, SILENT, "created: no Job controller"),
    (Phase.CREATED, "no pod from this worker's JobSet controller", "created: no JobSet controller"),
    (Phase.PODS_CREATED, "pod train-a not bound: 0/3 nodes are available: 3 Insufficient cpu.",
     "pods created: not bound"),
])
def test_a_cause_is_its_phase_and_reason_word(phase: Phase, cause: str, kind: str) -> None:
    assert cause_kind(phase, cause) == kind


@pytest.mark.parametrize(("moves", "want"), [(0, 0.0), (1, 60.0), (2, 120.0), (3, 240.0), (4, 300.0), (9, 300.0)])
def test_the_backoff_doubles_up_to_its_cap(moves: int, want: float) -> None:
    assert move_backoff(moves, LIMITS) == want


W3 = ("w1", "w2", "w3")


@pytest.mark.parametrize(("moves", "now", "new", "candidates", "pinned", "verdict", "why", "at", "avoid"), [
    # the first finding moves at once, avoiding the worker it leaves
    ([], 100, found("w1", PULL, 100), W3, False, Verdict.MOVE, "stuck in phase pods bound on w1", None, {"w1"}),
    # a pinned Job stays, whatever the cause
    ([], 100, found("w1", PULL, 100), W3, True, Verdict.STAY, "pinned to w1: it stays there", None, set()),
    # the second move waits for the backoff after the first (60 s) ...
    ([found("w1", QUOTA, 100, Phase.CREATED)], 130, found("w2", PULL, 130), W3, False, Verdict.LATER,
     "moved 1 times; the next move not before 60s after the last", 160.0, set()),
    # ... and goes when it is over, avoiding both workers left within avoid_for
    ([found("w1", QUOTA, 100, Phase.CREATED)], 170, found("w2", PULL, 170), W3, False, Verdict.MOVE,
     "stuck in phase pods bound on w2", None, {"w1", "w2"}),
    # every worker it may use failed it the same way (an image that exists nowhere): it stays
    ([found("w1", PULL, 100), found("w2", PULL_3, 200)], 900, found("w3", PULL, 900), W3, False, Verdict.STAY,
     "every worker it may use fails the same way (pods bound: ErrImagePull): it stays on w3", None, set()),
    # the same way on two of three: the third is still worth a try
    ([found("w1", PULL, 100)], 900, found("w2", PULL, 900), W3, False, Verdict.MOVE,
     "stuck in phase pods bound on w2", None, {"w1", "w2"}),  # w1 left 800 s ago, still avoided: failed so
    # different causes on every worker: not "the same way", bounded by max_moves instead
    ([found("w1", QUOTA, 0, Phase.CREATED), found("w2", CONFIG, 100), found("w3", SILENT, 400, Phase.CREATED)],
     2000, found("w1", PULL, 2000), W3, False, Verdict.STAY, "moved 3 times already (at most 3): it stays on w1",
     None, set()),
    # one worker only: moving would come back to it
    ([], 100, found("w1", PULL, 100), ("w1",), False, Verdict.STAY,
     "every worker it may use fails the same way (pods bound: ErrImagePull): it stays on w1", None, set()),
    # every other worker was left recently (for another cause): it stays rather than bounce back
    ([found("w2", QUOTA, 100, Phase.CREATED)], 200, found("w1", PULL, 200), ("w1", "w2"), False, Verdict.STAY,
     "every other worker it may use was left less than 300s ago or failed it the same way: it stays on w1", None,
     set()),
    # a worker left long ago for another cause is worth a try again
    ([found("w2", QUOTA, 100, Phase.CREATED)], 900, found("w1", PULL, 900), ("w1", "w2"), False, Verdict.MOVE,
     "stuck in phase pods bound on w1", None, {"w1"}),
], ids=["first-moves", "pinned", "backoff", "after-backoff", "same-everywhere", "same-on-some", "max-moves",
        "only-worker", "others-avoided", "left-long-ago"])
def test_a_stuck_job_moves_at_most_so_often_and_never_in_a_loop(
        moves: list[Finding], now: float, new: Finding, candidates: tuple[str, ...], pinned: bool,
        verdict: Verdict, why: str, at: float | None, avoid: set[str]) -> None:
    d = decide_move(moves, new, candidates, now, LIMITS, pinned=pinned)
    assert (d.verdict, d.why, d.at, set(d.avoid)) == (verdict, why, at, avoid)


def test_a_job_stuck_everywhere_the_same_way_moves_a_bounded_number_of_times() -> None:
    """Simulated: three workers, an image none has; the stuck check finds each copy stuck 300 s after it
    was placed. The Job moves twice (w1 -> w2 -> w3) and then stays, with one Warning in all."""
    moves: list[Finding] = []
    told: set[str] = set()
    warnings: list[str] = []
    worker, now = "w1", 0.0
    for _ in range(20):
        now += 300
        f = found(worker, PULL, now)
        for kind, message in causes_to_tell([*moves, f], told):
            told.add(kind)
            warnings.append(message)
        d = decide_move(moves, f, W3, now, LIMITS)
        if d.verdict is Verdict.STAY:
            break
        if d.verdict is Verdict.LATER:
            assert d.at is not None
            now = d.at
            d = decide_move(moves, f, W3, now, LIMITS)
        assert d.verdict is Verdict.MOVE
        moves.append(f)
        worker = next(w for w in W3 if w not in d.avoid)
    assert [m.worker for m in moves] == ["w1", "w2"] and worker == "w3"
    assert warnings == [f"stuck in phase pods bound on worker w1: {PULL}"]


def test_one_warning_per_cause_naming_every_worker_that_failed_so() -> None:
    findings = [found("w1", PULL, 0), found("w2", QUOTA, 10, Phase.CREATED), found("w3", PULL_3, 20)]
    assert causes_to_tell(findings, set()) == [
        ("pods bound: ErrImagePull", f"stuck in phase pods bound on workers w1, w3: {PULL_3}"),
        ("created: FailedCreate", f"stuck in phase created on worker w2: {QUOTA}"),
    ]
    assert causes_to_tell(findings, {"pods bound: ErrImagePull"}) == [
        ("created: FailedCreate", f"stuck in phase created on worker w2: {QUOTA}")]
    assert causes_to_tell(findings, {"pods bound: ErrImagePull", "created: FailedCreate"}) == []


def test_a_worker_left_is_avoided_for_a_while() -> None:
    moves = [found("w1", PULL, 0), found("w2", PULL, 200)]
    assert avoided(moves, 250, LIMITS) == {"w1", "w2"}
    assert avoided(moves, 350, LIMITS) == {"w2"}
    assert avoided(moves, 500, LIMITS) == set()
