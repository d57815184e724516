"""bench.floor's decisions: the claim, the release and the one status write the strict validation accepts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bench.floor import claim_patch, interim_to_write, placed_on, release_patch
from mirror.jobs.status_translation import desired_manager_status
from mirror.naming import ANNOTATION_CLAIMED_BY, ANNOTATION_CLUSTER, ANNOTATION_REMOTE_NAME, FINALIZER
from testkit.jobs import make_job
from tests.jobstatus_validation import validate_status_update

ORIGIN = "bench"


def job(finalizers: list[str] | None = None, **annotations: str) -> dict[str, Any]:
    job = make_job("j", namespace="ns", annotations=annotations, managed_by=None, completions=None, parallelism=None,
                   backoff_limit=None, kwok=False, container_name="c", image=None)
    job["metadata"] |= {"uid": "u1", "resourceVersion": "7"}
    if finalizers is not None:
        job["metadata"]["finalizers"] = finalizers
    return job


OURS = {ANNOTATION_CLAIMED_BY: ORIGIN, ANNOTATION_CLUSTER: "worker-1"}


@pytest.mark.parametrize(("obj", "write", "placed"), [
    (job(), True, None),
    (job(["other/f"]), True, None),
    (job([FINALIZER], **OURS), False, "worker-1"),  # claimed by us already: no second write
    (job([FINALIZER], **{ANNOTATION_CLAIMED_BY: "elsewhere", ANNOTATION_CLUSTER: "w9"}), False, None),
    (job(None, **OURS), True, None),  # our annotations without the finalizer: not a claim yet
], ids=["fresh", "foreign-finalizer", "ours", "another-origin", "half-claimed"])
def test_claim_is_one_guarded_write_and_never_a_second(obj: dict[str, Any], write: bool, placed: str | None) -> None:
    patch = claim_patch(obj, "worker-2", ORIGIN)
    assert placed_on(obj, ORIGIN) == placed
    assert (patch is not None) is write
    if patch is not None:
        md = patch["metadata"]
        assert md["resourceVersion"] == "7"  # of two writers, only one gets through
        assert md["finalizers"][-1] == FINALIZER and md["finalizers"].count(FINALIZER) == 1
        assert md["annotations"] == {ANNOTATION_CLUSTER: "worker-2", ANNOTATION_REMOTE_NAME: "j",
                                     ANNOTATION_CLAIMED_BY: ORIGIN}
        applied = {**obj["metadata"], "finalizers": md["finalizers"],
                   "annotations": {**obj["metadata"].get("annotations", {}), **md["annotations"]}}
        assert placed_on({**obj, "metadata": applied}, ORIGIN) == "worker-2"


@pytest.mark.parametrize(("finalizers", "left"), [
    ([FINALIZER], []), (["a", FINALIZER, "b"], ["a", "b"]), (["a"], None), (None, None),
])
def test_release_drops_only_ours_under_a_precondition(finalizers: list[str] | None, left: list[str] | None) -> None:
    patch = release_patch(job(finalizers))
    if left is None:
        assert patch is None
    else:
        assert patch == {"metadata": {"resourceVersion": "7", "finalizers": left}}


T0, T1 = "2026-11-26T01:00:00Z", "2026-11-26T01:00:02Z"
NOW = datetime(2026, 11, 26, 1, 0, 3, tzinfo=UTC)


def cond(ctype: str, reason: str = "") -> dict[str, str]:
    return {"type": ctype, "status": "True", "reason": reason, "message": "", "lastTransitionTime": T1,
            "lastProbeTime": T1}


#: what a worker's copy says when it is terminal, as each kind of Job controller writes it
FINAL_WORKER_STATUSES = [
    # a 1.33+ worker: interim condition first
    {"conditions": [cond("SuccessCriteriaMet", "CompletionsReached"), cond("Complete", "CompletionsReached")],
     "startTime": T0, "completionTime": T1, "succeeded": 1, "ready": 0, "terminating": 0,
     "uncountedTerminatedPods": {}},
    # an old worker: Complete without SuccessCriteriaMet, no completionTime
    {"conditions": [cond("Complete")], "startTime": T0, "succeeded": 1},
    # a failure: FailureTarget then Failed
    {"conditions": [cond("FailureTarget", "BackoffLimitExceeded"), cond("Failed", "BackoffLimitExceeded")],
     "startTime": T0, "failed": 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}},
    # an old worker's failure: Failed alone, a pod still counted active
    {"conditions": [cond("Failed", "BackoffLimitExceeded")], "startTime": T0, "failed": 2, "active": 1},
]
FINAL_IDS = ["complete", "complete-old-worker", "failed", "failed-old-worker"]


@pytest.mark.parametrize("worker_status", FINAL_WORKER_STATUSES, ids=FINAL_IDS)
def test_one_final_write_from_a_fresh_manager_status_is_accepted(worker_status: dict[str, Any]) -> None:
    """A copy first seen terminal: one write with the interim and terminal conditions together, from nothing."""
    manager = job([FINALIZER], **OURS)
    copy = {**job(), "status": worker_status}
    desired = desired_manager_status(manager, copy, NOW)
    assert validate_status_update(manager, {}, desired) == []
    types = [c["type"] for c in desired["conditions"]]
    assert types in (["SuccessCriteriaMet", "Complete"], ["FailureTarget", "Failed"])


INTERIM_STATUSES = [
    {"conditions": [cond("SuccessCriteriaMet", "CompletionsReached")], "startTime": T0, "succeeded": 1, "ready": 0,
     "terminating": 0, "uncountedTerminatedPods": {}},
    {"conditions": [cond("FailureTarget", "BackoffLimitExceeded")], "startTime": T0, "failed": 1, "ready": 0,
     "terminating": 0, "uncountedTerminatedPods": {}},
]


@pytest.mark.parametrize(("interim", "final"), [(INTERIM_STATUSES[0], FINAL_WORKER_STATUSES[0]),
                                                (INTERIM_STATUSES[1], FINAL_WORKER_STATUSES[2])],
                         ids=["success", "failure"])
def test_each_deciding_condition_is_written_when_the_worker_writes_it(interim: dict[str, Any],
                                                                      final: dict[str, Any]) -> None:
    """jobmirror's status contract, which the floor now keeps too: the interim condition in its own write,
    then the terminal one; both accepted by the strict validation, and nothing written twice."""
    manager = job([FINALIZER], **OURS)
    first = {**job(), "status": interim}
    assert interim_to_write(first, manager)
    desired = desired_manager_status(manager, first, NOW)
    assert validate_status_update(manager, {}, desired) == []
    assert [c["type"] for c in desired["conditions"]] == [interim["conditions"][0]["type"]]
    written = {**manager, "status": desired}
    assert not interim_to_write(first, written), "written once"
    done = {**job(), "status": final}
    assert not interim_to_write(done, written), "the terminal write carries it"
    terminal = desired_manager_status(written, done, NOW)
    assert validate_status_update(written, desired, terminal) == []
    assert len(terminal["conditions"]) == 2


def test_a_copy_without_a_deciding_condition_needs_no_interim_write() -> None:
    manager = job([FINALIZER], **OURS)
    running = {**job(), "status": {"startTime": T0, "active": 1}}
    assert not interim_to_write(running, manager)
