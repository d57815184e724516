"""Wire the mirror controller together: clients, informers, queue, GC, probes, leader election."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from kruntime.client import ApiError, ClusterClient, load_incluster, load_kubeconfig
from kruntime.events import EventRecorder, ObjectEvents, SpamFilter
from kruntime.httpserver import HealthServer
from kruntime.identity import IdentityUnavailable, read_identity
from kruntime.informer import Informer, NamespacedInformers, RecordInformer, paced, without_managed_fields
from kruntime.leaderelect import LeaderElector, Timing
from kruntime.resources import Obj, key_of
from kruntime.workqueue import WorkQueue
from mirror import gc, metrics
from mirror.claim import worth_caching
from mirror.config import Config, PlacementPolicy, cluster_conflicts
from mirror.copy_events import needs_pass
from mirror.identity import labels_of_copy, manager_key_of
from mirror.inspect import tls as inspect_tls
from mirror.inspect.api import InspectApi
from mirror.jobs.kind import JOB_KIND
from mirror.jobsets.kind import JOBSET_KIND
from mirror.kinds import MirroredKind, QueueKey
from mirror.manager_lookups import ManagerLookups, namespace_informer, priority_class_informer
from mirror.naming import FIELD_MANAGER, holds_finalizer
from mirror.placement import policy_for
from mirror.placer import BEHIND_WAKES, WAITING_RECHECK, Placer
from mirror.progress import Stuck
from mirror.reconciler import Reconciler
from mirror.room.view import RoomView
from mirror.status_lag import event_hold, newly_decided, status_changed
from mirror.worker_connect import admit_workers, connect_worker
from mirror.worker_events import WorkerEvents
from mirror.workers import WorkerCluster

log = logging.getLogger(__name__)

#: Every kind the mirror knows, by name: the config's ``kinds`` picks those mirrored. Add a
#: :class:`mirror.kinds.MirroredKind` here (and its RBAC) to mirror another.
KNOWN_KINDS: dict[str, MirroredKind] = {kind.name: kind for kind in (JOB_KIND, JOBSET_KIND)}
#: seconds between two looks for in-sync Jobs on a worker that went unhealthy (cheap: a set per worker)
UNHEALTHY_CHECK = 2.0
#: seconds between starting two workers' watches: fifty workers started at once made their TLS
#: handshakes in one or two turns of the loop (0.1-0.2 s lags in bench fleet's start and failover);
#: started this far apart, fifty take a second
WORKER_START_STAGGER = 0.02

#: What the config mirrors by default.
KINDS: tuple[MirroredKind, ...] = (JOB_KIND,)


class MirrorController:
    def __init__(self, cfg: Config, kinds: Sequence[MirroredKind] | None = None) -> None:
        self.cfg = cfg
        if kinds is None:
            kinds = [KNOWN_KINDS[name] for name in cfg.kinds]
        #: which manager objects are ours (built once: it is asked for every manager watch event)
        self.claim = cfg.claim_rule
        self.kinds = {kind.name: kind for kind in kinds}
        self.manager: ClusterClient | None = None
        #: the manager client's sibling that serves the manager watches
        self.watches: ClusterClient | None = None
        self.workers: dict[str, WorkerCluster] = {}
        #: the manager-side cache of each kind
        self.informers: dict[str, Informer | NamespacedInformers] = {}
        # Each pass re-reads everything about its object, so it alone says when to look again: a finished
        # Job's last pass leaves no resync timer behind (issue 38: a pass per Job that found nothing).
        self.queue: WorkQueue[QueueKey] = WorkQueue("mirror", backoff_base=0.05, backoff_cap=60.0,
                                                    pass_owns_timer=True)
        self.reconcilers: dict[str, Reconciler] = {}
        #: manager events that came while a pass of their object ran: judged when it ends
        self._during_pass: dict[QueueKey, list[tuple[Obj | None, Obj]]] = {}
        self.events: dict[str, ObjectEvents] = {}
        #: per (kind, worker), the mirroring of the worker's Warning events onto the manager objects
        self.worker_events: dict[tuple[str, str], WorkerEvents] = {}
        #: per worker, its room from Node and Pod watches (placement RoomAware only)
        self.rooms: dict[str, RoomView] = {}
        self.recorder: EventRecorder | None = None
        self.leading = not cfg.leader_election.enabled
        self._identity = ""
        #: the manager cluster's kube-system namespace UID (read in connect())
        self.manager_cluster = ""
        #: the origin label value of our copies (configured, or derived from manager_cluster)
        self.origin = cfg.origin or ""
        self._led = False  # became leader at some point: a graceful stop hands the Lease back
        self._elector: LeaderElector | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        self.health_server: HealthServer | None = None
        self.inspect_api: InspectApi | None = None
        #: the manager's namespaces, name and labels only (only when a workers[].access has a namespaceSelector)
        self.namespaces: Informer | None = None
        #: the manager's PriorityClasses (scheduling.order FairShare), by name: value and globalDefault
        self.priority_classes: Informer | None = None
        #: reads of those two watches (made in connect)
        self.lookups = ManagerLookups()
        self.placer: Placer | None = None

    # -- setup ------------------------------------------------------------------------------

    async def connect(self) -> None:
        cfg = self.cfg
        mcfg = (await load_kubeconfig(cfg.manager_kubeconfig, cfg.manager_context) if cfg.manager_kubeconfig
                else await load_incluster())
        self.manager = ClusterClient.from_configuration("manager", mcfg, qps=cfg.qps, burst=cfg.burst,
                                                        timeout=cfg.request_timeout, field_manager=FIELD_MANAGER)
        # Retried (bounded, logged) and fatal when it fails: copies carry it, the default
        # origin derives from it, and manager-as-worker detection compares it.
        # Watches hold a connection each for as long as they run: their own pool, sized for one per
        # namespace of the allow-list and kind, so 200 namespaces never take the connections status
        # writes need (issue 19 item 4).
        self.watches = self.manager.sibling("watch", pool_size=len(self.kinds) * max(1, len(cfg.namespaces)) + 4,
                                            qps=50, burst=100)
        manager_id = self.manager_cluster = await read_identity(self.manager)
        origin = self.origin = cfg.origin_for(manager_id)
        log.info("manager cluster %s; origin %s", manager_id, origin)
        slow_slots = asyncio.Semaphore(max(1, cfg.workers_concurrency // 4))
        for wcfg in cfg.workers:
            self.workers[wcfg.name] = await connect_worker(cfg, wcfg, list(self.kinds.values()), origin=origin,
                                                           manager_cluster=manager_id, slow_slots=slow_slots)
            if cfg.placement is PlacementPolicy.ROOM_AWARE:
                self.rooms[wcfg.name] = RoomView(wcfg.name, self.workers[wcfg.name].watch_client,
                                                 namespaces=cfg.namespaces)
        await admit_workers(cfg, self.workers, manager_id)
        # Four event writers: no event on a Job's normal path, but a burst of Jobs can bring one each
        # (WaitingForRoom, a mirrored worker warning such as FailedScheduling).
        self.recorder = EventRecorder(self.manager, "jobmirror", writers=4)
        lookups = self.lookups = ManagerLookups(namespace_informer(cfg, self.watches),
                                                priority_class_informer(cfg, self.watches))
        self.namespaces, self.priority_classes = lookups.namespaces, lookups.priority_classes
        self.placer = Placer(cfg, self.workers, policy_for(cfg.placement.value), rooms=self.rooms,
                             namespace_labels=lookups.namespace_labels, priority_class=lookups.priority_value,
                             default_priority=lookups.default_priority, wake=self._wake,
                             priorities_known=lookups.priorities_known)
        for kind in self.kinds.values():
            informer = self.informers[kind.name] = self._manager_informer(kind)
            informer.add_handler(self._manager_handler(kind))
            for w in self.workers.values():
                w.kinds[kind.name].informer.add_handler(self._copy_handler(kind, w.name))
            # Through client-go's spam filter, like the builtin controller's events.
            events = self.events[kind.name] = ObjectEvents(self.recorder, kind.resource)
            self._follow_worker_events(kind, informer)
            self.reconcilers[kind.name] = Reconciler(cfg, kind, self.manager, informer, self.workers, events,
                                                     policy_for(cfg.placement.value), manager_cluster=manager_id,
                                                     rooms=self.rooms, namespace_labels=lookups.namespace_labels,
                                                     placer=self.placer)
        for room in self.rooms.values():
            room.on_room = self._room_appeared

    def _follow_worker_events(self, kind: MirroredKind, informer: Informer | NamespacedInformers) -> None:
        """Every worker's Warning events about ``kind``'s copies, told on the manager objects: one per
        (kind, worker), so a second kind never replaces the first's."""
        if not self.cfg.worker_events or kind.pods is None:  # the kind says how its copies' pods are named
            return
        assert self.recorder is not None
        # Their own spam filter: a crash-looping copy must not silence our own warnings.
        mirrored = ObjectEvents(self.recorder, kind.resource, SpamFilter())
        for w in self.workers.values():
            self.worker_events[kind.name, w.name] = WorkerEvents(
                w, kind, informer, mirrored, unschedulable_timeout=self.cfg.unschedulable_timeout,
                on_stuck=self._stuck_handler(kind), progress=self.cfg.progress)

    def _wake(self, keys: list[QueueKey], *, urgent: bool = True) -> None:
        # Ahead of the queue: behind a burst of new Jobs (each of whose first pass only joins the
        # line) an ordinary add kept the head of line from the room it was woken for until the
        # whole backlog had drained, 30-63 s with every worker near empty (10,000-Job runs).
        for key in keys:
            if key.kind in self.kinds:
                self.queue.add(key, urgent=urgent, why="room" if urgent else "hold-lapsed")

    def _room_appeared(self, worker: str) -> None:
        """A bound pod left ``worker`` or one of its nodes changed: the Jobs first in line for it look again."""
        if self.placer is not None:
            self.placer.room_freed(worker)

    def _stuck_handler(self, kind: MirroredKind) -> Callable[[Obj, str, Stuck], None]:
        """A copy made no progress past a phase's deadline: its reconciler may move it (next pass)."""
        def on_stuck(obj: Obj, worker: str, stuck: Stuck) -> None:
            self.reconcilers[kind.name].copy_stuck(obj["metadata"]["uid"], worker, stuck)
            self.queue.add(QueueKey(kind.name, key_of(obj)), why="stuck")
        return on_stuck

    def _manager_informer(self, kind: MirroredKind) -> Informer | NamespacedInformers:
        """The manager cache of ``kind``: bounded by the objects we handle, not by the cluster.

        With a ``namespaces`` allow-list, one watch per listed namespace (the API server
        filters); in every case only what :func:`worth_caching` keeps stays (no selector can
        say "managedBy is ours"), without managedFields. Those in namespaces no longer listed are
        found once at start (:meth:`_release_outside`).
        """
        cfg = self.cfg

        def keep(obj: Obj) -> bool:
            return worth_caching(kind, obj, claimed=self.claim.claims(kind, obj))

        assert self.watches is not None
        if cfg.namespaces:
            return NamespacedInformers(self.watches, kind.resource, cfg.namespaces, keep=keep,
                                      transform=without_managed_fields)
        return Informer(self.watches, kind.resource, keep=keep, transform=without_managed_fields)

    async def _release_outside(self, kind: MirroredKind) -> None:
        """Release our finalizer from objects in namespaces no longer listed (``namespaces`` narrowed).

        Only there can they be, since we add it only in listed namespaces: one paged list at
        start whose field selector excludes the listed namespaces, each object released (or
        left, when not ours) by the reconciler's own rule. A failure is logged and left for
        the next start; it never blocks the controller.
        """
        assert self.manager is not None
        if not self.cfg.namespaces:
            return  # every namespace is watched: the informer sees them all
        outside = ",".join(f"metadata.namespace!={ns}" for ns in self.cfg.namespaces)
        try:
            items, _ = await self.manager.list_all(kind.resource, None, field_selector=outside)
        except ApiError as exc:
            log.warning("listing %ss outside namespaces %s to release our finalizer failed: %s", kind.name,
                        self.cfg.namespaces, exc)
            return
        for obj in items:
            if holds_finalizer(obj):
                try:
                    await self.reconcilers[kind.name].release_if_unclaimed(obj)
                except ApiError as exc:
                    log.warning("releasing %s %s failed (retried at the next start): %s", kind.name, key_of(obj), exc)

    @property
    def jobs(self) -> Informer | NamespacedInformers | None:
        """The manager's Job cache."""
        return self.informers.get(JOB_KIND.name)

    def _manager_handler(self, kind: MirroredKind) -> Callable[[str, Obj | None, Obj], None]:
        def on_manager_object(etype: str, old: Obj | None, new: Obj) -> None:
            if etype == "DELETED":
                # Gone from the cache (deleted, or no longer ours to cache): drop its records.
                uid = (old or new)["metadata"].get("uid", "")
                self.reconcilers[kind.name].forget(uid)
                self.events[kind.name].forget(uid)
                for we in self.worker_events.values():
                    we.forget(uid)
                self.reconcilers[kind.name].writes.forget(key_of(new))
                if not holds_finalizer(new):
                    # Deleted or dropped (finished and let go) without our finalizer: a pass would find
                    # nothing of it — its copies were deleted before the finalizer was released, and
                    # a copy someone else's edit left behind is the garbage collector's.
                    return
            key = QueueKey(kind.name, key_of(new))
            if etype == "MODIFIED" and self.queue.in_pass(key):
                # A pass of this object is writing it: the event may be the echo of a write whose answer
                # has not reached the pass yet. Judged when the pass ends, its writes all recorded.
                self._during_pass.setdefault(key, []).append((old, new))
                return
            self._judge_manager_event(kind, key, etype, old, new)

        return on_manager_object

    def _judge_manager_event(self, kind: MirroredKind, key: QueueKey, etype: str, old: Obj | None, new: Obj) -> None:
        """Queue a pass for a manager object's watch event unless it cannot change what a pass does."""
        if not self.claim.claims(kind, new):
            if holds_finalizer(new):
                # Maybe claimed before namespaces/controllerName changed: the reconcile decides.
                self.queue.add(key, why=f"manager-{etype.lower()}")
            return
        if etype == "MODIFIED" and self.reconcilers[kind.name].writes.is_echo(new):
            return  # what a pass of ours wrote (or a version before it) and went on with
        self.queue.add(key, why=f"manager-{etype.lower()}")

    def _copy_handler(self, kind: MirroredKind, worker: str) -> Callable[[str, Obj | None, Obj], None]:
        def on_copy(etype: str, old: Obj | None, new: Obj) -> None:
            key = manager_key_of(kind.name, new)
            if key:
                uid = labels_of_copy(new).manager_uid
                reconciler = self.reconcilers[kind.name]
                deleted_here = etype == "DELETED" and reconciler.acting.deletion_echo(new["metadata"].get("uid", ""))
                if not needs_pass(etype, new, created_here=uid in reconciler.acting.attempted[worker],
                                  manager=self.informers[kind.name].get(key), deleted_here=deleted_here):
                    return
                changed = etype != "DELETED" and status_changed(old, new)
                pending = bool(uid and reconciler.status_lag.pending_for(uid) is not None)
                if uid and changed:
                    reconciler.status_lag.changed(uid, worker)
                hold = event_hold(old, new, pending=pending, period=self.cfg.status_batch_period) if changed else 0.0
                if hold > 0:  # running counters only: one pass, when the batch is due
                    self.queue.add_after(QueueKey(kind.name, key), hold, why="copy-batched")
                    return
                # A copy that just finished (or was decided) goes ahead of Jobs waiting for
                # dispatch: behind a 1000-Job burst its Complete waited ~15 s at p99. Only that
                # change: making every counter update urgent cost a third of the dispatch rate
                # (A/B in the README) because updates no longer folded together in the queue.
                self.queue.add(QueueKey(kind.name, key), urgent=changed and newly_decided(kind, old, new),
                               why=f"copy-{etype.lower()}")

        return on_copy

    async def _reconcile(self, key: QueueKey) -> float | None:
        try:
            return await self.reconcilers[key.kind].reconcile(key.key)
        finally:
            for old, new in self._during_pass.pop(key, ()):
                self._judge_manager_event(self.kinds[key.kind], key, "MODIFIED", old, new)

    # -- health -----------------------------------------------------------------------------

    def liveness(self) -> tuple[bool, str]:
        return (not self._stopping.is_set(), "ok")

    @property
    def is_leader(self) -> bool:
        """Leading right now: the Lease's renew deadline has not passed (always, without election)."""
        if not self.cfg.leader_election.enabled:
            return True
        return self._elector is not None and self._elector.is_leader()

    def readiness(self) -> tuple[bool, str]:
        if self.cfg.leader_election.enabled and not self.is_leader:
            return True, "standby (not the leader)"
        for name, informer in self.informers.items():
            if not informer.synced.is_set():
                return False, f"manager {name} cache not synced"
        if not self.informers:
            return False, "manager Job cache not synced"
        return True, "ok"

    # -- run --------------------------------------------------------------------------------

    async def _run_controller(self) -> None:
        assert self.manager is not None and self.informers
        self.leading = True
        metrics.LEADER.set(1)
        spawn = self._spawn
        for informer in self.informers.values():
            spawn(informer.run(), f"manager-{informer.resource.plural}-informer")
        if self.namespaces is not None:
            spawn(self.namespaces.run(), "manager-namespaces-informer")
        if self.priority_classes is not None:
            spawn(self.priority_classes.run(), "manager-priorityclasses-informer")
        usable = [w for w in self.workers.values() if w.config_error is None and w.held is None]
        for i, w in enumerate(usable):
            if i:  # each worker's first lists open a few TLS connections: 50 at once are ~250 handshakes
                await asyncio.sleep(WORKER_START_STAGGER)
            self._start_worker(w)
        for w in self.workers.values():
            spawn(w.probe_loop(), f"{w.name}-probe")
            if w.config_error is None and w.held is not None:
                spawn(self._admit(w), f"{w.name}-admit")
        if self.rooms:
            spawn(self._export_rooms(), "room-metrics")
        spawn(self._export_tenants(), "tenant-metrics")
        spawn(self._tend_line(), "waiting-line")
        spawn(self._look_after_unhealthy(), "in-sync-on-unhealthy-workers")
        for informer in self.informers.values():
            await informer.wait_synced()
        # Give reachable workers a moment to sync and answer a probe, so the first placements
        # see all of them, their load and their room (else the first Jobs all go to whichever worker
        # answered first, or to one whose ServiceAccounts were not listed yet); an unreachable one
        # must not hold up the others.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(
                *(i.synced.wait() for w in usable for i in self._worker_watches(w)),
                *(w.probed.wait() for w in self.workers.values())), 10)
        assert self.placer is not None
        if self.namespaces is not None:  # tenants by namespaceSelector: what runs counts for the right one
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.namespaces.wait_synced(), 10)
        for name, informer in self.informers.items():
            claimed = [o for o in informer.items() if self.claim.claims(self.kinds[name], o)]
            # What runs already counts for its tenant before the first placement; 20,000 of them at a
            # failover were 0.2-0.3 s without a turn of the loop, so they yield every thousand.
            async for o in paced(claimed):
                self.placer.observe(self.kinds[name], o, ())
            log.info("caches synced; %d claimed %ss", len(claimed), name)
            spawn(self._release_outside(self.kinds[name]), f"release-outside-{name}")
        spawn(gc.gc_loop(self.manager, list(self.workers.values()), self.origin, self.cfg.gc_interval,
                         list(self.kinds.values()), self.manager_cluster, caches=self.informers), "gc")
        await self.queue.run_workers(self.cfg.workers_concurrency, self._reconcile)

    def _worker_watches(self, w: WorkerCluster) -> list[RecordInformer[Any]]:
        """The worker's copy caches and its room view's watches: what the first placements read."""
        room = self.rooms.get(w.name)
        return [*w.informers(), *(room.informers() if room is not None else ())]

    def _start_worker(self, w: WorkerCluster) -> None:
        """Its copy caches and the mirroring of its events (never for an unusable or held worker)."""
        for informer in w.informers():
            self._spawn(informer.run(), f"{w.name}-{informer.resource.plural}-informer")
        room = self.rooms.get(w.name)
        for watch in room.informers() if room is not None else ():
            # Not part of the worker's health: an unreadable room is "unknown", never "full".
            self._spawn(watch.run(), f"{w.name}-room-{watch.resource.plural}")
        for (kind, worker), we in self.worker_events.items():
            if worker == w.name:
                self._spawn(we.informer.run(), f"{w.name}-{kind}-warning-events")
                self._spawn(we.check_loop(), f"{w.name}-{kind}-unschedulable-check")

    async def _admit(self, w: WorkerCluster, *, cap: float = 60.0) -> None:
        """Read a held worker's identity until it answers (doubling waits up to ``cap``, each
        failure counted and shown as its unhealthy reason), check it against the admitted
        workers, then start it; a conflict keeps it out for good, with the reason."""
        delay = 1.0
        while True:
            try:
                ident = await read_identity(w.client, attempts=1)
                break
            except IdentityUnavailable as exc:
                metrics.WORKER_IDENTITY_FAILURES.labels(w.name).inc()
                w.hold(f"cluster identity not verified yet (next try in {delay:.0f}s): {exc}")
            await asyncio.sleep(delay)
            delay = min(cap, delay * 2)
        known = {o.name: o.identity for o in self.workers.values() if o.identity is not None and o is not w}
        problems = cluster_conflicts(self.manager_cluster, {**known, w.name: ident}, origin=self.cfg.origin)
        if problems:
            w.config_error = "; ".join(problems)
            w.hold(w.config_error)
            log.error("worker %s is kept out: %s", w.name, w.config_error)
            return
        w.admit(ident, is_manager=ident == self.manager_cluster)
        self._start_worker(w)

    async def _export_rooms(self, interval: float = 10.0) -> None:
        """The capacity gauges of every worker's room view, refreshed every ``interval`` seconds
        (every second until each view has synced once)."""
        for name in self.rooms:
            metrics.REPLACEMENTS.labels(name)  # exported at 0 from the start, not only after a first move
        while True:
            for room in self.rooms.values():
                if room.synced:
                    room.export()
            await asyncio.sleep(interval if all(r.synced for r in self.rooms.values()) else 1.0)

    async def _export_tenants(self, interval: float = 10.0) -> None:
        """The per-tenant gauges (running, waiting, dominant share, quota used) every ``interval`` seconds."""
        while True:
            if self.placer is not None:
                self.placer.export()
            await asyncio.sleep(interval)

    async def _tend_line(self) -> None:
        """The waiting Jobs' clock: every WAITING_RECHECK seconds the first in each worker's line looks
        for room again, and every resync period the next BEHIND_WAKES too (room that appeared without
        an event, a rank that changed with time). No waiting Job has a timer of its own."""
        last_deep = time.monotonic()
        while True:
            await asyncio.sleep(WAITING_RECHECK)
            if self.placer is None:
                continue
            deep = time.monotonic() - last_deep >= self.cfg.resync_period
            if deep:
                last_deep = time.monotonic()
            self.placer.wake_waiting(behind=BEHIND_WAKES if deep else 0)

    async def _look_after_unhealthy(self, interval: float = UNHEALTHY_CHECK) -> None:
        """Jobs in sync keep no timer (mirror.in_sync): every ``interval`` seconds, those placed on a
        worker that is not healthy now get a pass, which waits, moves or finishes them."""
        while True:
            await asyncio.sleep(interval)
            for name, reconciler in self.reconcilers.items():
                for worker in reconciler.in_sync.workers():
                    w = self.workers.get(worker)
                    if w is None or not w.healthy:
                        for key in reconciler.in_sync.take(worker):
                            self.queue.add(QueueKey(name, key), why="worker-unhealthy")

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.append(task)

        def done(t: asyncio.Task[None]) -> None:
            if not t.cancelled() and t.exception() is not None:
                log.error("task %s died: %r", name, t.exception())

        task.add_done_callback(done)

    async def run(self, *, health: bool = True) -> None:
        try:
            await self.connect()
        except BaseException:  # e.g. a worker-list ConfigError: close the clients opened so far
            await self.stop()
            raise
        inspect_api = None
        if self.cfg.inspect_address:
            assert self.manager is not None
            # Its own client and pool on the manager: the reviews are POSTs, which leader election
            # gates on the controller's client, and a standby replica answers users too.
            reviews = self.manager.sibling("inspect", pool_size=8, qps=20, burst=40)
            reviews.write_gate = None
            tls = self.cfg.inspect_tls
            ssl_context = inspect_tls.server_context(tls.cert_file if tls else None, tls.key_file if tls else None,
                                                     service_hosts=inspect_tls.INSPECT_SERVICE_HOSTS)
            # Worker reads on their own pools, one connection per allowed stream and a few for
            # describe: a user's `logs -f` never takes a connection the reconciler needs.
            cfg = self.cfg
            readers = {n: w.client.sibling("inspect", pool_size=cfg.inspect_max_streams + 4, qps=20, burst=40)
                       for n, w in self.workers.items()}
            inspect_api = self.inspect_api = InspectApi(
                cfg.inspect_address, reviews, readers, cfg.controller_name, ssl_context,
                max_streams=cfg.inspect_max_streams, max_streams_per_user=cfg.inspect_max_streams_per_user,
                write_timeout=cfg.inspect_write_timeout, queue=self.placer.queue if self.placer is not None else None,
                fleet=lambda: [w.describe() for w in self.workers.values()])
            await inspect_api.start()
        server = None
        if health and self.cfg.metrics_address:
            server = self.health_server = HealthServer(self.cfg.metrics_address, liveness=self.liveness,
                                                       readiness=self.readiness)
            await server.start()
        try:
            if self.cfg.leader_election.enabled:
                await self._run_with_leader_election()
            else:
                await self._run_controller()
        finally:
            await self.stop()
            if server is not None:
                await server.stop()
            if inspect_api is not None:
                await inspect_api.stop()

    async def _run_with_leader_election(self) -> None:
        """Lead while the Lease is held (kruntime.leaderelect: bounded Lease calls, a clock-based
        deadline); every write of ours is gated on it. Losing it ends the run: the process
        stops so that a fresh one can stand by."""
        assert self.manager is not None
        le = self.cfg.leader_election
        self._identity = f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        # Its own client: Lease calls never queue behind the controller's rate limiter.
        # Its own client and connections: Lease calls never queue behind the controller's rate
        # limiter nor wait for a connection the reconcilers or watches hold.
        lease_client = self.manager.sibling("lease", pool_size=2, qps=10, burst=20,
                                            timeout=min(self.cfg.request_timeout, le.renew_deadline / 2))
        elector = self._elector = LeaderElector(
            lease_client, le.namespace, le.lease_name, self._identity,
            Timing(le.lease_duration, le.renew_deadline, le.retry_period, lease_client.timeout))
        for client in (self.manager, *(w.client for w in self.workers.values())):
            client.write_gate = elector.is_leader

        async def lead() -> None:
            log.info("became leader (%s)", self._identity)
            self._led = True
            await self._run_controller()

        await elector.run(lead)
        if elector.lost_at is not None:
            self.leading = False
            metrics.LEADER.set(0)
            log.warning("lost leadership; stopping so that a fresh process can take over")

    async def _release_lease(self) -> None:
        """Hand the Lease back once our work has stopped, so the standby leads after its next
        retryPeriod instead of waiting out leaseDuration (a rolling update, a deleted Pod).
        Only if we still hold it, with the read resourceVersion as precondition."""
        if self._elector is not None:
            await self._elector.release()

    async def stop(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        metrics.LEADER.set(0)
        await self.queue.shutdown()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.recorder is not None:
            await self.recorder.flush()
        if self._led:
            await self._release_lease()
        for w in self.workers.values():
            await w.client.close()
        if self.manager is not None:
            await self.manager.close()
