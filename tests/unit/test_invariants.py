"""testkit.invariants: the chaos verdict, as tables of recorded lives."""

from __future__ import annotations

import pytest

from mirror.naming import FINALIZER, LABEL_ORIGIN, LABEL_ORIGIN_UID
from testkit.invariants import (
    RECOVERY_GRACE,
    CopyLife,
    ManagerLife,
    MetricsLedger,
    PodLife,
    Recorder,
    active_spans,
    lost_reason,
    merge_spans,
    outcome_mismatch,
    overlaps,
    running_copy,
    verdict,
)

MB = "jobmirror.dev/controller"


def job(uid: str, *, conds: tuple[str, ...] = (), finalizer: bool = True, labels: dict[str, str] | None = None,
        status: dict[str, object] | None = None, managed_by: str = MB) -> dict[str, object]:
    st = dict(status or {})
    st["conditions"] = [{"type": c, "status": "True"} for c in conds]
    return {"metadata": {"uid": uid, "name": f"n-{uid}", "namespace": "ns", "labels": labels or {},
                         "finalizers": [FINALIZER] if finalizer else []},
            "spec": {"managedBy": managed_by}, "status": st}


def pod(uid: str, copy_uid: str, phase: str = "Running", deleting: bool = False) -> dict[str, object]:
    md: dict[str, object] = {"uid": uid, "name": f"p-{uid}", "namespace": "ns",
                             "labels": {"batch.kubernetes.io/controller-uid": copy_uid}}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": md, "status": {"phase": phase}}


@pytest.mark.parametrize(("spans", "merged"), [
    ([], []),
    ([(1, 2), (3, 4)], [(1, 2), (3, 4)]),
    ([(3, 4), (1, 3)], [(1, 4)]),
    ([(1, 5), (2, 3)], [(1, 5)]),
])
def test_merge_spans(spans: list[tuple[float, float]], merged: list[tuple[float, float]]) -> None:
    assert merge_spans(spans) == merged


def test_active_spans_open_pod_runs_to_end_and_zero_length_pods_vanish() -> None:
    pods = [PodLife("a", "w", "a", "c", 1.0, inactive=2.0), PodLife("b", "w", "b", "c", 5.0),
            PodLife("z", "w", "z", "c", 3.0, inactive=3.0)]
    assert active_spans(pods, end=9.0) == [(1.0, 2.0), (5.0, 9.0)]


@pytest.mark.parametrize(("a", "b", "faults", "expect"), [
    ([(0, 5)], [(5, 9)], [], []),  # back to back: no overlap
    ([(0, 5)], [(4, 9)], [], [(4, 5, False)]),  # overlap outside any fault: after recovery
    ([(0, 5)], [(4, 9)], [(3, 4.5)], [(4, 5, True)]),  # began inside the fault window
    ([(0, 5)], [(4, 9)], [(4.5, 6)], [(4, 5, False)]),  # began before the fault: not excused
    ([(0, 2), (6, 8)], [(1, 7)], [], [(1, 2, False), (6, 7, False)]),
])
def test_overlaps(a: list[tuple[float, float]], b: list[tuple[float, float]], faults: list[tuple[float, float]],
                  expect: list[tuple[float, float, bool]]) -> None:
    got = overlaps("m", {"ca": a, "cb": b}, faults)
    assert [(o.start, o.end, o.during_fault) for o in got] == expect


def _copy(uid: str, *, seen: float = 0.0, gone: float | None = None, decided: float | None = None,
          outcome: str | None = None, status: dict[str, object] | None = None) -> CopyLife:
    return CopyLife(uid, "w", uid, "m", "o", seen, gone=gone, status=status or {}, decided_at=decided, outcome=outcome)


def _released(check: str | None) -> ManagerLife:
    return ManagerLife("m", "mgr", "ns/j", 0.0, terminal="Complete", terminal_at=5.0, had_finalizer=True,
                       released_at=6.0, release_check=check)


