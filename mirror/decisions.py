"""The reconciler's decisions, as pure functions of a kind, the manager object and its copies.

``mirror.reconciler`` reads caches, asks these what to do, and performs the writes. Keeping
the choices here (and the kind-specific parts behind :class:`mirror.kinds.MirroredKind`)
makes the path testable without a cluster and for any kind.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from jobapi.objects import annotations_of
from kruntime.resources import Obj
from mirror.identity import is_copy_of
from mirror.kinds import MirroredKind
from mirror.naming import (
    ANNOTATION_CLAIMED_BY,
    ANNOTATION_CLUSTER,
    ANNOTATION_DELETE_PROPAGATION,
    ANNOTATION_REMOTE_NAME,
    holds_finalizer,
)


@dataclass(frozen=True)
class Placement:
    """Where the manager object is recorded to run (``worker`` None: not placed yet)."""

    worker: str | None
    remote_name: str


def placement_of(obj: Obj) -> Placement:
    ann = annotations_of(obj)
    return Placement(ann.get(ANNOTATION_CLUSTER), ann.get(ANNOTATION_REMOTE_NAME) or obj["metadata"]["name"])


class Step(StrEnum):
    """The first thing one reconcile pass does for a claimed manager object."""

    FINALIZE = "finalize"  # being deleted: delete every copy, then release the finalizer
    FINISH = "finish"  # finished: delete the copies (or keep them) and release the finalizer
    CONFIRM_PLACEMENT = "confirm-placement"  # a copy exists off the recorded placement: re-read, then clean up
    HOLD = "hold"  # not placed and suspended: no copy, only our own status bookkeeping
    PLACE = "place"  # not placed: choose a worker and record it
    SYNC = "sync"  # placed: create the copy if missing, propagate spec, mirror status


def decide(kind: MirroredKind, obj: Obj, placement: Placement, copies_on: Iterable[str]) -> Step:
    """What to do for ``obj`` given where it is placed and which workers hold a copy of it."""
    if obj["metadata"].get("deletionTimestamp"):
        return Step.FINALIZE
    if kind.is_finished(obj):
        return Step.FINISH
    if any(name != placement.worker for name in copies_on):
        return Step.CONFIRM_PLACEMENT
    return decide_placed(kind, obj, placement)


def stale_outcome_from(kind: MirroredKind, obj: Obj, placement: Placement, copies: Mapping[str, Obj],
                       now: datetime) -> str | None:
    """The worker whose stale copy's outcome the manager should take, or None.

    A copy left on a worker off the placement (lost, then back) that finished while it was
    away ran the workload to an end: unless the manager is already decided (finished, or
    ``SuccessCriteriaMet``/``FailureTarget``) or the placed copy has finished too, that
    outcome is used rather than discarded with the stale copy (running it again is worse).
    """
    if kind.is_finished(obj) or kind.decided_status(obj, now) is not None:
        return None
    placed = copies.get(placement.worker or "")
    if placed is not None and kind.is_finished(placed):
        return None
    done = sorted(name for name, c in copies.items() if name != placement.worker and kind.is_finished(c))
    return done[0] if done else None


def decide_placed(kind: MirroredKind, obj: Obj, placement: Placement) -> Step:
    """The rest of :func:`decide`, once the copies agree with the placement."""
    if placement.worker is None:
        return Step.HOLD if kind.is_suspended(obj) else Step.PLACE
    return Step.SYNC


@dataclass(frozen=True)
class CopyPlan:
    """What to do to a copy that exists on the placed worker."""

    collision: bool = False  # not ours: leave it alone and say so
    spec_patch: Obj | None = None  # merge patch for the copy's mutable spec


def plan_copy(kind: MirroredKind, manager: Obj, remote: Obj, *, origin: str) -> CopyPlan:
    if not is_copy_of(kind.name, remote, manager, origin=origin):
        return CopyPlan(collision=True)
    return CopyPlan(spec_patch=kind.spec_patch(manager, remote))


def status_to_write(kind: MirroredKind, manager: Obj, remote: Obj | None, now: datetime) -> Obj | None:
    """The manager status to write, or None when the stored one already says it."""
    desired = kind.desired_status(manager, remote, now)
    return desired if kind.status_differs(manager.get("status") or {}, desired) else None


class CollisionAction(StrEnum):
    """What to do when the placed worker already has an object of that name that is not our copy."""

    REPLACE = "replace"  # choose another worker for this Job (the colliding one is excluded for it)
    REPORT = "report"  # stay, leave the object alone, say so and look again with backoff


def collision_action(*, pinned: bool, same_workload: bool) -> CollisionAction:
    """Unpinned Jobs move on; a pinned Job may only run where it is pinned.

    ``same_workload``: the object carries this manager Job's uid (our copy under another
    origin value, e.g. after ``origin`` changed). It runs our workload already, so placing
    the Job elsewhere would run it twice.
    """
    return CollisionAction.REPORT if pinned or same_workload else CollisionAction.REPLACE


#: the longest wait between two looks at a collision or a refusal (seconds)
RETRY_CAP = 300.0


def retry_delay(reports: int, *, base: float, cap: float = RETRY_CAP) -> float:
    """Seconds until a reported collision (or refusal) is looked at again: doubling from ``base``, at most ``cap``."""
    return float(min(cap, base * 2 ** max(0, reports - 1)))


def cleanup_waits_for(down_for: float, *, worker_lost_timeout: float) -> bool:
    """Whether a deleted object's finalizer still waits for its copy on a worker down ``down_for`` s.

    Deletion never hangs forever: past ``workerLostTimeout`` the copy is left for GC (which
    deletes it when the worker answers, since its manager object is then gone).
    """
    return down_for < worker_lost_timeout


def release_unclaimed(obj: Obj, *, claimed: bool, claimed_in_any_namespace: bool, origin: str) -> bool:
    """Whether to remove our finalizer from ``obj`` because this installation no longer claims it.

    Ours to release: stamped with our ``origin`` when we added it, or (objects finalized before
    the stamp) claimed by our ``controllerName`` but in a namespace we no longer watch. Another
    installation's objects carry its own origin and are never touched.
    """
    if claimed or not holds_finalizer(obj):
        return False
    stamp = annotations_of(obj).get(ANNOTATION_CLAIMED_BY)
    if stamp is not None:
        return stamp == origin
    return claimed_in_any_namespace


PROPAGATIONS = ("Orphan", "Foreground", "Background")


def copy_propagation(obj: Obj) -> str:
    """How to delete the copy of a deleted manager object: its ``delete-propagation`` annotation.

    ``Orphan`` leaves the copy's pods running on the worker; ``Foreground`` deletes them before
    the copy, and the manager object waits for that; anything else is ``Background``. Not read
    from ``kubectl delete --cascade``: the manager's garbage collector removes the ``orphan`` /
    ``foregroundDeletion`` finalizer from a Job without dependents within milliseconds, so a
    controller sees it only sometimes, and a choice that depends on a race is worse than none.
    """
    value = annotations_of(obj).get(ANNOTATION_DELETE_PROPAGATION, "")
    return value if value in PROPAGATIONS else "Background"


#: seconds a worker that refused a Job's copy is skipped when placing that Job again
REFUSAL_EXCLUSION = 300.0
#: seconds a worker that dropped fields of a Job's copy (older API server) is skipped for that Job:
#: its version changes only with an upgrade, so retrying it every few minutes would only churn copies
SKEW_EXCLUSION = 3600.0


def is_refusal(status: int, *, missing_namespace: bool = False) -> bool:
    """True for a worker's definite "no" to one object (quota, admission, terminating namespace, 422).

    Transport errors, 5xx and 429 are the worker's trouble, not a verdict on the object, and
    401 is its credentials; 409 (exists / conflict) and a missing namespace have their own paths.
    """
    return 400 <= status < 500 and status not in (401, 408, 409, 429) and not missing_namespace


class RefusalAction(StrEnum):
    """What to do after a worker refused to create a Job's copy."""

    REPLACE = "replace"  # place the Job on another healthy worker (the refusing one excluded for a while)
    RETRY = "retry"  # stay and retry there with backoff, saying so


