"""The level-triggered reconcile of one manager object of one kind: read → plan → act.

A pass reads everything about one object once (:meth:`Reconciler._read`: the object, its
copies in every worker cache, each worker's state, what passes remember) into a
:class:`mirror.plan.Group`, asks :func:`mirror.plan.next_action` what to do, performs that one
action (:meth:`Reconciler._act`), folds what it learned back into the group and asks again,
until the plan says when to look next. The rules live in pure modules (``plan``,
``decisions``, ``placement`` and the kind's own behind ``kinds.MirroredKind``); this module
performs the reads and writes the plan names. It is safe to kill at any line: placement is
recorded on the manager object (with a resourceVersion precondition) *before* the copy is
created, so a restart finds the same worker and never creates a second copy elsewhere.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TypeVar

from jobapi.objects import annotations_of, not_ended
from jobapi.times import utcnow
from kruntime.bounded import LruDict
from kruntime.client import ApiError, ClusterClient
from kruntime.events import ObjectEvents
from kruntime.informer import ObjectCache
from kruntime.resources import PODS, Obj
from mirror import metrics, tenancy
from mirror.config import Config
from mirror.copy_namespaces import CopyNamespaces, WeakerNamespace, missing_namespace
from mirror.decisions import (
    REFUSAL_EXCLUSION,
    RETRY_CAP,
    SKEW_EXCLUSION,
    CollisionAction,
    Lost,
    LostStep,
    Placement,
    RefusalAction,
    WorkerState,
    adoption_target,
    collision_action,
    copy_propagation,
    is_refusal,
    placement_of,
    plan_cleanup,
    refusal_action,
    refusal_exclusions,
    release_unclaimed,
    retry_delay,
    routine_cleanup,
    says_something_new,
)
from mirror.event_reasons import (
    COPY_LEFT_FOR_GC,
    COPY_RECREATED,
    FINALIZER_RELEASED,
    FINISHED_WITHOUT_COPY,
    HEAD_OF_LINE_HOLD_ENDED,
    NAME_COLLISION,
    NAMESPACE_NOT_ALLOWED,
    NAMESPACE_WEAKER,
    NO_WORKER,
    PLACEMENT_MOVED,
    REDISPATCHED,
    REMOTE_DELETED,
    REPLACED,
    STALE_COPY_OUTCOME_USED,
    UNKNOWN_PRIORITY_CLASS,
    WAITING_FOR_ROOM,
    WORKER_DROPPED_FIELDS,
    WORKER_LOST,
    WORKER_NOT_CONFIGURED,
    WORKER_REFUSED,
    EventReason,
)
from mirror.identity import is_copy_of, labels_of_copy
from mirror.kinds import MirroredKind
from mirror.manager_writes import ManagerWrites, StatusRejected
from mirror.naming import (
    ANNOTATION_PIN,
    FINALIZER,
    derived_remote_name,
)
from mirror.placement import NoWorker, WaitingForRoom, WorkerChooser
from mirror.placer import Choice, Placer, WaitingForQuota
from mirror.plan import MAX_ACTIONS, Action, Do, Found, Group, next_action
from mirror.progress import copy_counts_ran, nothing_ran
from mirror.room.view import RoomView
from mirror.status_lag import StatusLag
from mirror.worker_calls import WorkerCalls
from mirror.workers import WorkerBusy, WorkerCluster

log = logging.getLogger(__name__)

T = TypeVar("T")

#: the most Jobs any per-uid record of the reconciler holds at once (a backstop, see forget)
MAX_TRACKED_JOBS = 50_000


@dataclass
class JobMemory:
    """What passes remember about one manager object (nothing else is kept per object)."""

    #: workers whose same-named object is not our copy: not placed there again
    collided: set[str] = field(default_factory=set)
    #: collisions reported so far (their retry backoff)
    collision_reports: int = 0
    #: workers that refused its copy, each until a monotonic deadline
    refused: dict[str, float] = field(default_factory=dict)
    #: refusals in a row of its copy's create (or of its fields), patch and delete, by verb: each its own backoff
    refusals: dict[str, int] = field(default_factory=dict)
    #: when a refused spec patch may be tried again (monotonic)
    patch_not_before: float = 0.0
    #: told once that its worker is not configured (not repeated each pass)
    unconfigured_noted: bool = False
    #: the NoWorker message last evented (not repeated every pass while it holds)
    no_worker_said: str | None = None
    #: told it waits for room (once per wait)
    waiting_said: bool = False
    #: told its headOfLineHold ended (once per wait)
    hold_ended_said: bool = False
    #: when it waits only because earlier Jobs hold workers with room: when the first hold lapses (monotonic)
    held_until: float | None = None
    #: workers whose copy's pods stayed unschedulable past the timeout, with why (worker events)
    stuck: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Done:
    """The pass is over: look at the object again after ``after`` seconds (None: when an event comes)."""

    after: float | None


@dataclass(frozen=True)
class Moved:
    """The act placed the Job on another worker: the pass goes on with it there (no second pass)."""

    job: Obj
    #: the worker it left (its copy there, if any, is not this pass's business any more)
    left: str


@dataclass(eq=False)
class Reconciler:
    """Reconciles the manager objects of one kind (``kind``), read from the ``jobs`` cache."""

    cfg: Config
    kind: MirroredKind
    manager: ClusterClient
    jobs: ObjectCache
    workers: dict[str, WorkerCluster]
    recorder: ObjectEvents
    policy: WorkerChooser
    #: the manager cluster's identity (kube-system namespace UID), stamped on every copy
    manager_cluster: str = ""
    now: Callable[[], datetime] = utcnow
    #: per worker, its room (placement RoomAware only; empty otherwise)
    rooms: Mapping[str, RoomView] = field(default_factory=dict)
    #: puts manager objects (namespace/name) on the work queue: a Job waiting for room is looked
    #: at again as soon as room may be there, not only at its next re-check
    wake: Callable[[list[str]], None] | None = None
    #: a manager namespace's labels (None: not known), for workers[].access namespaceSelectors
    namespace_labels: Callable[[str], Mapping[str, str] | None] = lambda _: None
    #: where and when Jobs go, shared by the kinds' reconcilers (made here when not given: tests)
    placer: Placer | None = None
    #: the monotonic clock of backoffs, exclusions and timeouts (the placer's when it is made here)
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self.resource = self.kind.resource
        self.origin = self.cfg.origin_for(self.manager_cluster)
        self.claim = self.cfg.claim_rule
        #: every write to the manager objects, and our own writes read back before the cache has them
        self.writes = ManagerWrites(self.manager, self.resource, self.origin, self._say)
        #: manager uids whose create we sent to a worker (answered or not)
        self._attempted: dict[str, set[str]] = {name: set() for name in self.workers}
        if self.placer is None:
            wake = self.wake
            self.placer = Placer(self.cfg, self.workers, self.policy, rooms=self.rooms,
                                 namespace_labels=self.namespace_labels, clock=self.clock,
                                 wake=None if wake is None else lambda keys: wake([k.key for k in keys]))
        self.places: Placer = self.placer
        #: per manager uid, what passes remember about it: dropped whole when the Job is handled
        #: to the end or leaves the cache (forget); the LRU bound caps what a missed drop can leak
        self._memory: LruDict[str, JobMemory] = LruDict(MAX_TRACKED_JOBS)
        #: worker calls on behalf of a pass, which a slow worker cannot stall
        self.calls = WorkerCalls()
        #: the namespaces copies are created in on the workers (never weaker than the manager's)
        self.namespaces = CopyNamespaces(self.cfg, self.manager, self.calls, self._say)
        #: per manager uid, the copy status change waiting to be mirrored (jobmirror_status_propagation_seconds)
        self.status_lag = StatusLag(MAX_TRACKED_JOBS)
        #: when this process loaded the worker list: a worker missing from it counts as lost from here
        self._started = self.clock()

    # -- entry point ----------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        job = self.writes.fresher(key, self.jobs.get(key))
        if job is None:
            return None
        if not self.claim.claims(self.kind, job):
            await self.release_if_unclaimed(job)
            return None
        uid = job["metadata"]["uid"]
        pending = self.calls.pending_on(uid)
        if pending is not None:
            metrics.WORKER_BUSY.labels(pending, "call_pending").inc()
            return 1.0  # a slow worker has not answered this Job's last call yet: read its outcome after
        with metrics.SYNC_LATENCY.time(), self.calls.on_behalf_of(uid):
            try:
                return await self._reconcile(job)
            except WorkerBusy as busy:
                # Not a failure, no backoff growth: parked until that worker's token is near, or its
                # share of slots is taken (jobmirror_worker_busy_total says which, and how often).
                metrics.WORKER_BUSY.labels(busy.worker, busy.reason).inc()
                return busy.retry_after
            except ApiError as exc:
                metrics.RECONCILE_ERRORS.labels("conflict" if exc.conflict else
                                                "transport" if exc.status == 0 else f"http_{exc.status}").inc()
                raise
            except StatusRejected:
                metrics.RECONCILE_ERRORS.labels("status_rejected").inc()
                raise

    async def _reconcile(self, job: Obj) -> float | None:
        """Read the group once, then act on the plan's next action until it says to stop."""
        group = self._read(job)
        self.places.observe(self.kind, group.job, group.copies)
        for _ in range(MAX_ACTIONS):
            action = next_action(self.kind, group)
            if action.do in (Do.REQUEUE, Do.PATCH_COPY) and not group.wrote_status and not action.status_held \
                    and group.placement.worker in group.copies:
                self.status_lag.forget(group.job["metadata"]["uid"])  # the manager already says what the copy says
            if action.do is Do.REQUEUE:
                return action.after
            log.debug("%s/%s: %s%s", job["metadata"]["namespace"], job["metadata"]["name"], action.do,
                      f" on {action.worker}" if action.worker else "")
            done = await self._act(action, group)
            if isinstance(done, Done):
                return done.after
            group = replace(done, workers=self._worker_states(done.job))
        log.error("%s/%s: the pass did not settle after %d actions (last: %s); looked at again after the resync "
                  "period", job["metadata"]["namespace"], job["metadata"]["name"], MAX_ACTIONS, action.do)
        metrics.RECONCILE_ERRORS.labels("unsettled").inc()
        return self.cfg.resync_period

    def _read(self, job: Obj) -> Group:
        """Everything a pass needs about ``job``, from the caches and what passes remember."""
        uid = job["metadata"]["uid"]
        placed = placement_of(job).worker
        copies = {name: c for name, w in self.workers.items() if (c := w.copy_of(self.kind, job)) is not None}
        memory = self._recalled(uid)
        return Group(job, copies, self._worker_states(job), now=self.now(), origin=self.origin,
                     resync=self.cfg.resync_period, worker_lost_timeout=self.cfg.worker_lost_timeout,
                     configured_for=self.clock() - self._started, unconfigured_said=memory.unconfigured_noted,
                     stuck=memory.stuck.get(placed or ""), status_pending_for=self.status_lag.pending_for(uid),
                     status_batch_period=self.cfg.status_batch_period)

    def _worker_states(self, job: Obj) -> dict[str, WorkerState]:
        """Each worker as a pass sees it (re-read after every action: a call may have found one down)."""
        uid = job["metadata"]["uid"]
        return {name: WorkerState(w.healthy, w.unhealthy_for(), w.synced(self.kind), uid in self._attempted[name],
                                  never_sent=self._never_sent(job, w))
                for name, w in self.workers.items()}

    async def _act(self, action: Action, g: Group) -> Group | Done:
        """Perform one action; the group as it learned, or Done with when to look again."""
        job = g.job
        worker = self.workers.get(action.worker or "")
        match action.do:
            case Do.FINALIZE:
                return Done(await self._finalize(job, dict(g.copies)))
            case Do.FINISH:
                return Done(await self._finish(job, dict(g.copies)))
            case Do.CONFIRM_PLACEMENT:
                confirmed = await self._confirm_placement(job, dict(g.copies))
                if confirmed is None:
                    return Done(self.cfg.resync_period)
                return replace(g, job=confirmed, confirmed=True)
            case Do.USE_STALE_OUTCOME:
                assert action.worker is not None and action.status is not None
                stale = g.copies[action.worker]
                job = await self._write_status(job, action.status, from_copy=True)
                self._say(job, STALE_COPY_OUTCOME_USED, f"the copy left on worker {action.worker} "
                                    f"finished ({self.kind.state(stale)}) while the Job was re-dispatched to "
                                    f"{g.placement.worker}; its outcome is used, the other copy is deleted")
                return replace(g, job=job, stale_used=True)
            case Do.DELETE_STALE:
                # A lost worker came back, or a re-dispatch raced: the copy is ours (origin uid matches).
                assert worker is not None
                await self._delete_remote(job, worker, g.copies[worker.name], "stale")
                return replace(g, handled=g.handled | {worker.name})
            case Do.PLACE:
                job, placement = await self._place(job)  # one write: the finalizer and the placement
                if placement.worker is not None:
                    return replace(g, job=job)
                # A Job waiting in line has no timer: the placer wakes the first in each worker's line
                # every few seconds and the next few when room appears there (Placer.recheck).
                uid = job["metadata"]["uid"]
                return Done(self.places.recheck(uid, self._recalled(uid).held_until))
            case Do.ENSURE_FINALIZER:
                return replace(g, job=await self.writes.ensure_finalizer(job))
            case Do.LOST:
                assert action.lost is not None
                return self._went_on(g, await self._handle_unhealthy(job, g.placement, worker, action.lost))
            case Do.FIND_OR_CREATE:
                assert worker is not None
                try:
                    got, found = await self._find_or_create(job, worker, g.placement)
                except ApiError as exc:
                    if not is_refusal(exc.status, missing_namespace=missing_namespace(exc)):
                        raise
                    return replace(g, found=Found(refused=exc))
                copies = dict(g.copies) if got is None else {**g.copies, worker.name: got}
                return replace(g, copies=copies, found=found)
            case Do.CREATE_REFUSED:
                assert worker is not None and g.found is not None and g.found.refused is not None
                refused = g.found.refused
                if isinstance(refused, WeakerNamespace):
                    return self._went_on(g, await self._create_refused(job, worker, refused.message,
                                                                       reason=NAMESPACE_WEAKER))
                return self._went_on(g, await self._create_refused(job, worker, refused))
            case Do.FINISH_DECIDED:
                assert g.found is not None and g.found.vanished is not None
                return Done(await self._finish_decided(job, g.found.vanished))
            case Do.DROPPED_FIELDS:
                assert worker is not None and g.found is not None
                return self._went_on(g, await self._dropped_fields(job, worker, g.copies[worker.name],
                                                                    g.found.dropped))
            case Do.COLLISION:
                assert worker is not None
                return self._went_on(g, await self._collision(job, worker, g.copies[worker.name]))
            case Do.WRITE_STATUS:
                assert action.status is not None
                written = await self._write_status(job, action.status, from_copy=action.worker is not None)
                return replace(g, job=written, wrote_status=True)
            case Do.MOVE_STUCK:
                assert worker is not None and g.stuck is not None
                return self._went_on(g, await self._move_stuck(job, worker, g.copies[worker.name], g.stuck))
            case Do.PATCH_COPY:
                assert worker is not None and action.patch is not None
                return Done(await self._patch_copy(job, worker, g.copies[worker.name], action.patch))
        raise AssertionError(f"no way to perform {action}")

    @staticmethod
    def _went_on(g: Group, outcome: float | Moved) -> Group | Done:
        """After an act that may move the Job: the group with its new placement (the plan goes on from
        there in this pass: creating the copy on the new worker), or Done with when to look again."""
        if not isinstance(outcome, Moved):
            return Done(outcome)
        return replace(g, job=outcome.job, copies={w: c for w, c in g.copies.items() if w != outcome.left},
                       found=None, stuck=None, handled=g.handled | {outcome.left})

    async def _move(self, job: Obj, choice: Choice, left: str, reason: EventReason, message: Callable[[str], str]
                    ) -> Moved:
        """Place the Job on ``choice`` instead of ``left`` and say why (the one way a placed Job moves)."""
        job, _ = await self._place_on(job, choice)
        self._say(job, reason, message(choice.worker))
        if reason is REPLACED:
            metrics.REPLACEMENTS.labels(left).inc()
        else:
            metrics.REDISPATCHES.labels(left, choice.worker).inc()
        return Moved(job, left)

    # -- placement ------------------------------------------------------------------------

    async def _confirm_placement(self, job: Obj, copies: dict[str, Obj]) -> Obj | None:
        """Placement read from the server, before a copy is deleted for being off-placement.

        Deleting a copy is irreversible, and the manager cache can lag our own placement
        write by a few milliseconds: a copy we just created would look stray and be
        deleted (seen in the 100-Job benchmark). A copy with no placement at all (someone
        removed the annotation) is adopted rather than deleted, so no work is lost.
        None: the Job is gone or was replaced; the informer event that follows drives the
        next pass. A lost race on the adoption patch raises the conflict (queue retry).
        """
        md = job["metadata"]
        try:
            fresh = await self.writes.read(job)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        if fresh["metadata"].get("uid") != md["uid"]:
            return None
        placement = placement_of(fresh)
        adopted = adoption_target(placement.worker, self.workers,
                                  (name for name in copies if self.workers[name].healthy))
        if adopted is None:
            return fresh
        remote_name = copies[adopted]["metadata"]["name"]
        log.info("adopting copy %s on %s for %s/%s (placement was %s)", remote_name, adopted,
                 md["namespace"], md["name"], placement.worker or "missing")
        fresh, _ = await self.writes.record_placement(fresh, adopted, remote_name,
                                                f"adopted: worker {adopted} has this Job's copy {remote_name}")
        if placement.worker is not None:
            self._say(fresh, PLACEMENT_MOVED, f"worker {placement.worker} is no longer "
                                f"configured and worker {adopted} has this Job's copy {remote_name} (the same "
                                "cluster under a new name, or the copy moved there): the placement moves to "
                                f"{adopted} and the copy keeps running")
        return fresh

    def _choose(self, job: Obj, exclude: Collection[str]) -> Choice:
        """The placer's worker for ``job``, never one that refused its name, nor (unpinned) lately its copy.

        Raises NoWorker.
        """
        memory = self._recalled(job["metadata"]["uid"])
        excluded = {*exclude, *memory.collided}
        if not annotations_of(job).get(ANNOTATION_PIN):
            excluded |= refusal_exclusions(memory.refused, self.clock())
        return self.places.choose(self.kind, job, excluded)

    def _say(self, obj: Obj, what: EventReason, message: str) -> None:
        """An event on the manager object, its reason and type from mirror.event_reasons' one table."""
        self.recorder.event(obj, what.type, what.reason, message)

    async def _place(self, job: Obj, exclude: Collection[str] = ()) -> tuple[Obj, Placement]:
        try:
            chosen = self._choose(job, exclude)
        except NoWorker as exc:
            uid, message = job["metadata"]["uid"], f"cannot dispatch: {exc}"
            memory = self._remember_about(uid)
            if isinstance(exc, WaitingForRoom | WaitingForQuota):
                memory.held_until = exc.held_until if isinstance(exc, WaitingForRoom) else None
                if not memory.waiting_said:  # once per wait: its figures change while it waits
                    memory.waiting_said = True
                    self.recorder.event(job, WAITING_FOR_ROOM.type, exc.reason, f"waits in the manager: {exc}; it is "
                                        "placed when room appears, in the scheduling order (kubectl jobmirror queue)")
                    self._say_unknown_priority(job)
                self._say_hold_ended(job, memory)
            elif says_something_new(memory.no_worker_said, message):
                memory.no_worker_said = message
                self.recorder.event(job, NO_WORKER.type, exc.reason, message)
            else:
                log.debug("%s/%s still cannot be dispatched: %s", job["metadata"]["namespace"],
                          job["metadata"]["name"], exc)
            return job, Placement(None, job["metadata"]["name"])
        self._clear_wait(job["metadata"]["uid"])
        return await self._place_on(job, chosen)

    def _clear_wait(self, uid: str) -> None:
        """The Job is placed: a later wait is told afresh (its events are once per wait)."""
        memory = self._recalled(uid)
        memory.no_worker_said, memory.waiting_said, memory.hold_ended_said, memory.held_until = None, False, False, None

    def _say_unknown_priority(self, job: Obj) -> None:
        """A Job naming a PriorityClass the manager does not serve waits at the default priority: say so."""
        _, unknown = self.places.priority(self.kind, job)
        if unknown is not None and self.places.fair:
            self._say(job, UNKNOWN_PRIORITY_CLASS, f"priorityClassName {unknown!r} is not a PriorityClass of the "
                      f"manager cluster: the Job waits at the default priority ({self.places.default_priority()})")

    def _say_hold_ended(self, job: Obj, memory: JobMemory) -> None:
        """Once per wait, when the Job is first in line for a worker and its headOfLineHold ran out:
        later Jobs may take room there from now on (it still waits, and is placed when room appears)."""
        if memory.hold_ended_said:
            return
        hold = self.cfg.head_of_line_hold
        ahead_of = self.places.hold_ended(job["metadata"]["uid"])
        if not ahead_of:
            return  # it still holds them, or held nothing: nothing to say
        memory.hold_ended_said = True
        self._say(job, HEAD_OF_LINE_HOLD_ENDED, f"waited {hold:g} s for room (headOfLineHold): it no longer holds "
                  f"{', '.join(ahead_of)} against Jobs created after it, which may take room there now; it still "
                  "waits and is placed when room for it appears")

    async def _place_on(self, job: Obj, choice: Choice) -> tuple[Obj, Placement]:
        chosen = choice.worker
        name = job["metadata"]["name"]
        remote_name = derived_remote_name(name, self.origin) if self.workers[chosen].is_manager else name
        uid = job["metadata"]["uid"]
        self.places.placing(job, choice, remote_name)
        try:
            return await self.writes.record_placement(job, chosen, remote_name, choice.why)
        except BaseException:
            self.places.unplaced(uid, chosen)
            raise

    def _never_sent(self, job: Obj, worker: WorkerCluster) -> bool:
        """True when no copy can exist there: we never sent a create and its cache has none.

        Only trusted once the worker's cache has synced at least once; after a restart
        with the worker already down we cannot know, and wait for workerLostTimeout.
        """
        uid = job["metadata"]["uid"]
        return (worker.synced(self.kind) and uid not in self._attempted[worker.name]
                and worker.copy_of(self.kind, job) is None)

    async def _handle_unhealthy(self, job: Obj, placement: Placement, worker: WorkerCluster | None,
                                lost: Lost) -> float | Moved:
        """Act on the lost-worker rule's decision (:func:`mirror.decisions.lost_worker`)."""
        uid, old, timeout = job["metadata"]["uid"], placement.worker or "", self.cfg.worker_lost_timeout
        if lost.step is LostStep.MOVE_NOW:
            assert worker is not None
            last_error = worker.last_error
            return await self._place_elsewhere(job, old, lambda to: f"worker {old} became unreachable before the "
                                               f"copy was created ({last_error}); placed on {to} instead")
        if lost.step is LostStep.WAIT:
            if lost.say_unconfigured:
                self._remember_about(uid).unconfigured_noted = True
                self._say(job, WORKER_NOT_CONFIGURED, f"placed on worker {old}, which is not in "
                                    "the configuration (removed, or renamed without its copy being found on a "
                                    f"configured worker): handled as a lost worker, re-dispatched once "
                                    f"workerLostTimeout ({timeout:.0f}s) has passed since this controller "
                                    "started, unless a configured worker shows its copy first")
            return lost.recheck_in
        if worker is None:
            reason = (f"worker {old} is not in the configuration and no configured worker has this Job's copy "
                      f"(workerLostTimeout {timeout:.0f}s passed); a copy still running there is no longer "
                      "watched: delete it there, or configure the worker again and it is deleted as stale")
        else:
            reason = (f"worker {old} unreachable for longer than workerLostTimeout ({timeout:.0f}s): "
                      f"{worker.last_error}")
        self._say(job, WORKER_LOST, reason)
        if lost.step is LostStep.FINISH_DECIDED:
            finished = await self._finish_decided(job, f"its worker {old} is lost")
            return 0.0 if finished is None else finished
        return await self._place_elsewhere(job, old, lambda to: f"moved from {old} to {to}; the copy on {old} "
                                           "is deleted when it comes back")

    async def _place_elsewhere(self, job: Obj, old: str, message: Callable[[str], str]) -> float | Moved:
        """A Job whose worker is lost: placed on another (Redispatched), or waiting as any unplaced Job
        waits (its NoWorker or WaitingForRoom said once, looked at again at the resync)."""
        try:
            choice = self._choose(job, {old})
        except NoWorker:
            await self._place(job, exclude={old})  # says why, once, as for a Job never placed
            # Still placed on the lost worker, it leaves the line at its next pass: a timer of its own.
            return self.cfg.resync_period
        self._clear_wait(job["metadata"]["uid"])
        return await self._move(job, choice, old, REDISPATCHED, message)

    # -- remote copy ----------------------------------------------------------------------

    async def _find_or_create(self, job: Obj, worker: WorkerCluster,
                              placement: Placement) -> tuple[Obj | None, Found]:
        """The copy on the placed worker, created when missing, and what that came to; a refusal raises
        (the plan judges it)."""
        ns = job["metadata"]["namespace"]
        uid = job["metadata"]["uid"]
        if uid in self._attempted[worker.name] or not worker.synced(self.kind):
            # We may have created it a moment ago (the cache lags) or cannot trust the cache:
            # ask the server. Otherwise the synced cache is authoritative and we save a call.
            try:
                return await self.calls.call(worker, worker.client.get(self.resource, ns, placement.remote_name)), \
                    Found()
            except ApiError as exc:
                if not exc.not_found:
                    raise
        if self.kind.decided_status(job, self.now()) is not None:
            return None, Found(vanished=f"its copy {ns}/{placement.remote_name} is gone from worker {worker.name}")
        if self.kind.is_suspended(job):
            return None, Found(held=True)
        body = self.kind.build_copy(job, origin=self.origin, origin_cluster=self.manager_cluster,
                                    remote_name=placement.remote_name)
        try:
            created = await self._create(job, worker, ns, body)
        except ApiError as exc:
            if exc.already_exists:
                return await self.calls.call(worker, worker.client.get(self.resource, ns, placement.remote_name)), \
                    Found()
            raise
        if created is None:
            return None, Found()
        dropped = self.kind.dropped_fields(body, created)
        if dropped:
            return created, Found(dropped=tuple(dropped))
        self.places.dispatched(worker.name, job["metadata"]["uid"])
        metrics.DISPATCHES.labels(worker.name).inc()
        self._recalled(job["metadata"]["uid"]).refusals.pop("create", None)
        # No event: the Job's placement annotations already say where it runs and why, for as long as it
        # exists (an event expires after an hour), and a POST per Job cost a fifth of the manager calls.
        log.debug("%s/%s: created %s on worker %s", ns, job["metadata"]["name"], placement.remote_name, worker.name)
        return created, Found()

    async def _create(self, job: Obj, worker: WorkerCluster, ns: str, body: Obj) -> Obj | None:
        if not tenancy.may_use(ns, self.cfg.worker_namespaces):
            self.recorder.event(job, NAMESPACE_NOT_ALLOWED.type, NAMESPACE_NOT_ALLOWED.reason,
                                tenancy.not_allowed_reason(ns, self.cfg.worker_namespaces))
            return None
        await self.namespaces.check_posture(worker, ns)
        attempted, uid = self._attempted[worker.name], job["metadata"]["uid"]
        try:
            # Counted as attempted only once the create is sent: a pass parked or turned away before
            # sent nothing, and the worker's synced cache still answers for it without a GET (issue 38).
            return await self.calls.call(worker, worker.client.create(self.resource, ns, body),
                                         on_sent=lambda: attempted.add(uid))
        except ApiError as exc:
            if not missing_namespace(exc):
                raise
        if not await self.namespaces.make(job, worker, ns):
            return None
        return await self.calls.call(worker, worker.client.create(self.resource, ns, body))

    def _refusal_delay(self, uid: str, verb: str) -> float:
        """Count one more refusal of ``verb`` (create, patch, delete) for ``uid``; the seconds until it
        is tried again (doubling, capped)."""
        refusals = self._remember_about(uid).refusals
        refusals[verb] = refusals.get(verb, 0) + 1
        return retry_delay(refusals[verb], base=self.cfg.resync_period)

    async def _dropped_fields(self, job: Obj, worker: WorkerCluster, created: Obj, fields: tuple[str, ...]
                              ) -> float | Moved:
        """The worker would run the copy with other semantics: delete it at once, never let it run.

        Handled as a refusal of that worker for this Job (``SKEW_EXCLUSION``): placed elsewhere
        when unpinned and another worker can take it, else kept pending and retried with backoff.
        """
        md = job["metadata"]
        deleted = await self._delete_remote(job, worker, created, "dropped fields")
        what = (f"worker {worker.name} dropped fields of {md['namespace']}/{md['name']} it does not know "
                f"(older Kubernetes?): {', '.join(fields)}; the copy would run with other semantics, so it was "
                + ("deleted at once" if deleted else "not deleted yet (retried)"))
        return await self._create_refused(job, worker, what, exclusion=SKEW_EXCLUSION, reason=WORKER_DROPPED_FIELDS,
                                          verb="skew", left_copy=not deleted)

    async def _create_refused(self, job: Obj, worker: WorkerCluster, what: str | ApiError, *,
                              exclusion: float = REFUSAL_EXCLUSION, reason: EventReason = WORKER_REFUSED,
                              verb: str = "create", left_copy: bool = False) -> float | Moved:
        """The worker said no to the copy: say so at once, and move the Job or retry with backoff.

        The worker is excluded for this Job for ``exclusion`` seconds (quota frees up,
        policies change); nothing runs there, so it is not counted as load.
        """
        md = job["metadata"]
        uid = md["uid"]
        self.places.not_dispatched(worker.name, uid)
        if not left_copy:
            self._attempted[worker.name].discard(uid)  # a refused create left nothing behind
        metrics.WORKER_REFUSALS.labels(worker.name, verb).inc()
        self._remember_about(uid).refused[worker.name] = self.clock() + exclusion
        delay = self._refusal_delay(uid, "create")
        if isinstance(what, ApiError):
            what = f"worker {worker.name} refused to create {md['namespace']}/{md['name']}: {what.message}"
        pinned = ANNOTATION_PIN in annotations_of(job)
        chosen: Choice | None = None
        why = f"the Job is pinned to {worker.name}"
        if not pinned:
            try:
                chosen = self._choose(job, ())
            except NoWorker as no:
                why = f"no other worker accepts it now ({no})"
        if chosen is not None and refusal_action(pinned=pinned, alternative=True) is RefusalAction.REPLACE:
            return await self._move(job, chosen, worker.name, reason, lambda to: f"{what}; placed on {to} instead")
        self._say(job, reason, f"{what}; {why}: retried with backoff (at most every "
                            f"{RETRY_CAP:.0f}s)")
        log.warning("%s/%s: %s; next try in %.0fs", md["namespace"], md["name"], what, delay)
        return delay

    async def _patch_copy(self, job: Obj, worker: WorkerCluster, remote: Obj, patch: Obj) -> float:
        """Bring the copy's mutable spec in line; a refusal is evented and retried with backoff."""
        uid = job["metadata"]["uid"]
        not_before = self._recalled(uid).patch_not_before
        if self.clock() < not_before:
            return max(0.5, not_before - self.clock())
        md = remote["metadata"]
        try:
            await self.calls.call(worker, worker.client.patch(self.resource, md["namespace"], md["name"], patch))
        except ApiError as exc:
            if not is_refusal(exc.status):
                raise
            metrics.WORKER_REFUSALS.labels(worker.name, "patch").inc()
            # A suspended copy whose pods are all gone runs nothing: re-create it from the manager
            # instead (nothing runs twice; a pod still terminating could, so wait for it).
            recreate = self.kind.recreate_when_refused(patch) and self.kind.is_suspended(remote)
            if recreate:
                left = await self._pods_left(worker, remote)
                if left:
                    log.info("%s/%s on %s: waiting for %d pod(s) of the suspended copy to end before re-creating "
                             "it (%s)", md["namespace"], md["name"], worker.name, len(left), ", ".join(left[:3]))
                    return min(2.0, self.cfg.resync_period)
            if recreate and await self._delete_remote(job, worker, remote, "re-created for its new template"):
                self._say(job, COPY_RECREATED, f"worker {worker.name} refused to rewrite "
                                    f"the suspended copy's pod template ({exc.message}); deleted it to be "
                                    "created again from the manager's template")
                return 0.0
            delay = self._refusal_delay(uid, "patch")
            self._remember_about(uid).patch_not_before = self.clock() + delay
            self._say(job, WORKER_REFUSED, f"worker {worker.name} refused the spec change "
                                f"{patch} on {md['namespace']}/{md['name']}: {exc.message}; status is still "
                                "mirrored, the change is retried with backoff (at most every "
                                f"{RETRY_CAP:.0f}s)")
            return delay
        memory = self._recalled(uid)
        memory.patch_not_before = 0.0
        memory.refusals.pop("patch", None)
        return self.cfg.resync_period

    def copy_stuck(self, uid: str, worker: str, why: str) -> None:
        """Worker events say the copy's pods on ``worker`` stayed unschedulable past the timeout.

        Kept only with room views (placement RoomAware): without them no worker is known to have
        room, so the CopyUnschedulable event is all there is to do.
        """
        if self.rooms:
            self._remember_about(uid).stuck[worker] = why

    async def _move_stuck(self, job: Obj, worker: WorkerCluster, remote: Obj, why: str) -> float | Moved:
        """Delete a copy none of whose pods ever started and place the Job elsewhere, avoiding that worker.

        Stuck copies are recorded only with RoomAware (:meth:`copy_stuck`), so the Job goes where
        room is known to be now. Only when nothing can have run (mirror.progress.nothing_ran): no
        container of any pod of the copy (read live, not from a cache) has ever started, and the copy
        counts no finished or ready pod — a pod bound to a node whose image cannot be pulled has run
        nothing. Otherwise it is never moved.
        No other worker can take it now: the copy stays, and the next timeout asks again.
        """
        memory = self._remember_about(job["metadata"]["uid"])
        started = self.kind.pods is None or copy_counts_ran(remote)
        if not started:
            started = not nothing_ran(remote, await self._copy_pods(worker, remote))
        if started:
            memory.stuck.pop(worker.name, None)
            log.info("%s/%s: the copy on %s is not moved: a container of it has started",
                     job["metadata"]["namespace"], job["metadata"]["name"], worker.name)
            return self.cfg.resync_period
        try:
            choice = self._choose(job, exclude={worker.name})
        except NoWorker as exc:
            log.info("%s/%s: the copy stuck on %s stays: %s", job["metadata"]["namespace"], job["metadata"]["name"],
                     worker.name, exc)
            memory.stuck.pop(worker.name, None)  # asked again at the next unschedulable timeout
            return self.cfg.resync_period
        if not await self._delete_remote(job, worker, remote, "moved: stuck before it ran"):
            return retry_delay(memory.refusals.get("delete", 0), base=min(self.cfg.resync_period, 5.0))
        memory.stuck.pop(worker.name, None)
        memory.refused[worker.name] = self.clock() + REFUSAL_EXCLUSION  # avoided for this Job a while
        return await self._move(job, choice, worker.name, REPLACED, lambda to: f"moved from worker {worker.name} to "
                                f"{to}: {why}; none of its pods had started, so nothing ran twice")

    async def _pods_left(self, worker: WorkerCluster, remote: Obj) -> list[str]:
        """Pods of the copy that have not ended, terminating ones included (``status.active`` does
        not count those, and ``status.terminating`` is missing on older workers)."""
        return not_ended(await self._copy_pods(worker, remote))

    async def _copy_pods(self, worker: WorkerCluster, remote: Obj) -> list[Obj]:
        """The copy's pods, read live from its worker (none when the kind's pods are not known)."""
        if self.kind.pods is None:
            return []
        pods, _ = await self.calls.call(worker, worker.client.list_all(
            PODS, remote["metadata"]["namespace"], label_selector=self.kind.pods.selector(remote)))
        return pods

    async def _collision(self, job: Obj, worker: WorkerCluster, remote: Obj) -> float | Moved:
        """The placed worker has an object of the copy's name that is not our copy: never touch it.

        An unpinned Job is placed on another worker (that worker stays excluded for this Job);
        a pinned one, or one no other worker can take, is reported with doubling backoff.
        """
        uid = job["metadata"]["uid"]
        md = remote["metadata"]
        self.places.not_dispatched(worker.name, uid)  # nothing of ours runs there: not load
        metrics.NAME_COLLISIONS.labels(worker.name).inc()
        what = (f"worker {worker.name} already has {self.kind.name} {md.get('namespace')}/{md['name']} that jobmirror "
                f"did not create for this {self.kind.name} (origin {labels_of_copy(remote).origin!r}); "
                "it is left untouched")
        pinned = ANNOTATION_PIN in annotations_of(job)
        action = collision_action(pinned=pinned, same_workload=labels_of_copy(remote).manager_uid == uid)
        if action is CollisionAction.REPLACE:
            self._remember_about(uid).collided.add(worker.name)
            try:
                chosen = self._choose(job, ())
            except NoWorker as exc:
                why = f"no other worker can take it ({exc})"
            else:
                return await self._move(job, chosen, worker.name, NAME_COLLISION,
                                        lambda to: f"{what}; placed on {to} instead")
        else:
            why = (f"the Job is pinned to {worker.name}" if pinned
                   else "it carries this Job's uid under another origin, so running it elsewhere would run it twice")
        memory = self._remember_about(uid)
        memory.collision_reports += 1
        delay = retry_delay(memory.collision_reports, base=self.cfg.resync_period)
        self._say(job, NAME_COLLISION, f"{what}; {why}: retried with backoff (at most every "
                            f"{RETRY_CAP:.0f}s)")
        log.warning("%s/%s: name collision on %s (%s); next look in %.0fs", job["metadata"]["namespace"],
                    job["metadata"]["name"], worker.name, why, delay)
        return delay

    async def _delete_remote(self, job: Obj, worker: WorkerCluster, remote: Obj, reason: str,
                             propagation: str = "Background") -> bool:
        """Delete one of our copies (background propagation by default: its pods go too). True when gone.

        Foreground: True only once the worker has deleted the pods and then the copy.
        """
        if not worker.healthy:
            return False
        md = remote["metadata"]
        if propagation == "Foreground" and md.get("deletionTimestamp"):
            return False  # being deleted, dependents first: wait for it to vanish from the cache
        try:
            answer = await self.calls.call(worker, worker.client.delete(
                self.resource, md["namespace"], md["name"], propagation=propagation, uid=md.get("uid")))
        except ApiError as exc:
            if exc.not_found:
                return True
            if exc.conflict:  # uid precondition: a different Job now has that name; not ours
                return True
            if not is_refusal(exc.status):
                raise
            metrics.WORKER_REFUSALS.labels(worker.name, "delete").inc()
            self._refusal_delay(job["metadata"]["uid"], "delete")
            self._say(job, WORKER_REFUSED, f"worker {worker.name} refused to delete "
                                f"{md['namespace']}/{md['name']} ({reason}): {exc.message}; retried with backoff")
            return False
        metrics.REMOTE_DELETES.labels(worker.name, reason).inc()
        uid = job["metadata"]["uid"]
        self._attempted[worker.name].discard(uid)  # known gone: no need to ask the server again
        self.places.not_dispatched(worker.name, uid)
        how = "" if propagation == "Background" else f", propagation {propagation}"
        if routine_cleanup(reason, propagation):
            log.debug("%s/%s: deleted its finished copy on worker %s", md["namespace"], md["name"], worker.name)
        else:
            self.recorder.event(job, REMOTE_DELETED.type, REMOTE_DELETED.reason,
                                f"deleted {md['namespace']}/{md['name']} on worker {worker.name} ({reason}{how})")
        # A foreground delete answers with the object while its pods are still being deleted.
        return propagation != "Foreground" or answer.get("kind") == "Status"

    # -- manager writes -------------------------------------------------------------------

    async def release_if_unclaimed(self, job: Obj) -> None:
        """Release our finalizer from ``job`` if we no longer claim it and it is ours to release."""
        if release_unclaimed(job, claimed=self.claim.claims(self.kind, job), origin=self.origin,
                             claimed_in_any_namespace=self.claim.anywhere().claims(self.kind, job)):
            await self._release_unclaimed(job)

    async def _release_unclaimed(self, job: Obj) -> None:
        """We no longer claim this Job: let go of it. Its copy, if any, is left as it is."""
        await self.writes.drop_finalizer(job)
        self.forget(job["metadata"]["uid"])
        metrics.UNCLAIMED_RELEASES.inc()
        placed = placement_of(job).worker
        self._say(job, FINALIZER_RELEASED, f"no longer claimed by this jobmirror (controllerName "
                            f"{self.cfg.controller_name!r}, namespaces {self.cfg.namespaces or 'all'}): finalizer "
                            f"{FINALIZER} removed" + (f"; its copy on worker {placed} is left as it is" if placed
                                                      else ""))

    async def _finish(self, job: Obj, copies: dict[str, Obj]) -> float | None:
        if self.cfg.keep_finished_remote:
            await self.writes.drop_finalizer(job)
            return None
        return await self._finalize(job, copies)

    async def _finish_decided(self, job: Obj, why: str) -> float | None:
        """A decided outcome is final: write the terminal status instead of running the Job again."""
        final = self.kind.decided_status(job, self.now())
        assert final is not None
        job = await self.writes.put_status(job, final)
        self._say(job, FINISHED_WITHOUT_COPY, f"{why}; its outcome was already decided, so it is "
                            f"finished as {self.kind.state(job)} from its last mirrored status instead of running "
                            "again")
        copies = {name: c for name, w in self.workers.items() if (c := w.copy_of(self.kind, job)) is not None}
        return await self._finish(job, copies)

    async def _finalize(self, job: Obj, copies: dict[str, Obj]) -> float | None:
        """Delete every copy we know of, then release the manager Job's finalizer (:func:`plan_cleanup`).

        A copy on an unreachable worker keeps the finalizer (and this key re-queued)
        until the worker answers: cleanup is retried until it succeeds.
        """
        uid = job["metadata"]["uid"]
        deleted = bool(job["metadata"].get("deletionTimestamp"))
        reason = "deleted" if deleted else "finished"
        propagation = copy_propagation(job) if deleted else "Background"
        placement = placement_of(job)
        plan = plan_cleanup(copies, placement.worker, self._worker_states(job), deleted=deleted,
                            worker_lost_timeout=self.cfg.worker_lost_timeout)
        all_gone = not plan.blocked
        for name in plan.delete:
            all_gone &= await self._delete_remote(job, self.workers[name], copies[name], reason, propagation)
        if plan.confirm is not None:
            pw = self.workers[plan.confirm]
            try:
                remote = await self.calls.call(
                    pw, pw.client.get(self.resource, job["metadata"]["namespace"], placement.remote_name))
            except ApiError as exc:
                if not exc.not_found:
                    raise
            else:
                if is_copy_of(self.kind.name, remote, job, origin=self.origin):
                    all_gone &= await self._delete_remote(job, pw, remote, reason, propagation)
        if not all_gone:
            return retry_delay(self._recalled(uid).refusals.get("delete", 0), base=min(self.cfg.resync_period, 5.0))
        self.forget(uid)
        await self.writes.drop_finalizer(job)
        if deleted and placement.worker is not None and placement.worker not in self.workers and not copies:
            self._say(job, COPY_LEFT_FOR_GC, f"worker {placement.worker} is not in the "
                                "configuration: the finalizer is released without deleting a copy there; delete "
                                "it on that cluster, or configure the worker again and garbage collection does")
        for name in plan.left_for_gc:
            metrics.COPIES_LEFT_FOR_GC.labels(name).inc()
            self._say(job, COPY_LEFT_FOR_GC, f"worker {name} has been unreachable for longer than "
                                f"workerLostTimeout ({self.cfg.worker_lost_timeout:.0f}s): the finalizer is released "
                                "without deleting the copy there; garbage collection deletes it when the worker "
                                "answers again")
        return None

    def _remember_about(self, uid: str) -> JobMemory:
        """The record kept for ``uid``, made on first use (for writing)."""
        memory = self._memory.get(uid)
        if memory is None:
            memory = self._memory[uid] = JobMemory()
        return memory

    def _recalled(self, uid: str) -> JobMemory:
        """The record kept for ``uid``, or a blank one that is not kept (for reading and clearing)."""
        return self._memory.get(uid) or JobMemory()

    def forget(self, uid: str) -> None:
        """Drop every per-Job record (the maps stay bounded by the Jobs we handle)."""
        for tracked in self._attempted.values():
            tracked.discard(uid)
        self._memory.pop(uid, None)
        self.status_lag.forget(uid)
        self.places.forget(uid)

    async def _write_status(self, job: Obj, desired: Obj, *, from_copy: bool) -> Obj:
        """Write ``desired`` (the plan computed it); ``from_copy``: it mirrors a copy's status change,
        whose lag since the worker showed it is observed (jobmirror_status_propagation_seconds)."""
        written = await self.writes.put_status(job, desired)
        self.places.observe(self.kind, written, ())  # finished: its tenant's share and quota free up
        if from_copy and (waited := self.status_lag.mirrored(job["metadata"]["uid"])) is not None:
            metrics.STATUS_PROPAGATION.labels(waited[0]).observe(waited[1])
        return written
