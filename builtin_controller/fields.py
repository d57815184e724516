"""The fields of raw Job and Pod dicts as this controller reads them: names, reasons and accessors.

Objects stay plain JSON dicts end to end (see ``kruntime.client``), so the handful of
questions every module asks of them ("is this pod active?", "which index is it?")
live here once, with the API's defaulting rules spelled out where a field may be absent.
"""

from __future__ import annotations

from jobapi.conditions import (
    COMPLETE,
    FAILED,
    FAILURE_TARGET,
    MSG_BACKOFF_LIMIT,
    MSG_COMPLETIONS_REACHED,
    MSG_DEADLINE,
    MSG_FAILED_INDEXES,
    MSG_MAX_FAILED_INDEXES,
    REASON_BACKOFF_LIMIT_EXCEEDED,
    REASON_COMPLETIONS_REACHED,
    REASON_DEADLINE_EXCEEDED,
    REASON_FAILED_INDEXES,
    REASON_JOB_RESUMED,
    REASON_JOB_SUSPENDED,
    REASON_MAX_FAILED_INDEXES_EXCEEDED,
    REASON_POD_FAILURE_POLICY,
    REASON_SUCCESS_POLICY,
    SUCCESS_CRITERIA_MET,
    SUSPENDED,
    condition,
    found_true,
    is_finished,
    job_conditions,
)
from jobapi.names import (
    BUILTIN_JOB_CONTROLLER,
    COMPLETION_INDEX_ENV,
    COMPLETION_INDEX_KEY,
    INDEX_FAILURE_COUNT_KEY,
    INDEX_IGNORED_FAILURE_COUNT_KEY,
    INDEXED,
    INT32_MAX,
    JOB_TRACKING_FINALIZER,
    NON_INDEXED,
    atoi,
)
from jobapi.objects import (
    annotations_of,
    controller_ref,
    deletion_timestamp,
    labels_of,
    md,
    name,
    namespace,
    uid,
)
from jobapi.times import format_time, parse_time, utcnow
from kruntime.resources import Obj

# The batch/v1 vocabulary comes from ``jobapi`` (shared with the mirror); re-exported here so
# this controller's modules read everything about Jobs and Pods from one place.
__all__ = [
    "COMPLETE", "COMPLETION_INDEX_ENV", "COMPLETION_INDEX_KEY", "FAILED", "FAILURE_TARGET",
    "INDEXED", "INDEX_FAILURE_COUNT_KEY", "INDEX_IGNORED_FAILURE_COUNT_KEY", "INT32_MAX", "JOB_CONTROLLER_NAME",
    "JOB_TRACKING_FINALIZER", "MSG_BACKOFF_LIMIT", "MSG_COMPLETIONS_REACHED", "MSG_DEADLINE", "MSG_FAILED_INDEXES",
    "MSG_MAX_FAILED_INDEXES", "NON_INDEXED", "REASON_BACKOFF_LIMIT_EXCEEDED", "REASON_COMPLETIONS_REACHED",
    "REASON_DEADLINE_EXCEEDED", "REASON_FAILED_INDEXES", "REASON_JOB_RESUMED", "REASON_JOB_SUSPENDED",
    "REASON_MAX_FAILED_INDEXES_EXCEEDED", "REASON_POD_FAILURE_POLICY", "REASON_SUCCESS_POLICY",
    "SUCCESS_CRITERIA_MET", "SUSPENDED", "annotations_of", "condition", "controller_ref", "deletion_timestamp",
    "format_time", "is_finished", "labels_of", "md", "name", "namespace", "parse_time", "uid", "utcnow",
]

JOB_CONTROLLER_NAME = BUILTIN_JOB_CONTROLLER

# Pod failure policy actions.
ACTION_FAIL_JOB = "FailJob"
ACTION_FAIL_INDEX = "FailIndex"
ACTION_IGNORE = "Ignore"
ACTION_COUNT = "Count"

# Pod phases.
PENDING = "Pending"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED_PHASE = "Failed"
UNKNOWN = "Unknown"

UNKNOWN_INDEX = -1


# -- pods -------------------------------------------------------------------------------------

def phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def has_tracking_finalizer(pod: Obj) -> bool:
    return JOB_TRACKING_FINALIZER in (md(pod).get("finalizers") or [])


