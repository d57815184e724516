"""Worker-side problems, told on the manager Job: the copy's and its pods' Warning events.

A user watching the manager Job sees neither the worker's quota refusing the copy's pods
(``FailedCreate``), nor the scheduler finding no room (``FailedScheduling``), nor a
crash loop (``BackOff``) or an image that cannot be pulled. Per worker, one watch on
``type=Warning`` events (field selector: Normal events never reach us); only events whose
involved object is one of our copies or, by its name, may be one of their pods are kept in
the cache, so memory follows our copies' problems, not the cluster's. A pod's owner is
confirmed once from the pod itself (its controller-uid label) and remembered in a bounded
map. Mirrored events go through their own spam filter, so a crash-looping copy can never
silence the controller's own warnings on that Job; the recorder folds repeats into counts.

A copy whose pod stays unschedulable longer than ``unschedulableTimeout`` gets one
``CopyUnschedulable`` event, checked from the pod's ``PodScheduled`` condition.

With a :class:`~mirror.progress.ProgressConfig`, the same check loop also finds copies that
make no progress at all (issue 36): from the cached copies alone it picks those past their
first deadline whose status counts nothing that ran, reads the pods of at most
``maxLooksPerRound`` of them (least recently read first), and judges them with
:func:`mirror.progress.progress` against the worker's Warning events about them (kept in the
event cache, indexed by the involved object's uid). A stuck copy gets one ``CopyStuck``
event per phase and is told to ``on_stuck``; a copy seen with a started container is never
read again. Enough copies with no pod and no word from the worker's controller mark the
worker *stalled* (:meth:`mirror.workers.WorkerCluster.set_stalled`) until a copy there shows
that controller at work again: a counted copy or a newer one with a status, or any copy's status
changing meanwhile (only that controller writes it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from jobapi.times import parse_time, utcnow
from kruntime.bounded import LruDict
from kruntime.client import ApiError
from kruntime.events import ObjectEvents
from kruntime.informer import EventType, Informer, ObjectCache, without_managed_fields
from kruntime.resources import EVENTS, PODS, Obj, key_of
from mirror import metrics
from mirror.event_reasons import COPY_STUCK, COPY_UNSCHEDULABLE, WORKER_WARNING
from mirror.identity import is_copy_of, manager_key_of
from mirror.kinds import CopyPods, MirroredKind
from mirror.progress import (
    Phase,
    ProgressConfig,
    Stuck,
    controller_acted,
    no_controller,
    progress,
    stalled_reason,
    stuck_message,
    unbound_cause,
    worth_a_look,
)
from mirror.workers import WorkerCluster

log = logging.getLogger(__name__)

WARNING = "Warning"
#: events last seen longer ago than this are history (a relist after a restart), not news
RECENT = timedelta(minutes=5)
#: pods whose owner was looked up, by pod uid (copy uid, or "" when not one of ours)
MAX_TRACKED_PODS = 20_000
#: a generated name is cut to 63 characters: the owner's name may be cut too
_MAX_NAME = 63
#: event informer index: the uid of the object an event is about
BY_INVOLVED_UID = "involved-uid"
_EPOCH = datetime.min.replace(tzinfo=UTC)


# -- pure ---------------------------------------------------------------------------------------


def event_time(ev: Obj) -> datetime | None:
    """When the event was last observed, whichever API (core/v1 or events.k8s.io) wrote it."""
    series = ev.get("series") or {}
    for value in (series.get("lastObservedTime"), ev.get("lastTimestamp"), ev.get("eventTime"),
                  ev.get("firstTimestamp"), (ev.get("metadata") or {}).get("creationTimestamp")):
        t = parse_time(value)
        if t is not None:
            return t
    return None


def event_count(ev: Obj) -> int:
    series = ev.get("series") or {}
    return int(series.get("count") or ev.get("count") or 1)


def is_news(etype: str, old: Obj | None, new: Obj, now: datetime) -> bool:
    """A Warning to pass on: new or seen again (count grew), and recent (not a relist's history)."""
    if etype == "DELETED" or new.get("type") != WARNING:
        return False
    if etype == "MODIFIED" and old is not None and event_count(new) <= event_count(old):
        return False
    seen = event_time(new)
    return seen is None or now - seen <= RECENT


def mirrored_message(worker: str, ev: Obj) -> str:
    inv = ev.get("involvedObject") or ev.get("regarding") or {}
    what = f"{inv.get('kind', '?')} {inv.get('namespace', '')}/{inv.get('name', '?')}"
    note = ev.get("message") or ev.get("note") or ""
    return f"on worker {worker}, {what}: {note}"


def unschedulable_since(pod: Obj) -> datetime | None:
    """When the pod's scheduling started failing; None when it is scheduled (or not failing)."""
    if (pod.get("spec") or {}).get("nodeName"):
        return None
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return parse_time(c.get("lastTransitionTime")) or parse_time(pod["metadata"].get("creationTimestamp"))
    return None


def unschedulable_message(worker: str, pod: Obj, since: datetime, timeout: float) -> str:
    msg = next((c.get("message", "") for c in (pod.get("status") or {}).get("conditions") or []
                if c.get("type") == "PodScheduled"), "")
    md = pod["metadata"]
    # No changing duration in the text: a repeat would fold into the same event's count.
    return (f"the copy's pod {md['namespace']}/{md['name']} on worker {worker} has been unschedulable since "
            f"{since.strftime('%Y-%m-%dT%H:%M:%SZ')}, longer than unschedulableTimeout ({timeout:.0f}s): {msg}")


def _involved_uid(ev: Obj) -> tuple[str, ...]:
    uid = (ev.get("involvedObject") or ev.get("regarding") or {}).get("uid")
    return (str(uid),) if uid else ()


# -- I/O ----------------------------------------------------------------------------------------


@dataclass
class _Stuck:
    namespace: str
    pod: str
    manager_key: str


class WorkerEvents:
    """The Warning events of one worker's copies (and their pods), told on the manager objects."""

    def __init__(self, worker: WorkerCluster, kind: MirroredKind, manager: ObjectCache,
                 events: ObjectEvents, *, unschedulable_timeout: float,
                 clock: Callable[[], datetime] = utcnow,
                 on_stuck: Callable[[Obj, str, Stuck], None] | None = None,
                 progress: ProgressConfig | None = None) -> None:
        if kind.pods is None:
            raise ValueError(f"kind {kind.name} does not say how its copies' pods are named: no worker events")
        self.worker = worker
        self.kind = kind
        self.pods: CopyPods = kind.pods
        self.manager = manager
        self.events = events
        self.unschedulable_timeout = unschedulable_timeout
        self.clock = clock
        #: told (manager object, worker, why) when a copy's pod stays unschedulable past the timeout
        self.on_stuck = on_stuck
        self.copies = worker.kinds[kind.name].informer
        self.informer = Informer(worker.watch_client, EVENTS, field_selector=f"type={WARNING}", keep=self._keep,
                                 transform=without_managed_fields)
        self.informer.add_handler(self._on_event)
        self.informer.add_index(BY_INVOLVED_UID, _involved_uid)
        #: phase deadlines (None: only the unschedulable check runs)
        self.progress = progress
        #: copy uids seen with a started container: never judged again
        self._ran: LruDict[str, None] = LruDict(MAX_TRACKED_PODS)
        #: copy uid -> the phase it was told stuck in (once per phase)
        self._told_phase: LruDict[str, Phase] = LruDict(MAX_TRACKED_PODS)
        #: copy uid -> when its pods were last read (least recently read first)
        self._looked: LruDict[str, datetime] = LruDict(MAX_TRACKED_PODS)
        #: copy uids last seen with no pod and no word from the worker's controller past the deadline
        self._silent: LruDict[str, None] = LruDict(MAX_TRACKED_PODS)
        #: the stall: when it began and the copies counted in it
        self._stalled_since: datetime | None = None
        self._stall_counted: set[str] = set()
        #: a copy's status changed while the worker counted stalled (see :meth:`_on_copy`)
        self._status_written = False
        self.copies.add_handler(self._on_copy)
        #: pod uid -> the uid of the copy owning it ("" = not one of ours)
        self._pod_owner: LruDict[str, str] = LruDict(MAX_TRACKED_PODS)
        #: manager uid -> a pod of its copy that failed scheduling (checked against the timeout)
        self._stuck: LruDict[str, _Stuck] = LruDict(MAX_TRACKED_PODS)
        #: manager uids told they are unschedulable (once per Job until its pod schedules)
        self._told: LruDict[str, None] = LruDict(MAX_TRACKED_PODS)

    # -- which events are ours ----------------------------------------------------------------

    def _copy_named(self, namespace: str, name: str) -> Obj | None:
        return self.copies.get(f"{namespace}/{name}")

    def _pod_candidates(self, namespace: str, pod_name: str) -> list[Obj]:
        found = self.pods.owner_candidates(pod_name, lambda name: self._copy_named(namespace, name))
        if not found and len(pod_name) >= _MAX_NAME:  # the owner's name was cut: compare prefixes
            found = [c for c in self.copies.items() if c["metadata"].get("namespace") == namespace
                     and pod_name.startswith(c["metadata"]["name"][: _MAX_NAME - 6])]
        return found

    def _keep(self, ev: Obj) -> bool:
        inv = ev.get("involvedObject") or {}
        ns, name = inv.get("namespace") or "", inv.get("name") or ""
        if inv.get("kind") == self.kind.resource.kind:
            c = self._copy_named(ns, name)
            return c is not None and c["metadata"].get("uid") == inv.get("uid")
        if inv.get("kind") == "Pod":
            owner = self._pod_owner.get(str(inv.get("uid")))
            return bool(owner) if owner is not None else bool(self._pod_candidates(ns, name))
        return False

    async def _copy_of_pod(self, inv: Obj) -> Obj | None:
        ns, name, uid = inv.get("namespace") or "", inv.get("name") or "", str(inv.get("uid") or "")
        owner = self._pod_owner.get(uid)
        candidates = self._pod_candidates(ns, name)
        if owner is None:
            try:
                pod = await self.worker.client.get(PODS, ns, name)
            except ApiError as exc:
                if not exc.not_found:
                    log.info("worker %s: reading pod %s/%s to map its event failed: %s", self.worker.name, ns, name,
                             exc)
                return None
            owner = self.pods.owner_uid(pod)
            ours = {c["metadata"].get("uid") for c in candidates}
            self._pod_owner[pod["metadata"].get("uid") or uid] = owner if owner in ours else ""
            owner = self._pod_owner[pod["metadata"].get("uid") or uid]
        return next((c for c in candidates if c["metadata"].get("uid") == owner), None) if owner else None

    def _manager_of(self, copy: Obj) -> Obj | None:
        key = manager_key_of(self.kind.name, copy)
        job = self.manager.get(key) if key else None
        if job is None or not is_copy_of(self.kind.name, copy, job, origin=self.worker.kinds[self.kind.name].origin):
            return None
        return job

    # -- handlers ---------------------------------------------------------------------------------

    def _on_copy(self, etype: EventType, old: Obj | None, new: Obj) -> None:
        """Only the worker's own controller writes a copy's status (we never do): a change seen while the
        worker counts stalled shows that controller at work again. A copy that stayed through the stall (its
        pods had started) and now finishes says so even when the copies counted in the stall were moved off
        and, the worker being avoided, none is placed there any more (chaos job-controller-stopped)."""
        if (self._stalled_since is not None and etype == "MODIFIED" and old is not None
                and (old.get("status") or {}) != (new.get("status") or {})):
            self._status_written = True

    async def _on_event(self, etype: str, old: Obj | None, ev: Obj) -> None:
        if etype == "DELETED":
            return
        if not is_news(etype, old, ev, self.clock()):
            return
        inv = ev.get("involvedObject") or {}
        copy = (self._copy_named(inv.get("namespace") or "", inv.get("name") or "")
                if inv.get("kind") == self.kind.resource.kind else await self._copy_of_pod(inv))
        if copy is None:
            return
        job = self._manager_of(copy)
        if job is None:
            return
        reason = str(ev.get("reason") or WORKER_WARNING.reason)
        metrics.WORKER_WARNINGS.labels(self.worker.name).inc()
        self.events.event(job, WORKER_WARNING.type, reason, mirrored_message(self.worker.name, ev))
        if reason == "FailedScheduling" and inv.get("kind") == "Pod":
            uid = job["metadata"]["uid"]
            if uid not in self._stuck:
                self._stuck[uid] = _Stuck(inv.get("namespace") or "", inv.get("name") or "", key_of(job))

    def forget(self, manager_uid: str) -> None:
        """The manager object left the cache: drop what is kept for it."""
        self.events.forget(manager_uid)
        self._stuck.pop(manager_uid, None)
        self._told.pop(manager_uid, None)

    async def check_unschedulable(self) -> None:
        """Tell each Job whose copy's pod has been unschedulable longer than the timeout (once)."""
        now = self.clock()
        for uid, stuck in list(self._stuck.items()):
            try:
                pod = await self.worker.client.get(PODS, stuck.namespace, stuck.pod)
            except ApiError as exc:
                if exc.not_found:
                    self._stuck.pop(uid, None)
                else:
                    log.info("worker %s: checking pod %s/%s failed: %s", self.worker.name, stuck.namespace,
                             stuck.pod, exc)
                continue
            since = unschedulable_since(pod)
            if since is None:  # scheduled: a later failure is a new episode
                self._stuck.pop(uid, None)
                self._told.pop(uid, None)
                continue
            if (now - since).total_seconds() < self.unschedulable_timeout or uid in self._told:
                continue
            job = self.manager.get(stuck.manager_key)
            if job is None or job["metadata"].get("uid") != uid or self.worker.copy_of(self.kind, job) is None:
                self._stuck.pop(uid, None)
                continue
            self._told[uid] = None
            metrics.COPIES_UNSCHEDULABLE.labels(self.worker.name).inc()
            message = unschedulable_message(self.worker.name, pod, since, self.unschedulable_timeout)
            self.events.event(job, COPY_UNSCHEDULABLE.type, COPY_UNSCHEDULABLE.reason, message)
            if self.on_stuck is not None:
                self.on_stuck(job, self.worker.name, Stuck(Phase.PODS_CREATED, unbound_cause(pod), message))

    # -- progress (issue 36) ------------------------------------------------------------------

    def _events_about(self, uids: list[str]) -> list[Obj]:
        """The cached Warning events about these objects (a copy, its pods), oldest first."""
        found = [ev for uid in uids for ev in self.informer.by_index(BY_INVOLVED_UID, uid)]
        return sorted(found, key=lambda ev: event_time(ev) or _EPOCH)

    def _candidates(self, now: datetime, cfg: ProgressConfig) -> list[Obj]:
        """Copies worth reading this round, from the cache alone, least recently read first."""
        found = [c for c in self.copies.items() if c["metadata"].get("uid") not in self._ran
                 and not c["metadata"].get("deletionTimestamp") and not self.kind.is_finished(c)
                 and worth_a_look(c, now, cfg, unschedulable_timeout=self.unschedulable_timeout)]
        found.sort(key=lambda c: self._looked.get(c["metadata"].get("uid", ""), _EPOCH))
        return found[: cfg.max_looks_per_round]

    async def check_progress(self) -> None:
        """Tell each Job whose copy is stuck in a phase past its deadline (once per phase), and
        judge whether the worker runs nothing at all (stalled)."""
        cfg = self.progress
        if cfg is None:
            return
        now = self.clock()
        for copy in self._candidates(now, cfg):
            md = copy["metadata"]
            uid = str(md.get("uid") or "")
            self._looked[uid] = now  # first: a copy skipped below must not hold a slot every round
            job = self._manager_of(copy)
            if job is None:
                continue
            try:
                pods, _ = await self.worker.client.list_all(PODS, md.get("namespace"),
                                                            label_selector=self.pods.selector(copy))
            except ApiError as exc:
                log.info("worker %s: reading the pods of copy %s/%s failed: %s", self.worker.name,
                         md.get("namespace"), md.get("name"), exc)
                continue
            pods = [p for p in pods if self.pods.owner_uid(p) == uid]
            events = self._events_about([uid, *(str(p["metadata"].get("uid")) for p in pods)])
            p = progress(copy, pods, events, now, cfg, unschedulable_timeout=self.unschedulable_timeout,
                         controller=self.kind.name)
            if no_controller(p):
                self._silent[uid] = None
            else:
                self._silent.pop(uid, None)
            if p.phase >= Phase.CONTAINER_STARTED:
                self._ran[uid] = None
                self._told_phase.pop(uid, None)
                continue
            if p.stuck is None or self._told_phase.get(uid) == p.phase:
                continue
            if p.phase is Phase.PODS_CREATED and job["metadata"].get("uid") in self._told:
                continue  # CopyUnschedulable told it already, and on_stuck with it
            self._told_phase[uid] = p.phase
            metrics.COPIES_STUCK.labels(self.worker.name, p.phase.label).inc()
            message = stuck_message(self.worker.name, copy, p)
            self.events.event(job, COPY_STUCK.type, COPY_STUCK.reason, message)
            if self.on_stuck is not None:
                self.on_stuck(job, self.worker.name, Stuck(p.phase, p.stuck, message))
        self._judge_stall(now, cfg)

    def _judge_stall(self, now: datetime, cfg: ProgressConfig) -> None:
        """Stalled while enough copies sit silent; cleared once a copy shows the controller at work."""
        copies = self.copies.items()
        present = {str(c["metadata"].get("uid")) for c in copies}
        for uid in [u for u in self._silent if u not in present]:
            self._silent.pop(uid, None)
        if self._stalled_since is not None:
            if not self._status_written and not any(
                    controller_acted(c, self._stall_counted, self._stalled_since) for c in copies):
                return
            log.info("worker %s: its %s controller is at work again: no longer stalled", self.worker.name,
                     self.kind.name)
            self._stalled_since, self._stall_counted, self._status_written = None, set(), False
            self._silent.clear()
            self.worker.set_stalled(self.kind.name, None)
            return
        reason = stalled_reason(self.worker.name, len(self._silent), cfg, self.kind.name)
        if reason is not None:
            log.warning("worker %s is STALLED: %s", self.worker.name, reason)
            self._stalled_since, self._stall_counted = now, set(self._silent)
            self._status_written = False
            self.worker.set_stalled(self.kind.name, reason, now)

    async def check_loop(self) -> None:
        deadlines = [self.unschedulable_timeout]
        if self.progress is not None:
            deadlines += [self.progress.pods_created_timeout, self.progress.container_start_timeout]
        interval = max(1.0, min(30.0, min(deadlines) / 4))
        while True:
            await asyncio.sleep(interval)
            started = time.monotonic()
            await self.check_unschedulable()
            await self.check_progress()
            log.debug("worker %s: stuck-copy checks took %.2fs", self.worker.name, time.monotonic() - started)

