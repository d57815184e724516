"""One reconcile pass as a plan: what is known about one manager object (a :class:`Group`), and
the next thing to do about it (:func:`next_action`) — pure, so a table test drives it.

The reconciler reads the group once from its caches and memory, asks for the next action,
performs it, folds what the action learned back into the group (the written object, the copy
it created or found, a setback on the placed worker, the worker chosen for a move) and asks
again, until the plan says to stop (``REQUEUE``, or an act that ends the pass with when to look
again). Every rule of the pass is here or in the pure functions it calls (``mirror.decisions``,
the kind's own); the acts (``mirror.acts`` and the modules it calls) perform the writes and
reads. The steps, in the order a pass meets them:

1. deleted → FINALIZE; finished → FINISH;
2. a copy off the recorded placement → CONFIRM_PLACEMENT (re-read the object), then take a
   stale copy's outcome (USE_STALE_OUTCOME) and delete the other copies (DELETE_STALE);
3. not placed → HOLD's bookkeeping when suspended, else PLACE;
4. our finalizer missing → ENSURE_FINALIZER;
5. the placed worker unhealthy or unconfigured → LOST (:func:`mirror.decisions.lost_worker`);
6. no copy there → FIND_OR_CREATE, told what no copy means (make it; a decided outcome whose
   copy vanished; held while suspended), then what it came to: refused (CREATE_REFUSED),
   vanished (FINISH_DECIDED), created without fields (version skew: DROPPED_FIELDS), held
   (its status written) or nothing made;
7. a copy that is not ours → COLLISION;
8. WRITE_STATUS when the mirrored status would change (a change of running counters only waits
   up to the status batch period, so the changes of that while go in one write); then FINISH if
   that finished it;
9. MOVE_STUCK when the copy's pods could not be scheduled past the timeout (unpinned only): it
   reads whether anything of the copy ran;
10. PATCH_COPY when the copy's mutable spec differs (REQUEUE while a refused patch backs off),
    then what a refusal calls for: RECREATE_COPY (a suspended copy running nothing, for a change
    that only applies to such a copy) or PATCH_BACKOFF; else IN_SYNC: nothing to do, and no timer
    (what changes comes as an event; the worker going down is watched, :mod:`mirror.in_sync`).

The second level — whether a Job whose placed worker let it down (steps 5, 6, 7, 9) moves — is
decided here too. The act of the step records what it learned as a :class:`Setback`; then the
plan says MOVE(exclude, why) when the Job may move (unpinned; a lost worker past its timeout or
down before the copy was sent; a collision that is not our own copy under another origin; a
stuck copy of which nothing ran), FINISH_DECIDED when a lost worker's Job has a decided outcome,
and STAY (say why, back off) otherwise. MOVE is the one act, besides PLACE, that asks the
chooser; it folds the chosen worker (or why there is none) into the group, and the plan goes
on: DELETE_LEFT first for a stuck copy (deleted only once another worker takes the Job),
RECORD_MOVE (the one write), and then the copy on the new worker — in the same pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from jobapi.objects import annotations_of
from kruntime.client import ApiError
from kruntime.resources import Obj
from mirror.decisions import (
    CollisionAction,
    Lost,
    LostStep,
    Placement,
    Step,
    WorkerState,
    collision_action,
    decide,
    lost_for,
    lost_worker,
    placement_of,
    plan_copy,
    stale_outcome_from,
    status_to_write,
)
from mirror.event_reasons import EventReason
from mirror.identity import labels_of_copy
from mirror.kinds import MirroredKind
from mirror.naming import ANNOTATION_CLAIMED_BY, ANNOTATION_PIN, holds_finalizer
from mirror.placement import NoWorker
from mirror.progress import Stuck
from mirror.status_lag import interim_hold

if TYPE_CHECKING:  # the plan reads a Choice, it never makes one (only the MOVE act asks the Placer)
    from mirror.placer import Choice

#: a pass that has not stopped after this many actions is cut short (a planning bug, not a state);
#: a move takes four (the setback, MOVE, RECORD_MOVE, then FIND_OR_CREATE on the new worker), so a
#: Job refused by one worker after another still settles in one pass on a fleet of eight
MAX_ACTIONS = 40


class Do(StrEnum):
    FINALIZE = "finalize"
    FINISH = "finish"
    CONFIRM_PLACEMENT = "confirm-placement"
    USE_STALE_OUTCOME = "use-stale-outcome"
    DELETE_STALE = "delete-stale"
    PLACE = "place"
    ENSURE_FINALIZER = "ensure-finalizer"
    LOST = "lost"
    FIND_OR_CREATE = "find-or-create"
    CREATE_REFUSED = "create-refused"
    FINISH_DECIDED = "finish-decided"
    DROPPED_FIELDS = "dropped-fields"
    COLLISION = "collision"
    WRITE_STATUS = "write-status"
    MOVE_STUCK = "move-stuck"
    PATCH_COPY = "patch-copy"
    RECREATE_COPY = "recreate-copy"
    PATCH_BACKOFF = "patch-backoff"
    REQUEUE = "requeue"
    #: the copy is mirrored and in sync on a healthy worker: no timer (mirror.in_sync)
    IN_SYNC = "in-sync"
    # the second level: a setback on the placed worker, and what follows it
    MOVE = "move"
    DELETE_LEFT = "delete-left"
    RECORD_MOVE = "record-move"
    STAY = "stay"


class Why(StrEnum):
    """Why a placed Job may leave its worker: what an act learned there (a :class:`Setback`)."""

    UNREACHABLE = "unreachable"  # the worker went down before the copy was sent (LostStep.MOVE_NOW)
    LOST = "lost"  # the worker has been unreachable past workerLostTimeout (or is not configured)
    REFUSED = "refused"  # the worker refused the copy's create (quota, admission, weaker namespace)
    DROPPED_FIELDS = "dropped-fields"  # the worker dropped fields of the copy it created (version skew)
    COLLISION = "collision"  # an object of the copy's name there is not our copy
    STUCK = "stuck"  # the copy made no progress past a phase's deadline and nothing of it ran


@dataclass(frozen=True)
class Setback:
    """What the act of a step learned about the placed worker (the plan decides whether the Job moves)."""

    why: Why
    #: the worker it concerns (the one the Job would leave)
    worker: str
    #: what happened, as the event says it whether the Job moves or stays
    what: str = ""
    #: the event's reason (mirror.event_reasons)
    reason: EventReason | None = None
    #: REFUSED, DROPPED_FIELDS: seconds until the create is tried again when the Job stays
    delay: float = 0.0
    #: STUCK: workers the move avoids besides the one left (left lately, or failed it the same way)
    avoid: frozenset[str] = frozenset()


class IfAbsent(StrEnum):
    """What FIND_OR_CREATE does when the placed worker has no copy (the plan says it beforehand)."""

    CREATE = "create"  # make it
    FINISH = "finish"  # the object's outcome is decided: its copy vanished, never run it again
    HOLD = "hold"  # suspended: no copy is made


@dataclass(frozen=True)
class Action:
    do: Do
    #: the worker it concerns (its copy, for DELETE_STALE and USE_STALE_OUTCOME)
    worker: str | None = None
    #: REQUEUE: seconds until the next pass (None: only an event brings it back)
    after: float | None = None
    #: LOST: what the lost-worker rule decided
    lost: Lost | None = None
    #: PATCH_COPY: the merge patch for the copy's spec
    patch: Obj | None = None
    #: WRITE_STATUS, USE_STALE_OUTCOME: the status to write (computed once, by the plan)
    status: Obj | None = None
    #: REQUEUE: a change of the copy's counters waits to be mirrored with the next ones (``after`` is when)
    status_held: bool = False
    #: MOVE: the workers the Job may not go to
    exclude: tuple[str, ...] = ()
    #: MOVE, RECORD_MOVE: why it moves
    why: Why | None = None
    #: FIND_OR_CREATE: what to do when there is no copy
    if_absent: IfAbsent = IfAbsent.CREATE


@dataclass(frozen=True)
class Found:
    """What FIND_OR_CREATE came to on the placed worker (none of these: nothing was made)."""

    #: a worker's definite "no" to the create (quota, admission, 422)
    refused: ApiError | None = None
    #: the decided object's copy is gone from a healthy worker: finish it, never run it again
    vanished: str | None = None
    #: fields the worker dropped from the created copy (an older API server)
    dropped: tuple[str, ...] = ()
    #: suspended: no copy is made, the status says so
    held: bool = False


@dataclass(frozen=True)
class Group:
    """Everything one pass knows about one manager object."""

    job: Obj
    #: our copies of it, per worker, from the worker caches (and what this pass created or found)
    copies: Mapping[str, Obj]
    #: every configured worker as this pass sees it
    workers: Mapping[str, WorkerState]
    now: datetime
    origin: str
    resync: float
    worker_lost_timeout: float
    #: seconds since this process loaded the worker list (an unconfigured worker counts as lost from then)
    configured_for: float = 0.0
    #: the WorkerNotConfigured event was written for this object already
    unconfigured_said: bool = False
    # what earlier actions of this pass learned
    confirmed: bool = False
    stale_used: bool = False
    found: Found | None = None
    #: the status was written once this pass (never twice: the server may normalise it)
    wrote_status: bool = False
    #: why the copy on the placed worker is stuck (no progress past a phase's deadline), if it is
    stuck: Stuck | None = None
    #: the off-placement copies this pass already dealt with
    handled: frozenset[str] = field(default_factory=frozenset)
    #: seconds since the copy's oldest unmirrored status change appeared (None: not dated)
    status_pending_for: float | None = None
    #: how long running counters may wait to be mirrored together (Config.status_batch_period)
    status_batch_period: float = 0.0
    #: the second level: what went wrong on the placed worker, and where the Job may go instead
    setback: Setback | None = None
    #: MOVE's answer: the worker that takes the Job instead
    chosen: Choice | None = None
    #: MOVE's answer: why no other worker takes it now
    no_alternative: NoWorker | None = None
    #: DELETE_LEFT deleted the copy the Job leaves
    left_deleted: bool = False
    #: seconds until a refused spec patch of the copy may be tried again (0: now)
    patch_wait: float = 0.0
    #: PATCH_COPY's answer: the worker refused the spec patch
    patch_refused: ApiError | None = None

    @property
    def placement(self) -> Placement:
        return placement_of(self.job)


def _holds_our_finalizer(job: Obj, origin: str) -> bool:
    return (holds_finalizer(job)
            and annotations_of(job).get(ANNOTATION_CLAIMED_BY) == origin)


def next_action(kind: MirroredKind, g: Group) -> Action:
    """The next thing this pass does for ``g.job`` (see the module doc for the order)."""
    job, placement = g.job, g.placement
    off = sorted(name for name in g.copies if name != placement.worker and name not in g.handled)
    step = decide(kind, job, placement, off)
    if step is Step.FINALIZE:
        return Action(Do.FINALIZE)
    if step is Step.FINISH:
        return Action(Do.FINISH)
    if step is Step.CONFIRM_PLACEMENT:
        if not g.confirmed:
            return Action(Do.CONFIRM_PLACEMENT)
        used = None if g.stale_used else stale_outcome_from(kind, job, placement, g.copies, g.now)
        if used is not None and (desired := status_to_write(kind, job, g.copies[used], g.now)) is not None:
            return Action(Do.USE_STALE_OUTCOME, worker=used, status=desired)
        return Action(Do.DELETE_STALE, worker=off[0])

    if placement.worker is None:
        return _unplaced(kind, g)
    if not _holds_our_finalizer(job, g.origin):
        return Action(Do.ENSURE_FINALIZER)
    worker = g.workers.get(placement.worker)
    if worker is None or not worker.healthy:
        return _lost(kind, g, placement.worker, worker)
    remote = g.copies.get(placement.worker)
    if remote is None:
        return _no_copy(kind, g, placement.worker)
    return _with_copy(kind, g, placement.worker, remote)


def _unplaced(kind: MirroredKind, g: Group) -> Action:
    """Not placed: placed now, or (suspended) held with our finalizer and a status that says so."""
    if not kind.is_suspended(g.job):
        return Action(Do.PLACE)
    if not _holds_our_finalizer(g.job, g.origin):
        return Action(Do.ENSURE_FINALIZER)
    if not g.wrote_status and (desired := status_to_write(kind, g.job, None, g.now)) is not None:
        return Action(Do.WRITE_STATUS, status=desired)  # Suspended=True, by us; no copy yet
    return Action(Do.REQUEUE, after=g.resync)


def _no_copy(kind: MirroredKind, g: Group, placed: str) -> Action:
    """The placed worker shows no copy: find or create it, then judge what that came to."""
    found = g.found
    if found is None:
        if_absent = (IfAbsent.FINISH if kind.decided_status(g.job, g.now) is not None
                     else IfAbsent.HOLD if kind.is_suspended(g.job) else IfAbsent.CREATE)
        return Action(Do.FIND_OR_CREATE, worker=placed, if_absent=if_absent)
    if found.refused is not None:
        return _after(g, Why.REFUSED, Do.CREATE_REFUSED, placed, may_move=ANNOTATION_PIN not in annotations_of(g.job))
    if found.vanished is not None:
        return Action(Do.FINISH_DECIDED)
    if found.held and not g.wrote_status and (desired := status_to_write(kind, g.job, None, g.now)) is not None:
        return Action(Do.WRITE_STATUS, status=desired)
    return Action(Do.REQUEUE, after=g.resync)


def _with_copy(kind: MirroredKind, g: Group, placed: str, remote: Obj) -> Action:
    """The placed worker has the copy (or an object of its name): mirror its status, keep its spec."""
    job = g.job
    if g.found is not None and g.found.dropped:
        pinned = ANNOTATION_PIN in annotations_of(job)
        return _after(g, Why.DROPPED_FIELDS, Do.DROPPED_FIELDS, placed, may_move=not pinned)
    copy_plan = plan_copy(kind, job, remote, origin=g.origin)
    if copy_plan.collision:
        replace = collision_of(job, remote) is CollisionAction.REPLACE
        return _after(g, Why.COLLISION, Do.COLLISION, placed, may_move=replace)
    # Status first: a worker refusing the spec change must not stop the mirroring.
    hold = 0.0
    if not g.wrote_status and (desired := status_to_write(kind, job, remote, g.now)) is not None:
        hold = interim_hold(job.get("status") or {}, desired, pending_for=g.status_pending_for,
                            period=g.status_batch_period)
        if not hold:
            return Action(Do.WRITE_STATUS, worker=placed, status=desired)
    if g.stuck is not None and not annotations_of(job).get(ANNOTATION_PIN):  # a pinned copy only gets the event
        return _after(g, Why.STUCK, Do.MOVE_STUCK, placed, may_move=True)
    if copy_plan.spec_patch is not None:
        return _patch(kind, g, placed, remote, copy_plan.spec_patch)
    if hold:
        return Action(Do.REQUEUE, after=hold, status_held=True)  # counters only: mirrored together shortly
    return Action(Do.IN_SYNC, worker=placed)


def _patch(kind: MirroredKind, g: Group, placed: str, remote: Obj, patch: Obj) -> Action:
    """The copy's mutable spec differs: patched, unless a refusal's backoff runs; a refused patch of a
    suspended copy that only applies to a copy running nothing re-creates it, else backs off."""
    if g.patch_refused is not None:
        if kind.recreate_when_refused(patch) and kind.is_suspended(remote):
            return Action(Do.RECREATE_COPY, worker=placed, patch=patch)
        return Action(Do.PATCH_BACKOFF, worker=placed, patch=patch)
    if g.patch_wait > 0:
        return Action(Do.REQUEUE, after=max(0.5, g.patch_wait))
    return Action(Do.PATCH_COPY, worker=placed, patch=patch)


def collision_of(job: Obj, remote: Obj) -> CollisionAction:
    """What a collision with ``remote`` on the placed worker calls for (moved, or reported there)."""
    return collision_action(pinned=ANNOTATION_PIN in annotations_of(job),
                            same_workload=labels_of_copy(remote).manager_uid == job["metadata"]["uid"])


def _lost(kind: MirroredKind, g: Group, placed: str, worker: WorkerState | None) -> Action:
    """The placed worker is unhealthy or not configured: wait, move, or finish a decided outcome."""
    down_for = lost_for(worker.unhealthy_for if worker is not None else None, configured_for=g.configured_for)
    lost = lost_worker(configured=worker is not None, never_sent=worker is not None and worker.never_sent,
                       down_for=down_for, worker_lost_timeout=g.worker_lost_timeout,
                       decided=kind.decided_status(g.job, g.now) is not None, resync=g.resync,
                       unconfigured_said=g.unconfigured_said)
    setback = g.setback if g.setback is not None and g.setback.why in (Why.UNREACHABLE, Why.LOST) else None
    if setback is None or lost.step is LostStep.WAIT:
        return Action(Do.LOST, worker=placed, lost=lost)
    if lost.step is LostStep.FINISH_DECIDED:
        return Action(Do.FINISH_DECIDED)
    return _move(g, setback)


def _after(g: Group, why: Why, first: Do, placed: str, *, may_move: bool) -> Action:
    """A step whose act may learn a setback (``first``): that act, then the move or the stay."""
    if g.setback is None or g.setback.why is not why or g.setback.worker != placed:
        return Action(first, worker=placed)
    if not may_move:
        return Action(Do.STAY, worker=placed)
    return _move(g, g.setback)


def _move(g: Group, setback: Setback) -> Action:
    """The Job leaves ``setback.worker``: choose another (MOVE), delete a stuck copy once one is chosen
    (DELETE_LEFT: nothing of it ran, and it must not run beside the new one), record the new placement
    (RECORD_MOVE); with no other worker it stays (STAY says why and backs off)."""
    left = setback.worker
    if g.no_alternative is not None:
        return Action(Do.STAY, worker=left)
    if g.chosen is None:
        return Action(Do.MOVE, worker=left, exclude=(left, *sorted(setback.avoid - {left})), why=setback.why)
    if setback.why is Why.STUCK and not g.left_deleted:
        return Action(Do.DELETE_LEFT, worker=left)
    return Action(Do.RECORD_MOVE, worker=left, why=setback.why)