def refusal_action(*, pinned: bool, alternative: bool) -> RefusalAction:
    """Unpinned Jobs move when another worker can take them; pinned ones only run where pinned."""
    return RefusalAction.REPLACE if alternative and not pinned else RefusalAction.RETRY


def refusal_exclusions(until: Mapping[str, float], now: float) -> frozenset[str]:
    """The workers still excluded at ``now`` (monotonic seconds), from each one's exclusion deadline."""
    return frozenset(name for name, deadline in until.items() if deadline > now)


def adoption_target(placed: str | None, configured: Collection[str], live_copies: Iterable[str]) -> str | None:
    """The configured worker whose live copy becomes the placement, or None to keep the recorded one.

    Only when the recorded placement is missing or names a worker no longer configured: a
    copy found on a configured worker is then our running workload (a renamed worker entry
    for the same cluster, or a removed annotation), so the placement moves to it instead of
    the copy being deleted and the Job run a second time.
    """
    if placed is not None and placed in configured:
        return None
    live = sorted(live_copies)
    return live[0] if live else None


class LostStep(StrEnum):
    """What a pass does for a Job whose placed worker is unhealthy or no longer configured."""

    MOVE_NOW = "move-now"  # nothing was ever sent there: place the Job elsewhere at once
    WAIT = "wait"  # keep the last mirrored status; look again when workerLostTimeout could expire
    FINISH_DECIDED = "finish-decided"  # lost past the timeout with a decided outcome: finish from it
    MOVE = "move"  # lost past the timeout: place elsewhere; the copy there is deleted when it answers