@pytest.mark.parametrize(("mgr", "reason"), [
    (ManagerLife("m", "mgr", "ns/j", 0.0), "never reached Complete/Failed"),
    (_released(""), None),
    (_released(None), None),  # not checked (yet): nothing proves a copy ran
    (_released("w1/ns/j"), "still ran"),  # the live read found an unfinished copy after the release
    (_released("unreachable: w1/ns/j (0)"), None),  # left to GC by design; the orphan check judges that
    # deleted by its user before finishing: not lost (nobody waits for it)
    (ManagerLife("m", "mgr", "ns/j", 0.0, deleted_at=3.0), None),
])
def test_lost_reason(mgr: ManagerLife, reason: str | None) -> None:
    got = lost_reason(mgr)
    assert (got is None) if reason is None else (got is not None and reason in got)


@pytest.mark.parametrize(("obj", "running"), [
    (None, False),
    (job("c"), True),
    (job("c", conds=("Failed",)), False),
    ({**job("c"), "metadata": {"uid": "c", "deletionTimestamp": "2026-01-01T00:00:00Z"}}, False),
])
def test_running_copy(obj: dict[str, object] | None, running: bool) -> None:
    assert running_copy(obj) is running


def _mgr(terminal: str, status: dict[str, object]) -> ManagerLife:
    return ManagerLife("m", "mgr", "ns/j", 0.0, terminal=terminal, terminal_at=9.0, status=status)


@pytest.mark.parametrize(("mgr", "copies", "bad"), [
    (_mgr("Complete", {"succeeded": 1}), [_copy("c", decided=5, outcome="Complete", status={"succeeded": 1})], None),
    (_mgr("Failed", {"failed": 2}), [_copy("c", decided=5, outcome="Complete", status={"succeeded": 1})],
     "deciding copy"),
    (_mgr("Complete", {"succeeded": 1}), [], "no copy ever decided"),
    # counters may be the max over runs, never beyond what any copy reported
    (_mgr("Complete", {"succeeded": 1, "failed": 2}),
     [_copy("a", status={"failed": 2}), _copy("b", decided=5, outcome="Complete", status={"succeeded": 1})], None),
    (_mgr("Complete", {"succeeded": 3}), [_copy("c", decided=5, outcome="Complete", status={"succeeded": 1})],
     "succeeded=3"),
    (_mgr("Complete", {"succeeded": 0}), [_copy("c", decided=5, outcome="Complete", status={"succeeded": 1})],
     "succeeded=0"),
    (_mgr("Complete", {"succeeded": 3, "completedIndexes": "0-1"}),
     [_copy("c", decided=5, outcome="Complete", status={"succeeded": 3, "completedIndexes": "0-2"})],
     "completedIndexes"),
    # decided while its last pod was uncounted, then gone: the mirror counts that pod
    (_mgr("Complete", {"succeeded": 1}),
     [_copy("c", decided=5, outcome="Complete", status={"uncountedTerminatedPods": {"succeeded": ["p"]}})], None),
    (_mgr("Complete", {"succeeded": 2}),
     [_copy("c", decided=5, outcome="Complete", status={"uncountedTerminatedPods": {"succeeded": ["p", "p"]}})],
     "succeeded=2"),
    # the first copy decided; a later copy's different outcome does not count
    (_mgr("Complete", {"succeeded": 1, "failed": 1}),
     [_copy("a", decided=5, outcome="Complete", status={"succeeded": 1}),
      _copy("b", decided=7, outcome="Failed", status={"failed": 1})], None),
])
def test_outcome_mismatch(mgr: ManagerLife, copies: list[CopyLife], bad: str | None) -> None:
    got = outcome_mismatch(mgr, copies)
    assert (got is None) if bad is None else (got is not None and bad in got)