def is_terminal(pod: Obj) -> bool:
    return phase(pod) in (SUCCEEDED, FAILED_PHASE)


def is_active(pod: Obj) -> bool:
    """Not finished and not being deleted: counts towards ``status.active``."""
    return not is_terminal(pod) and deletion_timestamp(pod) is None


def is_terminating(pod: Obj) -> bool:
    return not is_terminal(pod) and deletion_timestamp(pod) is not None


def pod_condition(pod: Obj, ctype: str) -> Obj | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            cond: Obj = c
            return cond
    return None


def is_ready(pod: Obj) -> bool:
    c = pod_condition(pod, "Ready")
    return c is not None and c.get("status") == "True"


def completion_index(pod: Obj) -> int:
    """The pod's index from its annotation; anything unusable is ``UNKNOWN_INDEX``."""
    i = atoi(annotations_of(pod).get(COMPLETION_INDEX_KEY))
    return i if i is not None and i >= 0 else UNKNOWN_INDEX


def parse_int32_annotation(pod: Obj, key: str) -> int:
    """A non-negative int32 annotation value; malformed or hostile values read as 0."""
    i = atoi(annotations_of(pod).get(key))
    return i if i is not None and 0 <= i <= INT32_MAX else 0


def index_failure_count(pod: Obj) -> int:
    return parse_int32_annotation(pod, INDEX_FAILURE_COUNT_KEY)


def index_ignored_failure_count(pod: Obj) -> int:
    return parse_int32_annotation(pod, INDEX_IGNORED_FAILURE_COUNT_KEY)


def index_absolute_failure_count(pod: Obj) -> int:
    return index_failure_count(pod) + index_ignored_failure_count(pod)


# -- jobs -------------------------------------------------------------------------------------

def spec(job: Obj) -> Obj:
    s: Obj = job.get("spec") or {}
    return s


def status(job: Obj) -> Obj:
    """The Job's status for reading; a fresh empty dict (not stored on the Job) when it has none."""
    s = job.get("status")
    return s if isinstance(s, dict) else {}


def status_for_update(job: Obj) -> Obj:
    """The Job's status for writing in place: created on the (private copy of the) Job when missing."""
    s = job.get("status")
    if not isinstance(s, dict):
        s = job["status"] = {}
    return s


def completion_mode(job: Obj) -> str:
    return str(spec(job).get("completionMode") or NON_INDEXED)


def is_indexed(job: Obj) -> bool:
    return spec(job).get("completionMode") == INDEXED


def completions(job: Obj) -> int | None:
    c = spec(job).get("completions")
    return None if c is None else int(c)


def parallelism(job: Obj) -> int:
    p = spec(job).get("parallelism")
    return 1 if p is None else int(p)


def backoff_limit(job: Obj) -> int:
    b = spec(job).get("backoffLimit")
    if b is None:
        return INT32_MAX if spec(job).get("backoffLimitPerIndex") is not None else 6
    return int(b)


def has_backoff_limit_per_index(job: Obj) -> bool:
    return spec(job).get("backoffLimitPerIndex") is not None


def suspended(job: Obj) -> bool:
    return bool(spec(job).get("suspend"))


def pod_failure_policy(job: Obj) -> Obj | None:
    p: Obj | None = spec(job).get("podFailurePolicy")
    return p


def only_replace_failed_pods(job: Obj) -> bool:
    """Replacement waits for a pod to be fully Failed, not just terminating.

    True with ``podReplacementPolicy: Failed`` and whenever a pod failure policy is set
    (the policy needs the final pod status to match against).
    """
    return spec(job).get("podReplacementPolicy") == "Failed" or pod_failure_policy(job) is not None


def condition_true(job: Obj, ctype: str) -> bool:
    """Whether the Job's *first* condition of ``ctype`` is True (upstream's lookup)."""
    return found_true(job_conditions(job), ctype)


def managed_by_external(job: Obj) -> str | None:
    """The foreign controller's name when ``spec.managedBy`` hands the Job to someone else."""
    v = spec(job).get("managedBy")
    if v is None or v == JOB_CONTROLLER_NAME:
        return None
    return str(v)
