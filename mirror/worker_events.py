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
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobapi.times import parse_time, utcnow
from kruntime.bounded import LruDict
from kruntime.client import ApiError
from kruntime.events import ObjectEvents
from kruntime.informer import Informer, ObjectCache
from kruntime.resources import EVENTS, PODS, Obj, key_of
from mirror import metrics
from mirror.event_reasons import COPY_UNSCHEDULABLE, WORKER_WARNING
from mirror.identity import is_copy_of, manager_key_of
from mirror.kinds import CopyPods, MirroredKind
from mirror.workers import WorkerCluster

log = logging.getLogger(__name__)

WARNING = "Warning"
#: events last seen longer ago than this are history (a relist after a restart), not news
RECENT = timedelta(minutes=5)
#: pods whose owner was looked up, by pod uid (copy uid, or "" when not one of ours)
MAX_TRACKED_PODS = 20_000
#: a generated name is cut to 63 characters: the owner's name may be cut too
_MAX_NAME = 63


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
                 on_stuck: Callable[[Obj, str, str], None] | None = None) -> None:
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
        self.informer = Informer(worker.watch_client, EVENTS, field_selector=f"type={WARNING}", keep=self._keep)
        self.informer.add_handler(self._on_event)
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
                self.on_stuck(job, self.worker.name, message)

    async def check_loop(self) -> None:
        interval = max(1.0, min(30.0, self.unschedulable_timeout / 4))
        while True:
            await asyncio.sleep(interval)
            started = time.monotonic()
            await self.check_unschedulable()
            log.debug("worker %s: unschedulable check took %.2fs", self.worker.name, time.monotonic() - started)

