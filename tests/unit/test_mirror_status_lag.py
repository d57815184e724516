"""The status-propagation clock behind ``jobmirror_status_propagation_seconds``."""

from __future__ import annotations

import pytest

from kruntime.resources import Obj
from mirror.status_lag import StatusLag, event_hold, interim_hold, status_changed

RUNNING: Obj = {"metadata": {"name": "c"}, "status": {"active": 1}}
DONE: Obj = {"metadata": {"name": "c"}, "status": {"succeeded": 1}}
NO_STATUS: Obj = {"metadata": {"name": "c"}}


@pytest.mark.parametrize(("old", "new", "changed"), [
    (None, NO_STATUS, True),  # first sight (a new copy, or the cache's initial list)
    (None, RUNNING, True),
    (RUNNING, RUNNING, False),  # a spec or metadata update: nothing to mirror
    (RUNNING, DONE, True),
    (NO_STATUS, {"metadata": {}, "status": {}}, False),  # an empty status is no status
    (NO_STATUS, RUNNING, True),
])
def test_status_changed(old: Obj | None, new: Obj, changed: bool) -> None:
    assert status_changed(old, new) is changed


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_wait_runs_from_the_oldest_unmirrored_change() -> None:
    clock = Clock()
    lag = StatusLag(10, clock=clock)
    lag.changed("u1", "worker-1")
    clock.t += 2
    lag.changed("u1", "worker-1")  # a second change while the first waits: the clock keeps running
    clock.t += 1.5
    assert lag.mirrored("u1") == ("worker-1", 3.5)
    assert lag.mirrored("u1") is None  # nothing waits any more: a later write observes nothing
    assert len(lag) == 0


def test_forget_ends_a_wait_without_an_observation() -> None:
    lag = StatusLag(10, clock=Clock())
    lag.changed("u1", "worker-2")
    lag.forget("u1")
    assert lag.mirrored("u1") is None


def test_bounded_oldest_dropped_first() -> None:
    clock = Clock()
    lag = StatusLag(2, clock=clock)
    for uid in ("a", "b", "c"):
        lag.changed(uid, "w")
        clock.t += 1
    assert len(lag) == 2
    assert lag.mirrored("a") is None
    assert lag.mirrored("c") == ("w", 1.0)


def test_a_clock_that_goes_backwards_never_gives_a_negative_wait() -> None:
    clock = Clock()
    lag = StatusLag(10, clock=clock)
    lag.changed("u", "w")
    clock.t -= 5
    assert lag.mirrored("u") == ("w", 0.0)


RUN: Obj = {"active": 1, "startTime": "t"}
SUSPENDED: Obj = {"conditions": [{"type": "Suspended", "status": "True"}]}
MET: Obj = {"active": 1, "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}


@pytest.mark.parametrize(("stored", "desired", "pending_for", "period", "hold"), [
    ({}, RUN, 0.25, 1.0, 0.75),  # counters only: wait for the rest of the batch period
    (RUN, {**RUN, "ready": 1}, 0.0, 1.0, 1.0),
    (RUN, {**RUN, "ready": 1}, 1.0, 1.0, 0.0),  # due
    (RUN, {**RUN, "ready": 1}, 7.0, 1.0, 0.0),  # overdue: never negative
    (RUN, {**RUN, "ready": 1}, None, 1.0, 0.0),  # undated (after a restart): written at once
    (RUN, {**RUN, "ready": 1}, 0.1, 0.0, 0.0),  # batching off
    (RUN, MET, 0.0, 1.0, 0.0),  # a condition appears: the outcome is never delayed
    (MET, RUN, 0.0, 1.0, 0.0),  # a condition goes (a re-admitted copy)
    (RUN, SUSPENDED, 0.0, 1.0, 0.0),
    ({**SUSPENDED, "active": 1}, SUSPENDED, 0.0, 1.0, 1.0),  # the same conditions, fewer pods: counters
    ({"conditions": [{"type": "Suspended", "status": "False"}]}, SUSPENDED, 0.0, 1.0, 0.0),  # status flips
])
def test_interim_hold(stored: Obj, desired: Obj, pending_for: float | None, period: float, hold: float) -> None:
    assert interim_hold(stored, desired, pending_for=pending_for, period=period) == pytest.approx(hold)


def test_pending_for_dates_the_oldest_unmirrored_change() -> None:
    clock = Clock()
    lag = StatusLag(10, clock=clock)
    assert lag.pending_for("u1") is None
    lag.changed("u1", "worker-1")
    clock.t += 0.4
    lag.changed("u1", "worker-1")
    clock.t += 0.2
    assert lag.pending_for("u1") == pytest.approx(0.6)
    lag.mirrored("u1")
    assert lag.pending_for("u1") is None


RUN = {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}


@pytest.mark.parametrize(
    ("old", "new", "pending", "period", "hold"),
    [
        ({"status": {"active": 1}}, {"status": {"active": 2}}, False, 1.0, 1.0),  # counters only: one pass, later
        (None, {"status": {"active": 1}}, False, 1.0, 0.0),  # first seen: at once
        ({"status": {"active": 1}}, {"status": {"active": 1, **RUN}}, False, 1.0, 0.0),  # a condition: at once
        ({"status": {"active": 1}}, {"status": {"active": 2}}, True, 1.0, 0.0),  # a hold is under way already
        ({"status": {"active": 1}}, {"status": {"active": 2}}, False, 0.0, 0.0),  # batching off
        ({"status": {"active": 1}}, {"status": {"active": 1}}, False, 1.0, 0.0),  # no status change
    ],
    ids=["counters", "first", "condition", "pending", "off", "unchanged"],
)
def test_event_hold(old: Obj | None, new: Obj, pending: bool, period: float, hold: float) -> None:
    assert event_hold(old, new, pending=pending, period=period) == hold
