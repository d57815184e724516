"""The upstream Job controller's metrics, same names, labels and buckets.

Dashboards and alerts written for kube-controller-manager's ``job_controller_*`` family
keep working when this controller runs instead.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from builtin_controller import fields
from jobapi.intervals import count
from kruntime.metrics import event_loop_lag
from kruntime.resources import Obj

SYNC_DURATION = Histogram(
    "job_controller_job_sync_duration_seconds", "The time it took to sync a job",
    ["completion_mode", "result", "action"],
    buckets=[0.004 * 2**i for i in range(15)],
)
SYNCS = Counter("job_controller_job_syncs", "The number of job syncs", ["completion_mode", "result", "action"])
JOBS_FINISHED = Counter("job_controller_jobs_finished", "The number of finished jobs",
                        ["completion_mode", "result", "reason"])
JOBS_BY_EXTERNAL_CONTROLLER = Counter("job_controller_jobs_by_external_controller",
                                      "The number of Jobs managed by an external controller", ["controller_name"])
PODS_FINISHED = Counter("job_controller_job_pods_finished", "The number of finished Pods that are fully tracked",
                        ["completion_mode", "result"])
POD_FAILURES_HANDLED_BY_FAILURE_POLICY = Counter(
    "job_controller_pod_failures_handled_by_failure_policy",
    "The number of failed Pods handled by failure policy with respect to the failure policy action applied based on "
    "the matched rule.", ["action"])
TERMINATED_PODS_TRACKING_FINALIZER = Counter(
    "job_controller_terminated_pods_tracking_finalizer",
    "The number of terminated pods (phase=Failed|Succeeded) that have the finalizer batch.kubernetes.io/job-tracking",
    ["event"])
FINISHED_INDEXES = Counter("job_controller_job_finished_indexes", "The number of finished indexes",
                           ["status", "backoffLimit"])
PODS_CREATION = Counter("job_controller_job_pods_creation",
                        "The number of Pods created by the Job controller labelled with a reason for the Pod creation",
                        ["reason", "status"])
#: Upstream's since 1.36 (StaleControllerConsistencyJob); ours counts the syncs deferred by the
#: stale-cache guard, which every release's semantics use (DEVIATIONS.md, item 2).
STALE_SYNC_SKIPS = Counter("job_controller_stale_sync_skips",
                           "Total number of Job syncs skipped due to a stale watch cache.", ["group", "resource"])
#: ours, not upstream's (kube-controller-manager has none), under the same prefix
EVENT_LOOP_LAG = event_loop_lag("job_controller")

# Sync action label values.
ACTION_RECONCILING = "reconciling"
ACTION_TRACKING = "tracking"
ACTION_PODS_CREATED = "pods_created"
ACTION_PODS_DELETED = "pods_deleted"


def _finished_with_finalizer(pod: Obj | None) -> bool:
    return pod is not None and fields.is_terminal(pod) and fields.has_tracking_finalizer(pod)


def record_finished_pod_with_finalizer(old: Obj | None, new: Obj | None) -> None:
    """Count terminated pods gaining ("add") or losing ("delete") the tracking finalizer."""
    was, now = _finished_with_finalizer(old), _finished_with_finalizer(new)
    if was != now:
        TERMINATED_PODS_TRACKING_FINALIZER.labels("add" if now else "delete").inc()


def record_pods_finished(job: Obj, old_status: Obj) -> None:
    """Pods that moved into the counters between ``old_status`` and the Job's status now."""
    mode = fields.completion_mode(job)
    st = fields.status(job)
    diff = 0
    if fields.is_indexed(job):
        completions = fields.completions(job) or 0
        old_ci, new_ci = old_status.get("completedIndexes") or "", st.get("completedIndexes") or ""
        if new_ci != old_ci:
            diff = count(new_ci, completions) - count(old_ci, completions)
        label = "perIndex" if fields.has_backoff_limit_per_index(job) else "global"
        if diff > 0:
            FINISHED_INDEXES.labels("succeeded", label).inc(diff)
        if fields.has_backoff_limit_per_index(job) and st.get("failedIndexes") != old_status.get("failedIndexes"):
            fdiff = count(st.get("failedIndexes"), completions) - count(old_status.get("failedIndexes"), completions)
            if fdiff > 0:
                FINISHED_INDEXES.labels("failed", label).inc(fdiff)
    else:
        diff = int(st.get("succeeded") or 0) - int(old_status.get("succeeded") or 0)
    if diff > 0:
        PODS_FINISHED.labels(mode, "succeeded").inc(diff)
    fdiff = int(st.get("failed") or 0) - int(old_status.get("failed") or 0)
    if fdiff > 0:
        PODS_FINISHED.labels(mode, "failed").inc(fdiff)


def record_pods_created(job: Obj, failed: int, terminating: int, ok: int, errors: int) -> None:
    if fields.spec(job).get("podReplacementPolicy", "TerminatingOrFailed") == "Failed" and failed > 0:
        reason = "recreate_failed"
    elif failed > 0 or terminating > 0:
        reason = "recreate_terminating_or_failed"
    else:
        reason = "new"
    if ok > 0:
        PODS_CREATION.labels(reason, "succeeded").inc(ok)
    if errors > 0:
        PODS_CREATION.labels(reason, "failed").inc(errors)
