"""The status-propagation clock behind ``jobmirror_status_propagation_seconds``."""

from __future__ import annotations

import pytest

from kruntime.resources import Obj
from mirror.propagation import StatusLag, status_changed

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
