"""The unhealthy-worker rule and the cleanup rule, as tables (mirror/decisions.py)."""

from __future__ import annotations

import pytest

from mirror.decisions import Cleanup, Lost, LostStep, WorkerState, lost_worker, plan_cleanup

TIMEOUT = 900.0


@pytest.mark.parametrize(
    ("configured", "never_sent", "down_for", "decided", "said", "want"),
    [
        (True, True, 1.0, False, False, Lost(LostStep.MOVE_NOW)),
        (True, True, 5000.0, True, False, Lost(LostStep.MOVE_NOW)),  # nothing there: no outcome to wait for
        (True, False, 10.0, False, False, Lost(LostStep.WAIT, recheck_in=30.0)),
        (True, False, 890.0, False, False, Lost(LostStep.WAIT, recheck_in=10.5)),
        (True, False, 900.0, False, False, Lost(LostStep.MOVE)),
        (True, False, 900.0, True, False, Lost(LostStep.FINISH_DECIDED)),
        (False, True, 10.0, False, False, Lost(LostStep.WAIT, recheck_in=30.0, say_unconfigured=True)),
        (False, True, 10.0, False, True, Lost(LostStep.WAIT, recheck_in=30.0)),  # said once
        (False, False, 901.0, False, True, Lost(LostStep.MOVE)),
        (False, False, 901.0, True, True, Lost(LostStep.FINISH_DECIDED)),
    ],
    ids=["never-sent", "never-sent-decided", "wait", "wait-until-timeout", "move", "finish-decided",
         "unconfigured-said", "unconfigured-quiet", "unconfigured-move", "unconfigured-finish"],
)
def test_lost_worker(configured: bool, never_sent: bool, down_for: float, decided: bool, said: bool,
                     want: Lost) -> None:
    assert lost_worker(configured=configured, never_sent=never_sent, down_for=down_for, worker_lost_timeout=TIMEOUT,
                       decided=decided, resync=30.0, unconfigured_said=said) == want


UP = WorkerState(healthy=True)
DOWN = WorkerState(healthy=False, unhealthy_for=60.0)
LOST = WorkerState(healthy=False, unhealthy_for=TIMEOUT + 1)
SENT = WorkerState(healthy=True, attempted=True)
UNSYNCED = WorkerState(healthy=True, synced=False)


@pytest.mark.parametrize(
    ("copies", "placed", "workers", "deleted", "want"),
    [
        (["w1"], "w1", {"w1": UP}, False, Cleanup(delete=("w1",))),
        (["w1", "w2"], "w1", {"w1": UP, "w2": UP}, False, Cleanup(delete=("w1", "w2"))),
        ([], "w1", {"w1": UP}, False, Cleanup()),  # synced cache, never sent: nothing there
        ([], "w1", {"w1": SENT}, False, Cleanup(confirm=("w1",))),  # the cache may lag our create
        ([], "w1", {"w1": UNSYNCED}, True, Cleanup(confirm=("w1",))),
        ([], "w1", {"w1": WorkerState(healthy=False, unhealthy_for=5.0, attempted=True)}, False,
         Cleanup(blocked=True)),
        (["w1"], "w1", {"w1": DOWN}, True, Cleanup(delete=("w1",))),  # waits (the delete fails) until the timeout
        (["w1"], "w1", {"w1": LOST}, True, Cleanup(left_for_gc=("w1",))),
        (["w1"], "w1", {"w1": LOST}, False, Cleanup(delete=("w1",))),  # a finished Job waits for every worker
        ([], "w1", {"w1": WorkerState(healthy=False, unhealthy_for=TIMEOUT, attempted=True)}, True,
         Cleanup(left_for_gc=("w1",))),
        ([], "gone", {"w1": UP}, True, Cleanup()),  # placed on an unconfigured worker: nothing to ask
        # moved off w1 after a create there whose answer was lost: w1 may hold a copy its cache never showed
        (["w2"], "w2", {"w1": SENT, "w2": UP}, False, Cleanup(delete=("w2",), confirm=("w1",))),
        (["w2"], "w2", {"w1": WorkerState(healthy=False, unhealthy_for=60.0, attempted=True), "w2": UP}, False,
         Cleanup(delete=("w2",), blocked=True)),
        (["w2"], "w2", {"w1": WorkerState(healthy=False, unhealthy_for=TIMEOUT + 1, attempted=True), "w2": UP},
         True, Cleanup(delete=("w2",), left_for_gc=("w1",))),
        (["w2"], "w2", {"w1": UP, "w2": UP}, False, Cleanup(delete=("w2",))),  # never sent to w1: not asked
        ([], "w2", {"w1": UNSYNCED, "w2": UP}, False, Cleanup()),  # unsynced, never sent: only the placed one is
    ],
    ids=["finished", "stale-copy-too", "nothing", "confirm-after-create", "confirm-unsynced", "blocked",
         "deleted-down", "deleted-lost", "finished-lost", "deleted-lost-unseen", "unconfigured",
         "moved-off-confirm", "moved-off-down-blocks", "moved-off-lost-deleted", "moved-off-never-sent",
         "other-unsynced"],
)
def test_plan_cleanup(copies: list[str], placed: str | None, workers: dict[str, WorkerState], deleted: bool,
                      want: Cleanup) -> None:
    assert plan_cleanup(copies, placed, workers, deleted=deleted, worker_lost_timeout=TIMEOUT) == want
