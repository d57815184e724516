"""Table tests for the status translator (mirror/jobs/status_translation.py) and for the validation oracle.

Every translator case also asserts that the manager API server would accept the write
(``tests/jobstatus_validation.py``, with and without the resume exception of newer servers).
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from jobapi.conditions import condition, is_finished
from jobapi.intervals import Intervals
from jobapi.times import format_time, parse_time_seconds
from mirror.jobs.status_translation import desired_manager_status, status_differs
from tests.jobstatus_validation import validate_status_update

T0 = "2026-11-23T10:00:00Z"
T1 = "2026-11-23T10:01:00Z"
T2 = "2026-11-23T10:02:00Z"
T3 = "2026-11-23T10:03:00Z"
NOW = datetime(2026, 11, 23, 10, 10, 0, tzinfo=UTC)
NOW_S = "2026-11-23T10:10:00Z"

NONINDEXED = {"completionMode": "NonIndexed", "completions": 3, "parallelism": 3, "backoffLimit": 2}
INDEXED = {"completionMode": "Indexed", "completions": 5, "parallelism": 2, "backoffLimit": 2}
PER_INDEX = {"completionMode": "Indexed", "completions": 5, "parallelism": 2, "backoffLimitPerIndex": 1}


def cond(ctype: str, status: str = "True", reason: str = "", message: str = "", at: str = T1) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": at,
        "lastTransitionTime": at,
    }


def manager(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None, suspend: bool = False) -> dict:
    return {
        "metadata": {"name": "j", "namespace": "ns", "creationTimestamp": T0},
        "spec": {**(spec or NONINDEXED), "managedBy": "jobmirror.dev/controller", "suspend": suspend},
        "status": status or {},
    }


def remote(status: dict[str, Any], suspend: bool = False, created: str | None = T0) -> dict[str, Any]:
    meta = {"name": "j", "namespace": "ns"}
    if created:
        meta["creationTimestamp"] = created
    return {"metadata": meta, "spec": {"suspend": suspend}, "status": status}


def translate(mgr: dict[str, Any], rem: dict[str, Any] | None, now: datetime = NOW) -> dict[str, Any]:
    """Translate and insist the manager API server would accept the result."""
    before = copy.deepcopy(mgr)
    new = desired_manager_status(mgr, rem, now)
    assert mgr == before, "the translator must not mutate its input"
    for resume_exception in (True, False):
        errors = validate_status_update(mgr, mgr.get("status") or {}, new, resume_exception=resume_exception)
        assert errors == [], errors
    return new


def true_types(status: dict[str, Any]) -> list[str]:
    return [c["type"] for c in status.get("conditions", []) if c.get("status") == "True"]


def by_type(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    found = condition({"status": status}, ctype)
    assert found is not None, f"no {ctype} in {status}"
    return found


# =========================================================================== running Jobs


def test_running_worker_copies_pod_counts_and_start_time() -> None:
    rem = remote({"startTime": T1, "active": 2, "ready": 1, "terminating": 0, "succeeded": 1, "failed": 1})
    new = translate(manager(), rem)
    assert new == {"startTime": T1, "active": 2, "ready": 1, "terminating": 0, "succeeded": 1, "failed": 1}


def test_counters_never_decrease() -> None:
    mgr = manager(status={"startTime": T1, "succeeded": 2, "failed": 3, "active": 1})
    new = translate(mgr, remote({"startTime": T1, "succeeded": 1, "failed": 0, "active": 1}))
    assert (new["succeeded"], new["failed"]) == (2, 3)


def test_counters_follow_the_worker_upwards() -> None:
    mgr = manager(status={"startTime": T1, "succeeded": 1})
    new = translate(mgr, remote({"startTime": T1, "succeeded": 2, "failed": 1}))
    assert (new["succeeded"], new["failed"]) == (2, 1)


def test_active_follows_the_worker_downwards() -> None:
    mgr = manager(status={"startTime": T1, "active": 3, "ready": 3})
    new = translate(mgr, remote({"startTime": T1, "active": 1, "ready": 1}))
    assert (new["active"], new["ready"]) == (1, 1)


def test_ready_is_clamped_to_active() -> None:
    new = translate(manager(), remote({"startTime": T1, "active": 1, "ready": 3}))
    assert new["ready"] == 1


def test_junk_counters_become_zero() -> None:
    new = translate(manager(), remote({"startTime": T1, "active": -1, "succeeded": "4", "failed": True, "ready": -2}))
    assert new.get("active", 0) == 0 and new.get("succeeded", 0) == 0 and new.get("failed", 0) == 0
    assert new["ready"] == 0


def test_missing_ready_and_terminating_from_old_worker_stay_missing() -> None:
    new = translate(manager(), remote({"startTime": T1, "active": 2}))
    assert "ready" not in new and "terminating" not in new


def test_unsuspended_manager_start_time_never_changes() -> None:
    mgr = manager(status={"startTime": T1, "active": 1})
    new = translate(mgr, remote({"startTime": T2, "active": 1}))
    assert new["startTime"] == T1


def test_remote_start_time_is_normalised_to_seconds() -> None:
    new = translate(manager(), remote({"startTime": "2026-11-23T11:01:00.750+01:00"}))
    assert new["startTime"] == T1


def test_remote_none_keeps_manager_status() -> None:
    status = {
        "startTime": T1,
        "active": 2,
        "ready": 1,
        "succeeded": 1,
        "terminating": 0,
        "uncountedTerminatedPods": {"failed": ["u1"]},
        "conditions": [cond("SuccessCriteriaMet", reason="CompletionsReached")],
    }
    new = translate(manager(status=status), None)
    assert not status_differs(status, new)


def test_unknown_remote_fields_are_not_copied_unknown_manager_fields_are_kept() -> None:
    mgr = manager(status={"startTime": T1, "fromAManagerSideWriter": {"x": 1}})
    new = translate(mgr, remote({"startTime": T1, "someFutureField": 7}))
    assert "someFutureField" not in new
    assert new["fromAManagerSideWriter"] == {"x": 1}


def test_uncounted_pods_are_copied_and_sanitised() -> None:
    rem = remote(
        {"startTime": T1, "uncountedTerminatedPods": {"succeeded": ["a", "", "b", "a"], "failed": ["b", "c", 3]}}
    )
    new = translate(manager(), rem)
    assert new["uncountedTerminatedPods"] == {"succeeded": ["a", "b"], "failed": ["c"]}


def test_empty_uncounted_struct_is_kept_as_a_pointer() -> None:
    new = translate(manager(), remote({"startTime": T1, "uncountedTerminatedPods": {}}))
    assert new["uncountedTerminatedPods"] == {}


def test_uncounted_of_wrong_type_is_dropped() -> None:
    new = translate(manager(), remote({"startTime": T1, "uncountedTerminatedPods": ["a"]}))
    assert "uncountedTerminatedPods" not in new


def test_stray_completion_time_on_running_manager_is_dropped() -> None:
    mgr = manager(status={"startTime": T1, "completionTime": T2, "active": 1})
    new = translate(mgr, remote({"startTime": T1, "active": 1}))
    assert "completionTime" not in new


# =========================================================================== indexes


def test_indexed_completed_indexes_follow_the_visible_run_filtered_and_canonical() -> None:
    mgr = manager(INDEXED, {"startTime": T1, "completedIndexes": "0,1"})
    new = translate(mgr, remote({"startTime": T1, "completedIndexes": "0,1,2,3,x,7,1-0"}))
    assert new["completedIndexes"] == "0-3"


def test_indexes_after_a_redispatch_are_the_deciding_runs_not_the_union() -> None:
    """Run 1 completed index 1 then its worker was lost; run 2 failed index 1 and decides."""
    mgr = manager(PER_INDEX, {"startTime": T1, "completedIndexes": "0,1", "succeeded": 2, "failed": 0})
    new = translate(mgr, remote({"startTime": T2, "completedIndexes": "0", "failedIndexes": "1",
                                 "succeeded": 1, "failed": 1}))
    assert new["completedIndexes"] == "0"
    assert new["failedIndexes"] == "1"  # not reported as completed
    assert new["succeeded"] == 2 and new["failed"] == 1  # counters never go down (API rule)


def test_indexes_stay_as_last_mirrored_while_no_copy_is_visible() -> None:
    mgr = manager(PER_INDEX, {"startTime": T1, "completedIndexes": "0,1", "failedIndexes": "3", "succeeded": 2,
                              "failed": 2, "active": 1})
    new = translate(mgr, None)
    assert new["completedIndexes"] == "0,1" and new["failedIndexes"] == "3"


def test_indexed_completed_indexes_beyond_completions_are_dropped() -> None:
    new = translate(manager(INDEXED), remote({"startTime": T1, "completedIndexes": "3-9"}))
    assert new["completedIndexes"] == "3,4"


def test_nonindexed_drops_completed_indexes() -> None:
    new = translate(manager(NONINDEXED), remote({"startTime": T1, "completedIndexes": "0-2"}))
    assert "completedIndexes" not in new


def test_nonindexed_manager_with_bad_completed_indexes_is_cleaned() -> None:
    mgr = manager(NONINDEXED, {"startTime": T1, "completedIndexes": "0"})
    new = translate(mgr, remote({"startTime": T1}))
    assert "completedIndexes" not in new


def test_failed_indexes_dropped_without_backoff_limit_per_index() -> None:
    new = translate(manager(INDEXED), remote({"startTime": T1, "failedIndexes": "1"}))
    assert "failedIndexes" not in new


def test_failed_indexes_copied_with_backoff_limit_per_index() -> None:
    new = translate(manager(PER_INDEX), remote({"startTime": T1, "failedIndexes": "1,3", "completedIndexes": "0"}))
    assert (new["failedIndexes"], new["completedIndexes"]) == ("1,3", "0")


def test_failed_indexes_overlapping_completed_lose_the_overlap() -> None:
    mgr = manager(PER_INDEX, {"startTime": T1, "failedIndexes": "2"})
    new = translate(mgr, remote({"startTime": T1, "completedIndexes": "1-3", "failedIndexes": "4"}))
    assert (new["completedIndexes"], new["failedIndexes"]) == ("1-3", "4")


def test_empty_failed_indexes_pointer_is_kept() -> None:
    new = translate(manager(PER_INDEX), remote({"startTime": T1, "failedIndexes": ""}))
    assert new["failedIndexes"] == ""


# =========================================================================== interim conditions


def test_new_worker_interim_success_is_mirrored_while_pods_terminate() -> None:
    scm = cond("SuccessCriteriaMet", reason="CompletionsReached", message="Reached expected number of succeeded pods")
    rem = remote({"startTime": T0, "succeeded": 3, "terminating": 2, "conditions": [scm]})
    new = translate(manager(status={"startTime": T0}), rem)
    assert new["conditions"] == [scm]
    assert new["terminating"] == 2 and not is_finished({"status": new})


def test_new_worker_interim_failure_is_mirrored_with_active_pods() -> None:
    ft = cond("FailureTarget", reason="BackoffLimitExceeded", message="Job has reached the specified backoff limit")
    rem = remote({"startTime": T0, "failed": 3, "active": 1, "ready": 1, "conditions": [ft]})
    new = translate(manager(status={"startTime": T0}), rem)
    assert new["conditions"] == [ft] and new["active"] == 1


def test_manager_failure_target_is_not_joined_by_remote_success_criteria() -> None:
    ft = cond("FailureTarget", reason="DeadlineExceeded")
    mgr = manager(status={"startTime": T0, "conditions": [ft]})
    rem = remote({"startTime": T0, "succeeded": 3, "conditions": [cond("SuccessCriteriaMet")]})
    new = translate(mgr, rem)
    assert true_types(new) == ["FailureTarget"]


def test_manager_success_criteria_is_not_joined_by_remote_failure_target() -> None:
    mgr = manager(status={"startTime": T0, "conditions": [cond("SuccessCriteriaMet", reason="CompletionsReached")]})
    rem = remote({"startTime": T0, "conditions": [cond("FailureTarget", reason="BackoffLimitExceeded")]})
    new = translate(mgr, rem)
    assert true_types(new) == ["SuccessCriteriaMet"]


def test_foreign_condition_types_are_mirrored() -> None:
    custom = cond("ExampleWorkerCondition", reason="Why", message="what")
    new = translate(manager(status={"startTime": T0}), remote({"startTime": T0, "conditions": [custom, "junk"]}))
    assert new["conditions"] == [custom]


def test_mirrored_condition_keeps_its_times_when_unchanged() -> None:
    scm = cond("SuccessCriteriaMet", reason="CompletionsReached", at=T1)
    mgr = manager(status={"startTime": T0, "conditions": [scm]})
    newer = cond("SuccessCriteriaMet", reason="CompletionsReached", at=T3)
    new = translate(mgr, remote({"startTime": T0, "conditions": [newer]}))
    assert by_type(new, "SuccessCriteriaMet")["lastTransitionTime"] == T1


# =========================================================================== terminal conditions


def test_new_worker_complete_is_mirrored_with_completion_time() -> None:
    scm = cond("SuccessCriteriaMet", reason="CompletionsReached", message="m", at=T2)
    complete = cond("Complete", reason="CompletionsReached", message="m", at=T3)
    rem = remote(
        {
            "startTime": T0,
            "completionTime": T3,
            "succeeded": 3,
            "ready": 0,
            "terminating": 0,
            "uncountedTerminatedPods": {},
            "conditions": [scm, complete],
        }
    )
    new = translate(manager(status={"startTime": T0, "active": 1, "ready": 1}), rem)
    assert new["conditions"] == [scm, complete]
    assert new["completionTime"] == T3 and new.get("active", 0) == 0 and new["ready"] == 0


def test_old_worker_complete_without_success_criteria_gets_completions_reached() -> None:
    rem = remote({"startTime": T0, "completionTime": T3, "succeeded": 3, "conditions": [cond("Complete", at=T3)]})
    new = translate(manager(status={"startTime": T0}), rem)
    assert true_types(new) == ["SuccessCriteriaMet", "Complete"]
    scm = by_type(new, "SuccessCriteriaMet")
    assert (scm["reason"], scm["message"]) == ("CompletionsReached", "Reached expected number of succeeded pods")
    assert scm["lastTransitionTime"] == NOW_S
    complete = by_type(new, "Complete")
    assert complete["reason"] == "CompletionsReached" and complete["lastTransitionTime"] == T3


def test_old_worker_complete_reason_is_used_for_success_criteria() -> None:
    rem = remote(
        {"startTime": T0, "completionTime": T3, "conditions": [cond("Complete", reason="Custom", message="x")]}
    )
    new = translate(manager(status={"startTime": T0}), rem)
    assert (by_type(new, "SuccessCriteriaMet")["reason"], by_type(new, "SuccessCriteriaMet")["message"]) == (
        "Custom",
        "x",
    )


def test_old_worker_failed_without_failure_target_gets_one() -> None:
    failed = cond("Failed", reason="BackoffLimitExceeded", message="Job has reached the specified backoff limit", at=T3)
    new = translate(manager(status={"startTime": T0}), remote({"startTime": T0, "failed": 3, "conditions": [failed]}))
    assert true_types(new) == ["FailureTarget", "Failed"]
    ft = by_type(new, "FailureTarget")
    assert (ft["reason"], ft["message"], ft["lastTransitionTime"]) == (failed["reason"], failed["message"], NOW_S)
    assert by_type(new, "Failed") == failed
    assert "completionTime" not in new


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("terminating", 2),
        ("active", 2),
        ("ready", 1),
        ("uncountedTerminatedPods", {"succeeded": ["p1"], "failed": ["p2"]}),
    ],
    ids=["terminating", "active", "ready", "uncounted"],
)
@pytest.mark.parametrize("terminal", ["Complete", "Failed"])
def test_old_worker_terminal_with_pods_left_is_finished_with_zeros(terminal: str, field: str, value: Any) -> None:
    status: dict[str, Any] = {"startTime": T0, "completionTime": T3, "conditions": [cond(terminal, at=T3)]}
    if terminal == "Failed":
        del status["completionTime"]
    status[field] = value
    if field == "ready":
        status["active"] = 1
    mgr = manager(status={"startTime": T0, "active": 2, "ready": 1, "terminating": 1, "uncountedTerminatedPods": {}})
    new = translate(mgr, remote(status))
    assert terminal in true_types(new)
    assert new.get("active", 0) == 0 and new.get("ready", 0) == 0 and new.get("terminating", 0) == 0
    assert new.get("uncountedTerminatedPods") == {}


def test_old_worker_complete_without_completion_time_uses_condition_time() -> None:
    new = translate(
        manager(status={"startTime": T0}), remote({"startTime": T0, "conditions": [cond("Complete", at=T2)]})
    )
    assert new["completionTime"] == T2


def test_old_worker_complete_without_any_time_uses_now() -> None:
    bare = {"type": "Complete", "status": "True"}
    new = translate(manager(status={"startTime": T0}), remote({"startTime": T0, "conditions": [bare]}))
    assert new["completionTime"] == NOW_S
    assert by_type(new, "Complete")["lastTransitionTime"] == NOW_S


def test_completion_time_before_start_time_is_clamped() -> None:
    # The manager's startTime came from an earlier run on a worker whose clock ran ahead.
    mgr = manager(status={"startTime": T2})
    new = translate(mgr, remote({"startTime": T0, "completionTime": T1, "conditions": [cond("Complete", at=T1)]}))
    assert (new["startTime"], new["completionTime"]) == (T2, T2)


def test_finishing_without_start_time_takes_the_remote_one() -> None:
    new = translate(manager(), remote({"startTime": T1, "completionTime": T2, "conditions": [cond("Complete", at=T2)]}))
    assert (new["startTime"], new["completionTime"]) == (T1, T2)


def test_finishing_without_any_start_time_uses_remote_creation() -> None:
    new = translate(manager(), remote({"conditions": [cond("Failed", reason="DeadlineExceeded")]}, created=T1))
    assert new["startTime"] == T1


def test_finishing_without_any_start_time_or_creation_uses_now() -> None:
    new = translate(manager(), remote({"conditions": [cond("Failed", reason="DeadlineExceeded")]}, created=None))
    assert new["startTime"] == NOW_S


def test_stray_completion_time_is_kept_when_completing() -> None:
    mgr = manager(status={"completionTime": T2})
    new = translate(mgr, remote({"startTime": T3, "completionTime": T3, "conditions": [cond("Complete", at=T3)]}))
    assert new["completionTime"] == T2 and new["startTime"] == T2


def test_manager_failure_target_wins_over_remote_complete() -> None:
    ft = cond("FailureTarget", reason="PodFailurePolicy", message="exit 42", at=T1)
    mgr = manager(status={"startTime": T0, "conditions": [ft]})
    rem = remote({"startTime": T0, "completionTime": T3, "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]})
    new = translate(mgr, rem)
    assert true_types(new) == ["FailureTarget", "Failed"]
    failed = by_type(new, "Failed")
    assert (failed["reason"], failed["message"], failed["lastTransitionTime"]) == ("PodFailurePolicy", "exit 42", NOW_S)
    assert "completionTime" not in new


def test_manager_success_criteria_wins_over_remote_failed() -> None:
    scm = cond("SuccessCriteriaMet", reason="SuccessPolicy", message="Matched rules at index 0", at=T1)
    mgr = manager(INDEXED, {"startTime": T0, "conditions": [scm]})
    rem = remote(
        {"startTime": T0, "conditions": [cond("FailureTarget"), cond("Failed", reason="BackoffLimitExceeded")]}
    )
    new = translate(mgr, rem)
    assert true_types(new) == ["SuccessCriteriaMet", "Complete"]
    assert by_type(new, "Complete")["reason"] == "SuccessPolicy"
    assert new["completionTime"] == NOW_S


def test_remote_complete_and_failed_together_is_read_as_failure() -> None:
    new = translate(manager(status={"startTime": T0}), remote({"conditions": [cond("Complete"), cond("Failed")]}))
    assert "Failed" in true_types(new) and "Complete" not in true_types(new)


def test_success_policy_job_completed_by_old_worker_gets_success_criteria() -> None:
    spec = {**INDEXED, "successPolicy": {"rules": [{"succeededCount": 2}]}}
    rem = remote({"startTime": T0, "completionTime": T2, "completedIndexes": "0,1", "conditions": [cond("Complete")]})
    new = translate(manager(spec, {"startTime": T0}), rem)
    assert true_types(new) == ["SuccessCriteriaMet", "Complete"]


def test_complete_replaces_a_false_complete_entry() -> None:
    mgr = manager(status={"startTime": T0, "conditions": [cond("Complete", status="False")]})
    new = translate(mgr, remote({"startTime": T0, "completionTime": T2, "conditions": [cond("Complete", at=T2)]}))
    assert [c["type"] for c in new["conditions"]] == ["Complete", "SuccessCriteriaMet"]
    assert by_type(new, "Complete")["status"] == "True"


@pytest.mark.parametrize("terminal", ["Complete", "Failed"])
def test_finished_manager_is_frozen(terminal: str) -> None:
    interim = "SuccessCriteriaMet" if terminal == "Complete" else "FailureTarget"
    status: dict[str, Any] = {"startTime": T0, "succeeded": 1, "conditions": [cond(interim), cond(terminal)]}
    if terminal == "Complete":
        status["completionTime"] = T1
    mgr = manager(status=status)
    other = "Failed" if terminal == "Complete" else "Complete"
    rem = remote({"startTime": T2, "succeeded": 0, "active": 4, "conditions": [cond(other)]})
    assert translate(mgr, rem) == status
    assert translate(manager(status=status, suspend=True), None) == status


# =========================================================================== suspend / resume


def test_created_suspended_without_remote_gets_suspended_condition() -> None:
    new = translate(manager(suspend=True), None)
    assert new == {"conditions": [cond("Suspended", reason="JobSuspended", message="Job suspended", at=NOW_S)]}


def test_suspended_manager_clears_start_time_and_mirrors_pods_being_deleted() -> None:
    mgr = manager(status={"startTime": T0, "active": 3, "ready": 3}, suspend=True)
    new = translate(mgr, remote({"startTime": T0, "active": 1, "ready": 0, "terminating": 2}, suspend=True))
    assert "startTime" not in new
    assert (new["active"], new["ready"], new["terminating"]) == (1, 0, 2)
    assert true_types(new) == ["Suspended"]


def test_suspended_manager_does_not_take_remote_start_time() -> None:
    new = translate(manager(suspend=True), remote({"startTime": T1, "active": 1}))
    assert "startTime" not in new


def test_suspended_manager_without_remote_has_no_active_pods() -> None:
    mgr = manager(status={"startTime": T0, "active": 2, "ready": 2, "succeeded": 1}, suspend=True)
    new = translate(mgr, None)
    assert new.get("active", 0) == 0 and new["ready"] == 0 and new["succeeded"] == 1


def test_suspended_condition_is_not_bumped_when_already_true() -> None:
    suspended = cond("Suspended", reason="JobSuspended", message="Job suspended", at=T1)
    mgr = manager(status={"conditions": [suspended]}, suspend=True)
    assert translate(mgr, None)["conditions"] == [suspended]


def test_resume_flips_suspended_to_false() -> None:
    suspended = cond("Suspended", reason="JobSuspended", message="Job suspended", at=T1)
    mgr = manager(status={"conditions": [suspended]})
    new = translate(mgr, None)
    assert new["conditions"] == [cond("Suspended", "False", "JobResumed", "Job resumed", at=NOW_S)]


def test_resume_does_not_take_start_time_from_a_still_suspended_worker() -> None:
    suspended = cond("Suspended", reason="JobSuspended", message="Job suspended", at=T1)
    mgr = manager(status={"conditions": [suspended]})
    rem = remote({"startTime": T0, "conditions": [cond("Suspended", reason="JobSuspended")]}, suspend=False)
    new = translate(mgr, rem)
    assert "startTime" not in new


def test_resume_takes_start_time_of_the_new_run() -> None:
    resumed = cond("Suspended", "False", "JobResumed", "Job resumed", at=T2)
    mgr = manager(status={"conditions": [resumed]})
    rem = remote({"startTime": T3, "active": 1, "conditions": [cond("Suspended", "False", "JobResumed", at=T3)]})
    new = translate(mgr, rem)
    assert new["startTime"] == T3
    assert new["conditions"] == [resumed]


def test_remote_suspended_condition_is_not_mirrored_onto_unsuspended_manager() -> None:
    rem = remote({"startTime": T0, "conditions": [cond("Suspended", reason="JobSuspended")]}, suspend=True)
    new = translate(manager(status={"startTime": T0}), rem)
    assert "conditions" not in new


def test_remote_terminal_while_manager_suspended_still_finishes() -> None:
    suspended = cond("Suspended", reason="JobSuspended", message="Job suspended", at=T1)
    mgr = manager(status={"conditions": [suspended]}, suspend=True)
    rem = remote({"startTime": T0, "completionTime": T2, "succeeded": 3, "conditions": [cond("Complete", at=T2)]})
    new = translate(mgr, rem)
    assert true_types(new) == ["Suspended", "SuccessCriteriaMet", "Complete"]
    assert (new["startTime"], new["completionTime"]) == (T0, T2)


def test_resume_with_start_time_still_set_keeps_it() -> None:
    # Written by someone else while suspended; changing it would need kubernetes#134521.
    suspended = cond("Suspended", reason="JobSuspended", message="Job suspended", at=T1)
    mgr = manager(status={"startTime": T0, "conditions": [suspended]})
    new = translate(mgr, remote({"startTime": T3}))
    assert new["startTime"] == T0


# =========================================================================== idempotence & helpers


def test_second_reconcile_changes_nothing() -> None:
    rem = remote(
        {
            "startTime": T0,
            "active": 1,
            "ready": 1,
            "terminating": 0,
            "conditions": [cond("FailureTarget", reason="BackoffLimitExceeded")],
            "uncountedTerminatedPods": {"failed": ["a"]},
        }
    )
    first = translate(manager(), rem)
    second = translate(manager(status=first), rem, datetime(2026, 11, 23, 11, 0, 0, tzinfo=UTC))
    assert not status_differs(first, second)


@pytest.mark.parametrize(
    ("current", "desired", "differs"),
    [
        ({}, {"active": 0, "succeeded": 0, "failed": 0}, False),
        ({}, {"completedIndexes": ""}, False),
        ({}, {"conditions": []}, False),
        ({}, {"ready": 0}, True),
        ({}, {"terminating": 0}, True),
        ({}, {"failedIndexes": ""}, True),
        ({}, {"uncountedTerminatedPods": {}}, True),
        ({"uncountedTerminatedPods": {"failed": []}}, {"uncountedTerminatedPods": {}}, False),
        ({"startTime": T0}, {"startTime": "2026-11-23T10:00:00.000Z"}, False),
        ({"startTime": T0}, {"startTime": "2026-11-23T11:00:00+01:00"}, False),
        ({"startTime": T0}, {"startTime": T1}, True),
        (
            {"conditions": [cond("A"), cond("B")]},
            {"conditions": [cond("B"), cond("A")]},
            False,
        ),
        (
            {"conditions": [{"type": "A", "status": "True"}]},
            {"conditions": [{"type": "A", "status": "True", "reason": "", "message": ""}]},
            False,
        ),
        ({"conditions": [cond("A")]}, {"conditions": [cond("A", at=T2)]}, True),
        ({"conditions": [cond("A")]}, {"conditions": [cond("A", reason="R")]}, True),
        ({"x": {"a": 1, "b": 2}}, {"x": {"b": 2, "a": 1}}, False),
        ({"x": 1}, {}, True),
        ({"active": 1}, {"active": 2}, True),
    ],
)
def test_status_differs(current: dict[str, Any], desired: dict[str, Any], differs: bool) -> None:
    assert status_differs(current, desired) is differs
    assert status_differs(desired, current) is differs


def test_is_finished_and_condition_helpers() -> None:
    assert not is_finished(None)
    assert not is_finished({"status": {"conditions": [cond("SuccessCriteriaMet")]}})
    assert is_finished({"status": {"conditions": [cond("Failed")]}})
    assert not is_finished({"status": {"conditions": [cond("Complete", status="False")]}})
    job = {"status": {"conditions": ["junk", cond("Suspended", "False")]}}
    assert condition(job, "Suspended") == cond("Suspended", "False")
    assert condition(job, "Complete") is None
    assert condition({}, "Complete") is None


def test_time_helpers() -> None:
    assert format_time(datetime(2026, 11, 23, 10, 0, 0, 900000)) == T0
    assert parse_time_seconds("nonsense") is None and parse_time_seconds(None) is None
    assert parse_time_seconds("2026-11-23T10:00:00.9Z") == parse_time_seconds(T0)


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("", None, set()),
        ("1,3-5,7", None, {1, 3, 4, 5, 7}),
        ("0-9", 3, {0, 1, 2}),
        ("x,2,1-0,1-2-3,²,4", None, {2, 4}),
        ("5", 5, set()),
    ],
)
def test_parse_indexes(text: str, limit: int | None, expected: set[int]) -> None:
    assert set(Intervals.parse_lenient(text, limit).indexes()) == expected


@pytest.mark.parametrize(
    ("indexes", "expected"),
    [(set(), ""), ({0}, "0"), ({0, 1}, "0,1"), ({0, 1, 2}, "0-2"), ({1, 3, 4, 5, 7, 8}, "1,3-5,7,8")],
)
def test_format_indexes(indexes: set[int], expected: str) -> None:
    assert str(Intervals.of(indexes)) == expected


# =========================================================================== the oracle itself
# One case per rule in shared/reference/job-status-validation.md: the rejection, and where the
# rule is gated, that an unrelated update of an already-violating status is still accepted.

SPEC_INDEXED_5 = {"completionMode": "Indexed", "completions": 5, "parallelism": 5}
SPEC_INDEXED_5_P2 = {"completionMode": "Indexed", "completions": 5, "parallelism": 2}
SPEC_PER_INDEX_5 = {**SPEC_INDEXED_5_P2, "backoffLimitPerIndex": 1}
SPEC_POLICY = {**SPEC_INDEXED_5_P2, "successPolicy": {"rules": [{"succeededIndexes": "0-2"}]}}
SCM, FT = cond("SuccessCriteriaMet"), cond("FailureTarget")
COMPLETE, FAILED = cond("Complete"), cond("Failed")

ORACLE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], list[str]]] = [
    ("valid running update", {}, {"active": 1}, {"active": 2, "startTime": T0}, []),
    ("negative active", {}, {}, {"active": -1}, ["status.active"]),
    ("negative ready", {}, {}, {"ready": -1}, ["status.ready"]),
    ("negative terminating", {}, {}, {"terminating": -1}, ["status.terminating"]),
    (
        "empty and duplicate uncounted uids",
        {},
        {},
        {"uncountedTerminatedPods": {"succeeded": ["a", ""], "failed": ["a"]}},
        ["uncountedTerminatedPods.succeeded[1]", "uncountedTerminatedPods.failed[0]"],
    ),
    ("decreasing succeeded", {}, {"succeeded": 3}, {"succeeded": 1}, ["status.succeeded"]),
    (
        "decreasing succeeded allowed for indexed completions == parallelism",
        SPEC_INDEXED_5,
        {"succeeded": 3},
        {"succeeded": 1},
        [],
    ),
    (
        "decreasing succeeded rejected for indexed completions != parallelism",
        SPEC_INDEXED_5_P2,
        {"succeeded": 3},
        {"succeeded": 1},
        ["status.succeeded"],
    ),
    ("decreasing failed", {}, {"failed": 3}, {"failed": 1}, ["status.failed"]),
    ("disabling Failed", {}, {"conditions": [FT, FAILED]}, {"conditions": [FT]}, ["terminal Failed"]),
    ("disabling Complete", {}, {"conditions": [SCM, COMPLETE]}, {"conditions": [SCM]}, ["terminal Complete"]),
    (
        "disabling FailureTarget",
        {},
        {"conditions": [FT]},
        {"conditions": [cond("FailureTarget", "False")]},
        ["terminal FailureTarget"],
    ),
    ("disabling SuccessCriteriaMet", {}, {"conditions": [SCM]}, {}, ["disable the SuccessCriteriaMet"]),
    ("bad completedIndexes format", SPEC_INDEXED_5, {}, {"completedIndexes": "x"}, ["completedIndexes: error parsing"]),
    ("unordered completedIndexes", SPEC_INDEXED_5, {}, {"completedIndexes": "3,1"}, ["non-increasing"]),
    ("completedIndexes beyond completions", SPEC_INDEXED_5, {}, {"completedIndexes": "4-5"}, ["too large"]),
    (
        "bad completedIndexes tolerated when unchanged",
        SPEC_INDEXED_5,
        {"completedIndexes": "x"},
        {"completedIndexes": "x", "active": 1},
        [],
    ),
    ("bad failedIndexes format", SPEC_PER_INDEX_5, {}, {"failedIndexes": "1-1"}, ["failedIndexes: error parsing"]),
    (
        "bad failedIndexes tolerated when unchanged",
        SPEC_PER_INDEX_5,
        {"failedIndexes": "x"},
        {"failedIndexes": "x", "active": 1},
        [],
    ),
    ("completedIndexes on NonIndexed", {"completions": 5}, {}, {"completedIndexes": "0"}, ["non-indexed"]),
    (
        "completedIndexes on NonIndexed tolerated when unchanged",
        {"completions": 5},
        {"completedIndexes": "0"},
        {"completedIndexes": "0", "active": 1},
        [],
    ),
    (
        "failedIndexes without backoffLimitPerIndex",
        SPEC_INDEXED_5,
        {},
        {"failedIndexes": ""},
        ["backoffLimitPerIndex is null"],
    ),
    (
        "failed overlaps completed",
        SPEC_PER_INDEX_5,
        {"failedIndexes": "0,2"},
        {"failedIndexes": "0,2", "completedIndexes": "2-4"},
        ["overlap at index: 2"],
    ),
    (
        "overlap tolerated when unchanged",
        SPEC_PER_INDEX_5,
        {"failedIndexes": "0,2", "completedIndexes": "2-4"},
        {"failedIndexes": "0,2", "completedIndexes": "2-4", "active": 1},
        [],
    ),
    ("Failed without FailureTarget", {}, {}, {"startTime": T0, "conditions": [FAILED]}, ["without the FailureTarget"]),
    (
        "Failed without FailureTarget checked when failedIndexes change",
        SPEC_PER_INDEX_5,
        {"startTime": T0, "conditions": [FAILED]},
        {"startTime": T0, "conditions": [FAILED], "failedIndexes": "1"},
        ["without the FailureTarget"],
    ),
    (
        "Complete without SuccessCriteriaMet",
        {},
        {},
        {"startTime": T0, "completionTime": T0, "conditions": [COMPLETE]},
        ["without the SuccessCriteriaMet"],
    ),
    (
        "Complete without SuccessCriteriaMet tolerated when unchanged",
        {},
        {"startTime": T0, "completionTime": T0, "conditions": [COMPLETE]},
        {"startTime": T0, "completionTime": T0, "conditions": [COMPLETE, cond("Custom")]},
        [],
    ),
    (
        "finished with active pods",
        {},
        {"startTime": T0, "active": 1, "conditions": [FT]},
        {"startTime": T0, "active": 1, "conditions": [FT, FAILED]},
        ["status.active"],
    ),
    ("finished without startTime", {}, {"conditions": [FT]}, {"conditions": [FT, FAILED]}, ["status.startTime"]),
    (
        "finished without startTime allowed when suspended with zero completions",
        {"completions": 0, "suspend": True},
        {},
        {"completionTime": T0, "conditions": [SCM, COMPLETE]},
        [],
    ),
    (
        "finished with uncounted pods",
        {},
        {"startTime": T0, "uncountedTerminatedPods": {"failed": ["a"]}, "conditions": [FT]},
        {"startTime": T0, "uncountedTerminatedPods": {"failed": ["a"]}, "conditions": [FT, FAILED]},
        ["uncountedTerminatedPods"],
    ),
    (
        "finished with uncounted pods tolerated when unchanged",
        {},
        {
            "startTime": T0,
            "completionTime": T0,
            "uncountedTerminatedPods": {"failed": ["a"]},
            "conditions": [SCM, COMPLETE],
        },
        {
            "startTime": T0,
            "completionTime": T0,
            "uncountedTerminatedPods": {"failed": ["a"]},
            "conditions": [SCM, COMPLETE, cond("Custom")],
        },
        [],
    ),
    ("startTime changed for unsuspended Job", {}, {"startTime": T0}, {"startTime": T1}, ["status.startTime"]),
    ("startTime removed for unsuspended Job", {}, {"startTime": T0}, {}, ["status.startTime"]),
    ("startTime nil to set for unsuspended Job", {}, {}, {"startTime": T0}, []),
    ("startTime cleared for suspended Job", {"suspend": True}, {"startTime": T0}, {}, []),
    (
        "startTime changed when resuming",
        {},
        {"startTime": T0, "conditions": [cond("Suspended")]},
        {"startTime": T1, "conditions": [cond("Suspended", "False")]},
        [],
    ),
    ("startTime same instant other spelling", {}, {"startTime": T0}, {"startTime": "2026-11-23T10:00:00.400Z"}, []),
    (
        "completionTime before startTime",
        {},
        {"startTime": T1, "conditions": [SCM]},
        {"startTime": T1, "completionTime": T0, "conditions": [SCM, COMPLETE]},
        ["before startTime"],
    ),
    (
        "mutating completionTime",
        {},
        {"completionTime": T0, "conditions": [COMPLETE]},
        {"startTime": T0, "completionTime": T1, "conditions": [COMPLETE]},
        ["cannot be mutated"],
    ),
    ("completionTime without Complete", {}, {}, {"completionTime": T0}, ["no Complete=True"]),
    (
        "completionTime without Complete tolerated when unchanged",
        {},
        {"completionTime": T0},
        {"completionTime": T0, "active": 1},
        [],
    ),
    ("completionTime removed from running Job", {}, {"startTime": T0, "completionTime": T0}, {"startTime": T0}, []),
    (
        "Complete without completionTime",
        {},
        {"startTime": T0, "conditions": [SCM]},
        {"startTime": T0, "conditions": [SCM, COMPLETE]},
        ["completionTime is required"],
    ),
    (
        "Complete with Failed",
        {},
        {},
        {"startTime": T0, "completionTime": T0, "conditions": [COMPLETE, FAILED]},
        ["Complete=True and Failed", "without the FailureTarget", "without the SuccessCriteriaMet"],
    ),
    (
        "Complete with FailureTarget",
        {},
        {},
        {"startTime": T0, "completionTime": T0, "conditions": [COMPLETE, FT]},
        ["Complete=True and FailureTarget", "without the SuccessCriteriaMet"],
    ),
    ("more ready than active", {}, {}, {"active": 1, "ready": 2}, ["status.ready"]),
    (
        "more ready than active tolerated when unchanged",
        {},
        {"active": 1, "ready": 2},
        {"active": 1, "ready": 2, "succeeded": 1},
        [],
    ),
    (
        "finished with terminating pods",
        {},
        {"startTime": T0, "terminating": 1, "conditions": [FT]},
        {"startTime": T0, "terminating": 1, "conditions": [FT, FAILED]},
        ["status.terminating"],
    ),
    (
        "SuccessCriteriaMet with Failed",
        {},
        {"conditions": [FAILED]},
        {"conditions": [FAILED, SCM]},
        ["SuccessCriteriaMet=True and Failed"],
    ),
    (
        "SuccessCriteriaMet with FailureTarget",
        {},
        {"conditions": [FT]},
        {"conditions": [FT, SCM]},
        ["SuccessCriteriaMet=True and FailureTarget"],
    ),
    (
        "successPolicy Job Complete without SuccessCriteriaMet",
        SPEC_POLICY,
        {"startTime": T0, "completionTime": T0, "conditions": [COMPLETE]},
        {"startTime": T0, "completionTime": T0, "conditions": [COMPLETE], "succeeded": 1},
        ["with SuccessPolicy unless"],
    ),
    (
        "SuccessCriteriaMet added to a Complete Job",
        {},
        {"conditions": [COMPLETE]},
        {"conditions": [COMPLETE, SCM]},
        ["already has Complete"],
    ),
    ("SuccessCriteriaMet on NonIndexed Job without successPolicy (extended scope)", {}, {}, {"conditions": [SCM]}, []),
    (
        "valid Complete",
        {},
        {"startTime": T0, "conditions": [SCM]},
        {
            "startTime": T0,
            "completionTime": T1,
            "conditions": [SCM, COMPLETE],
            "ready": 0,
            "terminating": 0,
            "uncountedTerminatedPods": {},
        },
        [],
    ),
]


@pytest.mark.parametrize(
    ("spec", "old", "new", "expected"),
    [case[1:] for case in ORACLE_CASES],
    ids=[case[0] for case in ORACLE_CASES],
)
def test_oracle(spec: dict[str, Any], old: dict[str, Any], new: dict[str, Any], expected: list[str]) -> None:
    errors = validate_status_update({"spec": spec}, old, new)
    assert len(errors) == len(expected), errors
    for fragment in expected:
        assert any(fragment in e for e in errors), (fragment, errors)


def test_oracle_without_resume_exception_rejects_start_time_change_on_resume() -> None:
    old = {"startTime": T0, "conditions": [cond("Suspended")]}
    new = {"startTime": T1, "conditions": [cond("Suspended", "False")]}
    assert validate_status_update({"spec": {}}, old, new, resume_exception=False) != []
