"""A decided outcome is final: finishing a Job whose copy vanished (issue 11, item 3)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from jobapi import conditions as jc
from mirror.jobs.kind import JOB_KIND
from mirror.jobs.status_translation import decided_final_status
from tests.jobstatus_validation import validate_status_update
from tests.unit.test_status_translation import (
    INDEXED,
    NONINDEXED,
    PER_INDEX,
    T1,
    T2,
    by_type,
    cond,
    manager,
    true_types,
)

NOW = datetime(2026, 11, 23, 10, 10, 0, tzinfo=UTC)
SCM = cond("SuccessCriteriaMet", reason="SuccessPolicy", message="Matched rules at index 0", at=T2)
FT = cond("FailureTarget", reason="BackoffLimitExceeded", message="Job has reached the specified backoff limit",
          at=T2)


def finish(mgr: dict[str, Any], now: datetime = NOW) -> dict[str, Any] | None:
    before = copy.deepcopy(mgr)
    out = decided_final_status(mgr, now)
    assert mgr == before, "must not mutate its input"
    if out is not None:
        for resume_exception in (True, False):
            assert validate_status_update(mgr, mgr["status"], out, resume_exception=resume_exception) == []
    return out


@pytest.mark.parametrize(
    ("spec", "status", "terminal"),
    [
        (INDEXED, {"startTime": T1, "active": 1, "ready": 1, "succeeded": 1, "completedIndexes": "0",
                   "conditions": [SCM], "uncountedTerminatedPods": {"succeeded": ["a"]}}, "Complete"),
        (NONINDEXED, {"startTime": T1, "active": 2, "terminating": 1, "failed": 3, "conditions": [FT]}, "Failed"),
        (PER_INDEX, {"startTime": T1, "active": 1, "failed": 2, "failedIndexes": "1,2", "completedIndexes": "0",
                     "succeeded": 1, "conditions": [FT]}, "Failed"),
        (NONINDEXED, {"active": 1, "succeeded": 3, "conditions": [cond("SuccessCriteriaMet", at=T2)]}, "Complete"),
    ],
)
def test_decided_job_is_finished_from_its_last_mirrored_status(spec: dict[str, Any], status: dict[str, Any],
                                                               terminal: str) -> None:
    mgr = manager(spec, status)
    out = finish(mgr)
    assert out is not None
    assert terminal in true_types(out)
    interim = "SuccessCriteriaMet" if terminal == "Complete" else "FailureTarget"
    assert by_type(out, terminal)["reason"] == by_type(status, interim)["reason"]  # copied, as upstream
    for key in ("succeeded", "failed", "completedIndexes", "failedIndexes"):
        assert out.get(key) == status.get(key)  # counters and indexes as last mirrored
    assert not out.get("active") and not out.get("ready") and not out.get("terminating")
    assert not (out.get("uncountedTerminatedPods") or {}).get("succeeded")
    assert out["startTime"]
    assert ("completionTime" in out) is (terminal == "Complete")
    assert JOB_KIND.decided_status({**mgr, "status": out}, NOW) is None  # finished: nothing more to do


@pytest.mark.parametrize(
    ("status", "succeeded", "failed"),
    [
        # the copy said SuccessCriteriaMet while its last pod was still uncounted, then vanished
        ({"startTime": T1, "conditions": [cond("SuccessCriteriaMet", at=T2)],
          "uncountedTerminatedPods": {"succeeded": ["a"]}}, 1, None),
        ({"startTime": T1, "succeeded": 2, "failed": 1, "conditions": [cond("SuccessCriteriaMet", at=T2)],
          "uncountedTerminatedPods": {"succeeded": ["a", "a"], "failed": ["b"]}}, 3, 2),
        ({"startTime": T1, "failed": 1, "conditions": [FT], "uncountedTerminatedPods": {"failed": ["b", "c"]}},
         None, 3),
    ],
)
def test_uncounted_pods_of_a_non_indexed_job_are_counted_when_it_is_finished(
        status: dict[str, Any], succeeded: int | None, failed: int | None) -> None:
    out = finish(manager(NONINDEXED, status))
    assert out is not None
    assert (out.get("succeeded"), out.get("failed")) == (succeeded, failed)
    assert out["uncountedTerminatedPods"] == {}


@pytest.mark.parametrize(
    "status",
    [
        {},
        {"startTime": T1, "active": 1},
        {"startTime": T1, "conditions": [SCM, cond("Complete", at=T2)], "completionTime": T2, "succeeded": 1},
        {"startTime": T1, "conditions": [FT, cond("Failed", at=T2)], "failed": 1},
        {"startTime": T1, "conditions": [cond("SuccessCriteriaMet", status="False")]},
    ],
)
def test_undecided_or_finished_job_has_no_final_status(status: dict[str, Any]) -> None:
    assert finish(manager(NONINDEXED, status)) is None


def test_completion_time_never_before_start_time() -> None:
    future = "2026-11-23T11:00:00Z"  # a worker clock ahead of ours
    out = finish(manager(NONINDEXED, {"startTime": future, "succeeded": 3, "conditions": [SCM]}))
    assert out is not None and out["completionTime"] >= out["startTime"]
    assert jc.is_true(jc.conditions_of(out), "Complete")


# -- a stale copy that finished during a partition (issue 11 item 3, last sentence) ----------

def _job(*conds: str) -> dict[str, Any]:
    return {"metadata": {"name": "j", "namespace": "n", "uid": "u"}, "spec": {},
            "status": {"conditions": [{"type": c, "status": "True"} for c in conds]}}


@pytest.mark.parametrize(("manager", "copies", "expected"), [
    (_job(), {"old": _job("Complete"), "new": _job()}, "old"),
    (_job(), {"old": _job("Failed"), "new": _job()}, "old"),
    (_job(), {"old": _job("Complete")}, "old"),  # the new copy not created yet
    (_job(), {"old": _job(), "new": _job()}, None),  # stale copy still running: deleted as before
    (_job(), {"old": _job("Complete"), "new": _job("Failed")}, None),  # the placed run decided
    (_job("FailureTarget"), {"old": _job("Complete"), "new": _job()}, None),  # decided otherwise
    (_job("Complete"), {"old": _job("Failed"), "new": _job()}, None),
], ids=["complete", "failed", "no-new-copy", "running", "placed-finished", "decided", "finished"])
def test_stale_finished_copy_outcome_is_used_unless_decided(manager: dict[str, Any], copies: dict[str, Any],
                                                            expected: str | None) -> None:
    from mirror.decisions import Placement, stale_outcome_from

    assert stale_outcome_from(JOB_KIND, manager, Placement("new", "j"), copies, NOW) == expected
