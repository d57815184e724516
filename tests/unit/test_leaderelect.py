"""Table tests for kruntime.leaderelect's pure decisions: when to write the Lease, how long a call may take."""

from __future__ import annotations

from typing import Any

import pytest

from kruntime.leaderelect import Act, Observation, Timing, call_timeout, decide, observe, taken_spec

ME = "me"
T = Timing(lease_duration=15, renew_deadline=10, retry_period=2, request_timeout=5)


def lease(holder: str | None, renew: str = "r1", duration: int = 15) -> dict[str, Any]:
    return {"spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": duration}}


@pytest.mark.parametrize(
    ("obs", "now", "expected"),
    [
        (None, 0.0, Act.CREATE),
        (Observation("", "r1", 1, 100.0), 100.0, Act.TAKE),
        (Observation(ME, "r1", 15, 100.0), 100.0, Act.TAKE),
        (Observation("other", "r1", 15, 100.0), 114.9, Act.WAIT),
        (Observation("other", "r1", 15, 100.0), 115.0, Act.TAKE),
    ],
    ids=["no-lease", "released", "ours", "other-still-valid", "other-expired-on-our-clock"],
)
def test_decide(obs: Observation | None, now: float, expected: Act) -> None:
    assert decide(obs, ME, now) is expected


@pytest.mark.parametrize(
    ("prev", "read", "since"),
    [
        (None, lease("other"), 50.0),
        (Observation("other", "r1", 15, 10.0), lease("other"), 10.0),
        (Observation("other", "r1", 15, 10.0), lease("other", renew="r2"), 50.0),
        (Observation("other", "r1", 15, 10.0), lease("third"), 50.0),
    ],
    ids=["first-sight", "unchanged-keeps-clock", "renewed-restarts-clock", "new-holder-restarts-clock"],
)
def test_observe(prev: Observation | None, read: dict[str, Any], since: float) -> None:
    obs = observe(prev, read, 50.0)
    assert obs is not None and obs.since == since


def test_observe_no_lease() -> None:
    assert observe(Observation("x", "r", 1, 0), None, 5.0) is None


@pytest.mark.parametrize(
    ("now", "renewed_at", "expected"),
    [(0.0, None, 5.0), (100.0, 100.0, 5.0), (107.0, 100.0, 3.0), (110.0, 100.0, 0.0), (120.0, 100.0, 0.0)],
    ids=["follower", "fresh-leader", "near-deadline", "at-deadline", "past-deadline"],
)
def test_every_lease_call_ends_before_the_renew_deadline(now: float, renewed_at: float | None,
                                                         expected: float) -> None:
    assert call_timeout(now, renewed_at, T) == expected


@pytest.mark.parametrize(
    ("spec", "acquire", "transitions"),
    [
        ({}, "now", 0),
        ({"holderIdentity": ME, "acquireTime": "then", "leaseTransitions": 3}, "then", 3),
        ({"holderIdentity": "other", "acquireTime": "then", "leaseTransitions": 3}, "now", 4),
        ({"acquireTime": "then", "leaseTransitions": 3}, "now", 3),
    ],
    ids=["new", "renewal", "taken-over", "after-release"],
)
def test_taken_spec(spec: dict[str, Any], acquire: str, transitions: int) -> None:
    out = taken_spec(spec, ME, "now", 15)
    assert (out["holderIdentity"], out["renewTime"], out["leaseDurationSeconds"]) == (ME, "now", 15)
    assert (out["acquireTime"], out["leaseTransitions"]) == (acquire, transitions)
