"""Names, reasons and small accessors over raw Job and Pod dicts.

Objects stay plain JSON dicts end to end (see ``kruntime.client``), so the handful of
questions every module asks of them ("is this pod active?", "which index is it?")
live here once, with the API's defaulting rules spelled out where a field may be absent.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kruntime.resources import Obj

# -- well-known names (batch/v1) -------------------------------------------------------------

JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
JOB_CONTROLLER_NAME = "kubernetes.io/job-controller"
COMPLETION_INDEX_KEY = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT_KEY = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT_KEY = "batch.kubernetes.io/job-index-ignored-failure-count"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"

NON_INDEXED = "NonIndexed"
INDEXED = "Indexed"

# Condition types.
COMPLETE = "Complete"
FAILED = "Failed"
SUSPENDED = "Suspended"
FAILURE_TARGET = "FailureTarget"
SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"

# Condition reasons, as the upstream controller writes them.
REASON_POD_FAILURE_POLICY = "PodFailurePolicy"
REASON_BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"
REASON_MAX_FAILED_INDEXES_EXCEEDED = "MaxFailedIndexesExceeded"
REASON_FAILED_INDEXES = "FailedIndexes"
REASON_SUCCESS_POLICY = "SuccessPolicy"
REASON_COMPLETIONS_REACHED = "CompletionsReached"
REASON_JOB_SUSPENDED = "JobSuspended"
REASON_JOB_RESUMED = "JobResumed"

MSG_BACKOFF_LIMIT = "Job has reached the specified backoff limit"
MSG_DEADLINE = "Job was active longer than specified deadline"
MSG_MAX_FAILED_INDEXES = "Job has exceeded the specified maximal number of failed indexes"
MSG_FAILED_INDEXES = "Job has failed indexes"
MSG_COMPLETIONS_REACHED = "Reached expected number of succeeded pods"

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
INT32_MAX = 2**31 - 1


# -- time -------------------------------------------------------------------------------------

def utcnow() -> datetime:
    return datetime.now(UTC)


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 from the API (seconds or fractional) to an aware datetime; junk gives None."""
    if not value or not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def format_time(t: datetime) -> str:
    """The API's own serialisation of metav1.Time: whole seconds, UTC, ``Z``."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- metadata ---------------------------------------------------------------------------------

def md(obj: Obj) -> Obj:
    m: Obj = obj.get("metadata") or {}
    return m


def uid(obj: Obj) -> str:
    return str(md(obj).get("uid", ""))


def name(obj: Obj) -> str:
    return str(md(obj).get("name", ""))


def namespace(obj: Obj) -> str:
    return str(md(obj).get("namespace", ""))


def deletion_timestamp(obj: Obj) -> str | None:
    v = md(obj).get("deletionTimestamp")
    return str(v) if v else None


def controller_ref(obj: Obj) -> Obj | None:
    for ref in md(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            r: Obj = ref
            return r
    return None


def annotations_of(obj: Obj) -> dict[str, str]:
    a: dict[str, str] = md(obj).get("annotations") or {}
    return a


def labels_of(obj: Obj) -> dict[str, str]:
    lb: dict[str, str] = md(obj).get("labels") or {}
    return lb


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
    v = annotations_of(pod).get(COMPLETION_INDEX_KEY)
    if v is None:
        return UNKNOWN_INDEX
    try:
        i = int(v, 10)
    except ValueError:
        return UNKNOWN_INDEX
    return i if i >= 0 else UNKNOWN_INDEX


def parse_int32_annotation(pod: Obj, key: str) -> int:
    """A non-negative int32 annotation value; malformed or hostile values read as 0."""
    v = annotations_of(pod).get(key)
    if v is None:
        return 0
    try:
        i = int(v, 10)
    except ValueError:
        return 0
    return i if 0 <= i <= INT32_MAX else 0


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
    s: Obj = job.setdefault("status", {})
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


def condition(job: Obj, ctype: str) -> Obj | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            cond: Obj = c
            return cond
    return None


def condition_true(job: Obj, ctype: str) -> bool:
    c = condition(job, ctype)
    return c is not None and c.get("status") == "True"


def is_finished(job: Obj) -> bool:
    return condition_true(job, COMPLETE) or condition_true(job, FAILED)


def managed_by_external(job: Obj) -> str | None:
    """The foreign controller's name when ``spec.managedBy`` hands the Job to someone else."""
    v = spec(job).get("managedBy")
    if v is None or v == JOB_CONTROLLER_NAME:
        return None
    return str(v)
