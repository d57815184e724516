"""The level-triggered reconcile of one manager object of one kind: read → plan → act.

A pass reads everything about one object once (:meth:`Reconciler._read`: the object, its
copies in every worker cache, each worker's state, what passes remember) into a
:class:`mirror.plan.Group`, asks :func:`mirror.plan.next_action` what to do, performs that one
action (:data:`mirror.acts.ACTS`), folds what it learned back into the group and asks again,
until the plan says when to look next. The rules live in pure modules (``plan``,
``decisions``, ``placement`` and the kind's own behind ``kinds.MirroredKind``); the acts
perform the reads and writes the plan names, through one :class:`mirror.acting.Acting` per
kind. It is safe to kill at any line: placement is recorded on the manager object (with a
resourceVersion precondition) *before* the copy is created, so a restart finds the same worker
and never creates a second copy elsewhere.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from jobapi.times import utcnow
from kruntime.bounded import LruDict
from kruntime.client import ApiError, ClusterClient
from kruntime.events import ObjectEvents
from kruntime.informer import ObjectCache
from kruntime.resources import Obj, key_of
from mirror import metrics
from mirror.acting import Acting, Done
from mirror.acts import ACTS
from mirror.config import Config
from mirror.copy_cleanup import release_unclaimed
from mirror.copy_namespaces import CopyNamespaces
from mirror.decisions import WorkerState, placement_of
from mirror.decisions import release_unclaimed as unclaimed_to_release
from mirror.event_reasons import EventReason
from mirror.in_sync import InSync
from mirror.job_memory import MAX_TRACKED_JOBS, JobMemory, recalled, remember_about
from mirror.kinds import MirroredKind
from mirror.manager_writes import ManagerWrites, StatusRejected
from mirror.placement import WorkerChooser
from mirror.placer import Placer
from mirror.plan import MAX_ACTIONS, Action, Do, Group, next_action
from mirror.progress import Phase, Stuck
from mirror.room.view import RoomView
from mirror.status_lag import StatusLag
from mirror.worker_calls import WorkerCalls
from mirror.workers import WorkerBusy, WorkerCluster

__all__ = ["MAX_TRACKED_JOBS", "Done", "JobMemory", "Reconciler"]

log = logging.getLogger(__name__)


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
        if self.placer is None:
            wake = self.wake
            self.placer = Placer(self.cfg, self.workers, self.policy, rooms=self.rooms,
                                 namespace_labels=self.namespace_labels, clock=self.clock,
                                 wake=None if wake is None else lambda keys, urgent=True: wake([k.key for k in keys]))
        self.places: Placer = self.placer
        #: per manager uid, what passes remember about it: dropped whole when the Job is handled
        #: to the end or leaves the cache (forget); the LRU bound caps what a missed drop can leak
        self._memory: LruDict[str, JobMemory] = LruDict(MAX_TRACKED_JOBS)
        #: the Jobs in sync on their worker, without a timer: looked at again when it goes down
        self.in_sync = InSync()
        #: worker calls on behalf of a pass, which a slow worker cannot stall
        self.calls = WorkerCalls()
        #: per manager uid, the copy status change waiting to be mirrored (jobmirror_status_propagation_seconds)
        self.status_lag = StatusLag(MAX_TRACKED_JOBS)
        #: the edge every act writes and reads through (the copy namespaces, never weaker than the manager's)
        self.acting = Acting(
            self.cfg, self.kind, self.origin, self.manager_cluster, self.workers, self.recorder, self.writes,
            self.calls, self.places, CopyNamespaces(self.cfg, self.manager, self.calls, self._say), self._memory,
            self.status_lag, attempted={name: set() for name in self.workers}, clock=self.clock,
            now=lambda: self.now())
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
        uid = job["metadata"]["uid"]
        self.in_sync.drop(uid)
        group = self._read(job)
        self.places.observe(self.kind, group.job, group.copies)
        for _ in range(MAX_ACTIONS):
            action = next_action(self.kind, group)
            if action.do in (Do.REQUEUE, Do.IN_SYNC, Do.PATCH_COPY) and not group.wrote_status \
                    and not action.status_held and group.placement.worker in group.copies:
                self.status_lag.forget(uid)  # the manager already says what the copy says
            if action.do is Do.IN_SYNC:
                assert action.worker is not None
                self.in_sync.mark(uid, key_of(group.job), action.worker)
                return None
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
        memory = self._recalled(uid)
        return Group(job, self.acting.copies_of(job), self._worker_states(job), now=self.now(), origin=self.origin,
                     resync=self.cfg.resync_period, worker_lost_timeout=self.cfg.worker_lost_timeout,
                     configured_for=self.clock() - self._started, unconfigured_said=memory.unconfigured_noted,
                     stuck=memory.stuck.get(placed or ""), status_pending_for=self.status_lag.pending_for(uid),
                     status_batch_period=self.cfg.status_batch_period,
                     patch_wait=max(0.0, memory.patch_not_before - self.clock()))

    def _worker_states(self, job: Obj) -> Mapping[str, WorkerState]:
        """Each worker as a pass sees it (re-read after every action: a call may have found one down)."""
        return self.acting.worker_states(job)

    async def _act(self, action: Action, g: Group) -> Group | Done:
        """Perform one action; the group as it learned, or Done with when to look again."""
        return await ACTS[action.do](self.acting, action, g)

    # -- from the controller --------------------------------------------------------------

    def copy_stuck(self, uid: str, worker: str, stuck: Stuck) -> None:
        """Worker events say the copy on ``worker`` made no progress past a phase's deadline.

        Pods that never got a node are kept only with room views (placement RoomAware): without
        them no worker is known to have room, so the CopyUnschedulable event is all there is to
        do. Every other cause (no pod, FailedCreate, a container that cannot start) is the
        worker's, whatever the policy: the Job may leave it.
        """
        if self.rooms or stuck.phase is not Phase.PODS_CREATED:
            self._remember_about(uid).stuck[worker] = stuck

    async def release_if_unclaimed(self, job: Obj) -> None:
        """Release our finalizer from ``job`` if we no longer claim it and it is ours to release."""
        if unclaimed_to_release(job, claimed=self.claim.claims(self.kind, job), origin=self.origin,
                                claimed_in_any_namespace=self.claim.anywhere().claims(self.kind, job)):
            await release_unclaimed(self.acting, job)

    def forget(self, uid: str) -> None:
        """Drop every per-Job record (the maps stay bounded by the Jobs we handle)."""
        self.acting.forget(uid)
        self.in_sync.drop(uid)

    # -- what passes remember -------------------------------------------------------------

    def _say(self, obj: Obj, what: EventReason, message: str) -> None:
        """An event on the manager object, its reason and type from mirror.event_reasons' one table."""
        self.recorder.event(obj, what.type, what.reason, message)

    def _remember_about(self, uid: str) -> JobMemory:
        """The record kept for ``uid``, made on first use (for writing)."""
        return remember_about(self._memory, uid)

    def _recalled(self, uid: str) -> JobMemory:
        """The record kept for ``uid``, or a blank one that is not kept (for reading and clearing)."""
        return recalled(self._memory, uid)