@dataclass(frozen=True)
class Lost:
    step: LostStep
    #: WAIT: seconds until the next look
    recheck_in: float = 0.0
    #: WAIT on a worker that is not configured: tell the user once (a WorkerNotConfigured event)
    say_unconfigured: bool = False


def lost_worker(*, configured: bool, never_sent: bool, down_for: float, worker_lost_timeout: float,
                decided: bool, resync: float, unconfigured_said: bool) -> Lost:
    """The rule for a Job placed on a worker that does not answer (or is not configured).

    ``never_sent``: the worker's synced cache has no copy and this process never sent a create,
    so nothing runs there and the Job moves at once. Otherwise a copy may be running: the Job
    keeps its last mirrored status until ``workerLostTimeout``, then a decided outcome is final
    (finished from its last status, never run again) and an undecided Job runs elsewhere.
    """
    if configured and never_sent:
        return Lost(LostStep.MOVE_NOW)
    if down_for < worker_lost_timeout:
        return Lost(LostStep.WAIT, recheck_in=min(resync, worker_lost_timeout - down_for + 0.5),
                    say_unconfigured=not configured and not unconfigured_said)
    return Lost(LostStep.FINISH_DECIDED if decided else LostStep.MOVE)


@dataclass(frozen=True)
class WorkerState:
    """What a pass (and the cleanup rule) knows of one configured worker, for one Job."""

    healthy: bool
    unhealthy_for: float = 0.0
    #: its copy cache has listed at least once (a miss there means no copy)
    synced: bool = True
    #: this process sent a create for the Job there that the cache may not show yet
    attempted: bool = False
    #: no copy can be there: its synced cache shows none and this process never sent a create
    never_sent: bool = False


@dataclass(frozen=True)
class Cleanup:
    """How a finished or deleted Job lets go of its copies before its finalizer is released."""

    #: workers whose copy (seen in the cache) is deleted now
    delete: tuple[str, ...] = ()
    #: workers lost past workerLostTimeout whose copy of a deleted Job is left for GC
    left_for_gc: tuple[str, ...] = ()
    #: workers to ask directly: the cache shows no copy there, but one may exist (the placed worker's
    #: cache lags our create or has not synced; a worker the Job moved off got a create whose answer was lost)
    confirm: tuple[str, ...] = ()
    #: a copy may sit on an unreachable worker: keep the finalizer and look again
    blocked: bool = False


def plan_cleanup(copies_on: Iterable[str], placed: str | None, workers: Mapping[str, WorkerState], *,
                 deleted: bool, worker_lost_timeout: float) -> Cleanup:
    """Which copies to delete, which to leave for GC, and which workers must be asked directly.

    A finished Job waits for every worker; a deleted one stops waiting for a worker lost past
    ``workerLostTimeout`` (:func:`cleanup_waits_for`), so deletion never hangs forever.
    """
    def gives_up_on(w: WorkerState) -> bool:
        return deleted and not w.healthy and not cleanup_waits_for(w.unhealthy_for,
                                                                   worker_lost_timeout=worker_lost_timeout)

    def may_hide_a_copy(name: str, w: WorkerState) -> bool:
        if name == placed:
            return not (w.synced and not w.attempted)
        return w.attempted  # a create sent before the Job moved: its answer may have been lost

    copies = sorted(copies_on)
    left = [name for name in copies if gives_up_on(workers[name])]
    delete = [name for name in copies if name not in left]
    confirm: list[str] = []
    blocked = False
    for name, w in sorted(workers.items()):
        if name in copies or not may_hide_a_copy(name, w):
            continue
        if gives_up_on(w):
            left.append(name)
        elif not w.healthy:
            blocked = True
        else:
            confirm.append(name)
    return Cleanup(tuple(delete), tuple(sorted(left)), tuple(confirm), blocked)


def lost_for(unhealthy_for: float | None, *, configured_for: float) -> float:
    """Seconds a placement's worker counts as lost, compared with ``workerLostTimeout``.

    ``unhealthy_for`` None: the worker is not in the configuration (removed or renamed). It
    counts from when this process loaded the configuration, so removing a worker never
    re-dispatches its Jobs at once (a restart restarts the clock: later, never earlier).
    """
    return configured_for if unhealthy_for is None else unhealthy_for


def routine_cleanup(reason: str, propagation: str) -> bool:
    """Whether deleting a copy is the normal end of a finished Job, which no event announces.

    The Job's own terminal condition already tells the user it is over; an event per Job saying
    its copy went cost a manager call per Job (issue 23). A copy deleted for any other reason
    (the Job deleted, a stale or moved copy, a re-creation) is still evented.
    """
    return reason == "finished" and propagation == "Background"


def says_something_new(previous: str | None, message: str) -> bool:
    """Whether a condition that holds pass after pass (e.g. ``NoWorker``) is evented again.

    Once per Job while the message stays the same, so a backlog of unplaceable Jobs does not
    write an event per Job per resync; a changed reason (a pinned worker now configured but
    unhealthy) is news. Messages carry no changing durations, so "the same" means same reason.
    """
    return previous != message