def test_a_stale_copy_left_running_after_recovery_counts_even_if_made_before_the_fault_ended() -> None:
    rec = Recorder(managed_by=MB, origins={"o"})
    ours = {LABEL_ORIGIN: "o", LABEL_ORIGIN_UID: "m1"}
    rec.on_manager("mgr", "ADDED", job("m1"), 0.0)
    rec.on_copy("w1", "ADDED", job("c1", labels=ours), 1.0)
    rec.on_pod("w1", "ADDED", pod("p1", "c1"), 1.1)
    rec.on_copy("w2", "ADDED", job("c2", labels=ours), 4.9)  # moved just before the worker came back at 5
    rec.on_pod("w2", "ADDED", pod("p2", "c2"), 5.2)
    forced = [(2.0, 5.0)]
    rec.on_pod("w1", "DELETED", pod("p1", "c1"), 5.5)  # the stale copy's pod stopped at once
    assert verdict(rec, faults=forced, end=20.0).duplicates_after_recovery == []
    late = Recorder(managed_by=MB, origins={"o"})
    late.on_manager("mgr", "ADDED", job("m1"), 0.0)
    late.on_copy("w1", "ADDED", job("c1", labels=ours), 1.0)
    late.on_pod("w1", "ADDED", pod("p1", "c1"), 1.1)
    late.on_copy("w2", "ADDED", job("c2", labels=ours), 4.9)
    late.on_pod("w2", "ADDED", pod("p2", "c2"), 5.2)
    late.on_pod("w1", "DELETED", pod("p1", "c1"), 5.0 + RECOVERY_GRACE + 1)  # left running after recovery
    after = verdict(late, faults=forced, end=20.0).duplicates_after_recovery
    assert len(after) == 1 and "from +0.20s after the fault ended" in after[0], after


def test_recorder_and_verdict_end_to_end() -> None:
    """Events as the watches deliver them: a short-lived duplicate, a label edit, an orphan pod."""
    rec = Recorder(managed_by=MB, origins={"o"})
    ours = {LABEL_ORIGIN: "o", LABEL_ORIGIN_UID: "m1"}
    rec.on_manager("mgr", "ADDED", job("m1"), 0.0)
    rec.on_manager("mgr", "ADDED", job("x", managed_by="other"), 0.0)  # not claimed: ignored
    rec.on_copy("w1", "ADDED", job("c1", labels=ours), 1.0)
    rec.on_copy("w2", "ADDED", job("c2", labels=ours), 2.0)
    rec.on_copy("w2", "ADDED", job("foreign", labels={LABEL_ORIGIN: "else", LABEL_ORIGIN_UID: "m1"}), 2.0)
    rec.on_pod("w1", "ADDED", pod("p1", "c1"), 1.1)
    rec.on_pod("w2", "ADDED", pod("p2", "c2"), 2.1)
    rec.on_pod("w2", "MODIFIED", pod("p2", "c2", deleting=True), 2.4)  # short-lived duplicate: 0.3 s
    rec.on_pod("w2", "DELETED", pod("p2", "c2"), 2.5)
    rec.on_copy("w2", "DELETED", job("c2", labels=ours), 2.6)
    rec.on_copy("w1", "MODIFIED", job("c1", conds=("SuccessCriteriaMet",), status={"succeeded": 1}, labels=ours), 3.0)
    rec.on_pod("w1", "MODIFIED", pod("p1", "c1", phase="Succeeded"), 3.0)
    rec.on_copy("w1", "MODIFIED", job("c1", conds=("SuccessCriteriaMet", "Complete"), status={"succeeded": 1},
                                      labels=ours), 3.1)
    rec.on_manager("mgr", "MODIFIED", job("m1", conds=("SuccessCriteriaMet", "Complete"), status={"succeeded": 1}),
                   3.5)
    rec.on_copy("w1", "DELETED", job("c1", labels=ours), 4.0)
    rec.on_pod("w1", "DELETED", pod("p1", "c1", phase="Succeeded"), 4.1)
    rec.on_manager("mgr", "MODIFIED", job("m1", conds=("Complete",), finalizer=False, status={"succeeded": 1}), 4.2)
    assert set(rec.managers) == {"m1"} and set(rec.copies) == {"c1", "c2"}
    assert rec.copies["c1"].outcome == "Complete" and rec.managers["m1"].released_at == 4.2
    assert rec.lagging() == 0

    v = verdict(rec, faults=[], end=10.0)
    assert v.lost == [] and v.wrong_outcomes == [] and v.orphan_copies == []
    assert len(v.duplicates_after_recovery) == 1 and "0.30s" in v.duplicates_after_recovery[0]
    assert not v.ok
    assert len(verdict(rec, faults=[(1.9, 2.2)], end=10.0).duplicates_during_fault) == 1
    after = verdict(rec, faults=[(0.5, 1.5)], end=10.0).duplicates_after_recovery
    assert len(after) == 1 and "from +0.60s after the fault ended" in after[0], after
    assert "ending +1.10s" in after[0]  # the younger copy began to go 1.1 s after the fault

    # both copies made before the fault ended (c2 at 2.0: a move the fault forced), the overlap over at
    # once after it: the fault's doing; a fault that ended before c2 was made leaves it to recovery
    assert len(verdict(rec, faults=[(0.5, 2.05)], end=10.0).duplicates_during_fault) == 1
    assert verdict(rec, faults=[(0.5, 2.05)], end=10.0).duplicates_after_recovery == []
    assert len(verdict(rec, faults=[(0.5, 1.95)], end=10.0).duplicates_after_recovery) == 1

    rec.on_pod("w1", "ADDED", pod("p9", "c1", phase="Succeeded"), 5.0)  # a pod of ours nobody removed
    v = verdict(rec, faults=[(1.9, 2.2)], end=10.0)
    assert v.orphan_pods == ["w1/ns/p-p9"] and not v.ok


