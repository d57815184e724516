"""Every event the mirror controller writes on a manager object: one table, used by the code and the docs.

The reconciler and the worker-event mirror take their reason and type from here, and
``python -m refdocs`` renders the same rows into docs/reference/events.md, so the
reference cannot list a reason the controller never writes, nor miss one it does. Reason
strings are API: users filter on them (``kubectl get events --field-selector reason=…``)
and alerts and tests name them, so change one only deliberately.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EventType = Literal["Normal", "Warning"]
NORMAL: EventType = "Normal"
WARNING: EventType = "Warning"


@dataclass(frozen=True)
class EventReason:
    """One event reason: what it is called, its type, when it is written and what to do about it."""

    reason: str
    type: EventType
    when: str
    action: str


REDISPATCHED = EventReason(
    "Redispatched", NORMAL,
    "The Job moved to another worker: its worker was lost for `workerLostTimeout`, or went away before "
    "the copy was ever sent.",
    "Nothing for the Job; find out why the old worker was lost (alert JobmirrorWorkerDown).")
PLACEMENT_MOVED = EventReason(
    "PlacementMoved", NORMAL,
    "The worker entry was renamed in the configuration and the running copy was found under the new name; "
    "the placement annotation now names it.",
    "Nothing: the copy keeps running, nothing is re-created.")
WAITING_FOR_ROOM = EventReason(
    "WaitingForRoom", NORMAL,
    "RoomAware: workers could run the Job's pods but none has room now (or an older waiting Job holds it); "
    "the Job waits in the manager and is placed when room appears. Once per wait.",
    "Wait, or add capacity; gauge `jobmirror_jobs_waiting_for_room` counts such Jobs.")
WAITING_FOR_QUOTA = EventReason(
    "WaitingForQuota", NORMAL,
    "Placing the Job now would take its tenant past its quota across the fleet (`scheduling.tenants[].quota`); "
    "the message names each resource. The Job waits in the manager and is looked at again as soon as a Job "
    "of its tenant ends. Once per wait.",
    "Wait, or raise the tenant's quota (takes effect at the controller's restart).")
EXCEEDS_QUOTA = EventReason(
    "ExceedsQuota", WARNING,
    "The Job alone asks more than its tenant's whole quota (or the quota allows 0 Jobs): it can never be placed.",
    "Lower the Job's requests or parallelism, or raise the tenant's quota.")
UNKNOWN_PRIORITY_CLASS = EventReason(
    "UnknownPriorityClass", WARNING,
    "scheduling.order FairShare: the Job's pods name a priorityClassName that is not a PriorityClass of the "
    "manager cluster; it waits in line at the default priority (the globalDefault class's value, else 0). "
    "Once per wait.",
    "Create the PriorityClass on the manager (and on the workers: their pods need it), or fix the name.")
HEAD_OF_LINE_HOLD_ENDED = EventReason(
    "HeadOfLineHoldEnded", NORMAL,
    "RoomAware: the Job, first in line for a worker, has waited for room for `headOfLineHold`: it no longer "
    "holds that worker against Jobs created after it (they may take room there); it still waits and is placed "
    "when room for it appears. Once per wait.",
    "Nothing, or add capacity; if the Job can never find room there (a port or resource its nodes never free), "
    "change its pod.")
NO_WORKER = EventReason(
    "NoWorker", WARNING,
    "No worker can take the Job now (none healthy, a pin to an unknown or unhealthy worker, a worker-selector "
    "that no worker matches or cannot be parsed, or a pin or selector naming only workers the Job's namespace "
    "may not use: `workers[].access`, the message names the rule). Written again only when the message changes.",
    "Read the message; fix the pin or selector annotation, the unhealthy workers, or ask for access.")
NO_WORKER_FITS = EventReason(
    "NoWorkerFits", WARNING,
    "RoomAware: no candidate worker has a node that could ever hold the Job's pod; the message names each "
    "worker and why.",
    "Lower the pod's requests, fix its nodeSelector/tolerations, or add a worker with such nodes.")
WORKER_NOT_CONFIGURED = EventReason(
    "WorkerNotConfigured", WARNING,
    "The Job is placed on a worker entry that is no longer in the configuration (once per Job). It is "
    "re-dispatched only after `workerLostTimeout` since this controller started.",
    "Configure the worker again (its copy is then deleted as stale), or delete the copy there by hand.")
WORKER_LOST = EventReason(
    "WorkerLost", WARNING,
    "The Job's worker has been unreachable (or unconfigured) for longer than `workerLostTimeout`.",
    "Check the worker (alert JobmirrorWorkerDown); the Job is re-dispatched or, if decided, finished.")
NAMESPACE_NOT_ALLOWED = EventReason(
    "NamespaceNotAllowed", WARNING,
    "The Job's namespace is not in `workerNamespaces` (`default` and `kube-*` only when named there): no copy "
    "is made.",
    "Add the namespace (or a pattern) to `workerNamespaces`, or run the Job elsewhere.")
NAMESPACE_WEAKER = EventReason(
    "NamespaceWeaker", WARNING,
    "The Job's namespace exists on the worker but enforces a weaker Pod Security level than on the manager "
    "(unlabelled counts as privileged), or its level could not be read: no copy is made there; an unpinned Job "
    "is placed on another worker.",
    "Label the worker's namespace `pod-security.kubernetes.io/enforce` with at least the manager namespace's "
    "level, or pin the Job to a worker whose namespace does.")
NAMESPACE_MISSING = EventReason(
    "NamespaceMissing", WARNING,
    "The namespace is missing on the worker and `missingNamespace: Report`, or it could not be created "
    "(the manager namespace could not be read).",
    "Create the namespace on the worker, or set `missingNamespace: Create`.")
WORKER_REFUSED = EventReason(
    "WorkerRefused", WARNING,
    "The worker refused a create, spec patch or delete of the copy with a 4xx (quota, admission, terminating "
    "namespace, invalid); the message has the server's answer.",
    "Fix what the worker's message names; an unpinned Job is placed elsewhere, else retried with backoff.")
WORKER_DROPPED_FIELDS = EventReason(
    "WorkerDroppedFields", WARNING,
    "The worker's answer to the create lacked spec fields that were sent (an older Kubernetes): the copy "
    "would run with other semantics, so it was deleted; that worker is skipped for the Job for an hour.",
    "Upgrade the worker, or pin the Job to a worker that knows those fields.")
COPY_RECREATED = EventReason(
    "CopyRecreated", NORMAL,
    "The worker refused to rewrite a suspended copy's pod template, so the copy was deleted and created "
    "again from the manager's template; no pods ran in between.",
    "Nothing.")
REPLACED = EventReason(
    "Replaced", NORMAL,
    "RoomAware: a copy that could not schedule any pod for `unschedulableTimeout` (none ever bound, none "
    "finished) was deleted and the Job placed on another worker with room; the old worker is avoided for "
    "the Job for 5 minutes.",
    "Nothing; if it repeats, look at what the room fit does not model (inter-pod affinity, topology spread).")
NAME_COLLISION = EventReason(
    "NameCollision", WARNING,
    "The worker holds a Job of the same name that is not this Job's copy; it is never touched.",
    "Rename or remove the other Job on the worker; an unpinned Job is placed elsewhere meanwhile.")
REMOTE_DELETED = EventReason(
    "RemoteDeleted", NORMAL,
    "The copy was deleted on its worker because the Job was deleted (the message names the propagation), "
    "or a copy that is not the Job's current one went (stale, moved, re-created). Not written for the "
    "normal cleanup after the Job finished: its Complete/Failed condition says that.",
    "Nothing.")
FINALIZER_RELEASED = EventReason(
    "FinalizerReleased", NORMAL,
    "This installation no longer claims the Job (`namespaces` narrowed or `controllerName` changed) and "
    "released its finalizer; the copy is left as it is.",
    "Delete the copy, or let the new owner decide.")
FINISHED_WITHOUT_COPY = EventReason(
    "FinishedWithoutCopy", WARNING,
    "The Job's outcome was already decided (SuccessCriteriaMet or FailureTarget) and its copy vanished, so "
    "the Job was finished from the last mirrored status instead of being run again.",
    "Nothing for the Job; find out why the copy vanished (deleted on the worker, or the worker lost).")
COPY_LEFT_FOR_GC = EventReason(
    "CopyLeftForGC", WARNING,
    "A deleted Job's finalizer was released while its copy's worker was unreachable past "
    "`workerLostTimeout` (or is no longer configured); GC deletes the copy once the worker answers.",
    "Nothing if the worker returns; otherwise delete the copy there by hand.")
STATUS_REJECTED = EventReason(
    "StatusRejected", WARNING,
    "The manager's API server refused the mirrored status (403/422); retried with backoff.",
    "See the runbook of alert JobmirrorStatusWritesRejected: usually an admission policy or webhook on "
    "jobs/status.")
STALE_COPY_OUTCOME_USED = EventReason(
    "StaleCopyOutcomeUsed", NORMAL,
    "A copy that finished on a worker lost during a partition came back; its outcome finished the Job "
    "(nothing had decided it yet) and both copies were deleted.",
    "Nothing.")
COPY_UNSCHEDULABLE = EventReason(
    "CopyUnschedulable", WARNING,
    "A pod of the copy has been unschedulable on its worker for longer than `unschedulableTimeout` (once "
    "per episode). With RoomAware an unpinned copy that never started is then moved (`Replaced`).",
    "Follow the troubleshooting flow: `kubectl jobmirror describe` shows the scheduler's message.")
WORKER_WARNING = EventReason(
    "WorkerWarning", WARNING,
    "A Warning event of the copy or its pods on the worker had no reason; mirrored under this one. Warnings "
    "with a reason (FailedCreate, FailedScheduling, BackOff, …) keep theirs; the message names the worker.",
    "Read the message; `kubectl jobmirror describe` lists the worker's events.")
COPY_STUCK = EventReason(
    "CopyStuck", WARNING,
    "The copy made no progress on its worker past a phase's deadline (once per phase): no pod after "
    "`progress.podsCreatedTimeout` (the worker's FailedCreate message, or no pod and no status from its Job "
    "controller), or bound pods whose containers never started after `progress.containerStartTimeout` (the "
    "kubelet's reason: ErrImagePull, CreateContainerConfigError, FailedMount, ...).",
    "Read the worker's message in the event: fix that worker (quota, image, Secret, its Job controller) or let "
    "the Job move (unpinned, nothing ran). See the Stuck copies section of the concepts page.")
COPY_NOT_MOVED = EventReason(
    "CopyNotMoved", WARNING,
    "A stuck copy (see CopyStuck) stays where it is: the Job was moved `progress.maxMoves` times already, or "
    "every worker it may use failed it the same way (an image that exists nowhere). Once per cause, naming "
    "every worker that failed it so and the newest worker's words.",
    "Fix the cause the message names (push the image, create the Secret, raise the quota) — the copy then "
    "starts where it is — or delete the Job.")

#: Every reason the mirror controller writes, in the order the reference lists them.
ALL: tuple[EventReason, ...] = (
    REDISPATCHED, PLACEMENT_MOVED, WAITING_FOR_ROOM, HEAD_OF_LINE_HOLD_ENDED, NO_WORKER, NO_WORKER_FITS,
    WORKER_NOT_CONFIGURED,
    WORKER_LOST, NAMESPACE_NOT_ALLOWED, NAMESPACE_WEAKER, NAMESPACE_MISSING, WORKER_REFUSED, WORKER_DROPPED_FIELDS,
    COPY_RECREATED,
    REPLACED, NAME_COLLISION, REMOTE_DELETED, FINALIZER_RELEASED, FINISHED_WITHOUT_COPY, COPY_LEFT_FOR_GC,
    STATUS_REJECTED, STALE_COPY_OUTCOME_USED, COPY_UNSCHEDULABLE, COPY_STUCK, COPY_NOT_MOVED, WORKER_WARNING,
    WAITING_FOR_QUOTA, EXCEEDS_QUOTA, UNKNOWN_PRIORITY_CLASS,
)

BY_REASON: dict[str, EventReason] = {e.reason: e for e in ALL}