def test_lagging_counts_unfinished_managers_without_live_copy_or_with_a_finished_one() -> None:
    rec = Recorder(managed_by=MB, origins={"o"})
    rec.on_manager("mgr", "ADDED", job("m1"), 0.0)
    assert rec.lagging() == 1  # not dispatched yet
    rec.on_copy("w1", "ADDED", job("c1", labels={LABEL_ORIGIN: "o", LABEL_ORIGIN_UID: "m1"}), 1.0)
    assert rec.lagging() == 0
    rec.on_copy("w1", "MODIFIED", job("c1", conds=("Complete",)), 2.0)
    assert rec.lagging() == 1  # the copy finished, the manager has not caught up


def test_metrics_ledger_sums_processes_and_keeps_a_killed_ones_last_scrape() -> None:
    led = MetricsLedger()
    led.record("a:1", 1, {"Conflict": 2})
    led.record("a:2", 0, {"Conflict": 1, "ApiError": 3})
    led.record("a:1", 0, {"Conflict": 2})  # a counter never goes down within one process
    assert led.rejected_total() == 1
    assert led.errors_by_reason() == {"ApiError": 3, "Conflict": 3}


def test_a_copy_whose_origin_labels_were_removed_by_hand_is_disowned_not_orphaned() -> None:
    """Like a pod relabelled out of its ReplicaSet: from the edit on it is not ours to clean up or count."""
    rec = Recorder(managed_by=MB, origins={"o"})
    ours = {LABEL_ORIGIN: "o", LABEL_ORIGIN_UID: "m1"}
    rec.on_manager("mgr", "ADDED", job("m1", conds=("Complete",), finalizer=False, status={"succeeded": 1}), 0.0)
    rec.on_copy("w1", "ADDED", job("c1", labels=ours), 1.0)
    rec.on_pod("w1", "ADDED", pod("p1", "c1"), 1.1)
    rec.on_copy("w1", "MODIFIED", job("c1", labels={}), 2.0)  # still known by uid, now disowned
    rec.on_copy("w2", "ADDED", job("c2", labels=ours), 2.5)
    rec.on_pod("w2", "ADDED", pod("p2", "c2"), 2.6)
    rec.on_copy("w2", "MODIFIED", job("c2", conds=("Complete",), labels=ours, status={"succeeded": 1}), 3.0)
    rec.on_pod("w2", "MODIFIED", pod("p2", "c2", phase="Succeeded"), 3.0)
    rec.on_copy("w2", "DELETED", job("c2", labels=ours), 3.5)
    rec.on_pod("w2", "DELETED", pod("p2", "c2"), 3.6)
    assert rec.copies["c1"].disowned_at == 2.0
    v = verdict(rec, faults=[], end=10.0)
    assert v.disowned == ["w1/ns/n-c1"]
    assert v.orphan_copies == [] and v.orphan_pods == [] and v.duplicates_after_recovery == []
    assert v.ok
