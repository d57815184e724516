"""Pod watch events for the Job controller: the pod index and what each event means for Jobs.

Upstream's ``addPod``/``updatePod``/``deletePod`` and orphan handling: a pod event lowers
the expectations of the Job that owns it and enqueues that Job (batched), an orphan with
a tracking finalizer is queued so the finalizer is dropped, and the pod index (two
secondary indexes on the shared pod ``Informer``) answers "which pods may this Job claim"
without scanning every pod.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from builtin_controller import fields, metrics, pods
from builtin_controller.expectations import ControllerExpectations, FinalizerExpectations
from builtin_controller.pod_control import PodControl
from jobapi.objects import OwnerReference
from kruntime.client import ApiError
from kruntime.informer import Informer
from kruntime.resources import Obj, key_of
from kruntime.workqueue import WorkQueue

log = logging.getLogger(__name__)

#: Delay that folds a burst of pod events into one sync.
SYNC_BATCH_PERIOD = 1.0

OrphanKey = tuple[str, str, str]  # ("name" | "selector", namespace, pod name | selector JSON)

BY_CONTROLLER_UID = "controller-uid"
ORPHANS_BY_NAMESPACE = "orphans-by-namespace"


def _controller_uid(pod: Obj) -> Iterable[str]:
    ref = fields.controller_ref(pod)
    return (str(ref.get("uid")),) if ref is not None else ()


def _orphan_namespace(pod: Obj) -> Iterable[str]:
    return () if fields.controller_ref(pod) is not None else (fields.namespace(pod),)


@dataclass
class PodEvents:
    job_informer: Informer
    pod_informer: Informer
    expectations: ControllerExpectations
    finalizer_expectations: FinalizerExpectations
    pod_control: PodControl
    orphan_queue: WorkQueue[OrphanKey]
    #: enqueue a Job for a sync after a delay
    enqueue: Callable[[Obj, float], None]
    #: whether this controller handles the object's namespace
    watched: Callable[[Obj], bool]

    def __post_init__(self) -> None:
        self.pod_informer.add_index(BY_CONTROLLER_UID, _controller_uid)
        self.pod_informer.add_index(ORPHANS_BY_NAMESPACE, _orphan_namespace)
        self.pod_informer.add_handler(self.on_pod)

    # -- the pod index ------------------------------------------------------------------------

    def candidate_pods(self, job: Obj) -> list[Obj]:
        """Pods the Job owns, and orphans in its namespace it might adopt."""
        return (self.pod_informer.by_index(BY_CONTROLLER_UID, fields.uid(job))
                + self.pod_informer.by_index(ORPHANS_BY_NAMESPACE, fields.namespace(job)))

    def _resolve(self, namespace: str, ref: OwnerReference) -> Obj | None:
        if ref.get("kind") != "Job":
            return None
        job = self.job_informer.get(f"{namespace}/{ref.get('name')}")
        if job is None or fields.uid(job) != ref.get("uid"):
            return None
        return job

    def _jobs_selecting(self, pod: Obj) -> list[Obj]:
        ns = fields.namespace(pod)
        lbls = fields.labels_of(pod)
        return [j for j in self.job_informer.items()
                if fields.namespace(j) == ns and pods.selector_matches(fields.spec(j).get("selector"), lbls)]

    def enqueue_selector(self, job: Obj) -> None:
        """Queue the pods a (finished or deleted) Job selects, to drop leftover finalizers."""
        sel = fields.spec(job).get("selector")
        if sel is None:
            return
        self.orphan_queue.add(("selector", fields.namespace(job), json.dumps(sel, sort_keys=True)))

    def _orphaned(self, pod: Obj) -> None:
        self.orphan_queue.add(("name", fields.namespace(pod), fields.name(pod)))

    # -- handlers -----------------------------------------------------------------------------

    def on_pod(self, etype: str, old: Obj | None, new: Obj) -> None:
        if not self.watched(new):
            return
        if etype == "ADDED":
            metrics.record_finished_pod_with_finalizer(None, new)
            self._pod_added(new)
        elif etype == "MODIFIED":
            assert old is not None
            metrics.record_finished_pod_with_finalizer(old, new)
            self._pod_updated(old, new)
        else:
            metrics.record_finished_pod_with_finalizer(old or new, None)
            self._pod_deleted(new, final=True)

    def _pod_added(self, pod: Obj) -> None:
        if fields.deletion_timestamp(pod) is not None:
            # Seen for the first time already terminating (e.g. after a restart):
            # it is not the creation we might be waiting for.
            self._pod_deleted(pod, final=False)
            return
        ref = fields.controller_ref(pod)
        if ref is not None:
            job = self._resolve(fields.namespace(pod), ref)
            if job is None:
                return
            self.expectations.creation_observed(key_of(job))
            self.enqueue(job, SYNC_BATCH_PERIOD)
            return
        if fields.has_tracking_finalizer(pod):
            self._orphaned(pod)
        for job in self._jobs_selecting(pod):
            self.enqueue(job, SYNC_BATCH_PERIOD)

    def _pod_updated(self, old: Obj, cur: Obj) -> None:
        if fields.md(old).get("resourceVersion") == fields.md(cur).get("resourceVersion"):
            return
        if fields.deletion_timestamp(cur) is not None:
            # Graceful deletion started: the replacement may be created right away.
            self._pod_deleted(cur, final=False)
            return
        finalizer_removed = not fields.has_tracking_finalizer(cur)
        cur_ref = fields.controller_ref(cur)
        old_ref = fields.controller_ref(old)
        ref_changed = cur_ref != old_ref
        if ref_changed and old_ref is not None:
            job = self._resolve(fields.namespace(old), old_ref)
            if job is not None:
                if finalizer_removed:
                    self.finalizer_expectations.observed(key_of(job), fields.uid(cur))
                self.enqueue(job, SYNC_BATCH_PERIOD)
        if cur_ref is not None:
            job = self._resolve(fields.namespace(cur), cur_ref)
            if job is None:
                return
            if finalizer_removed:
                self.finalizer_expectations.observed(key_of(job), fields.uid(cur))
            self.enqueue(job, SYNC_BATCH_PERIOD)
            return
        if fields.has_tracking_finalizer(cur):
            self._orphaned(cur)
        if ref_changed or fields.labels_of(cur) != fields.labels_of(old):
            for job in self._jobs_selecting(cur):
                self.enqueue(job, SYNC_BATCH_PERIOD)

    def _pod_deleted(self, pod: Obj, *, final: bool) -> None:
        ref = fields.controller_ref(pod)
        has_fin = fields.has_tracking_finalizer(pod)
        if ref is None:
            if has_fin:
                self._orphaned(pod)
            return
        job = self._resolve(fields.namespace(pod), ref)
        if job is None or fields.is_finished(job):
            if has_fin:
                self._orphaned(pod)
            return
        key = key_of(job)
        self.expectations.deletion_observed(key)
        if final or not has_fin:
            self.finalizer_expectations.observed(key, fields.uid(pod))
        self.enqueue(job, SYNC_BATCH_PERIOD)

    # -- orphan pods --------------------------------------------------------------------------

    async def handle_orphans(self, key: OrphanKey) -> None:
        kind, ns, value = key
        if kind == "name":
            pod = self.pod_informer.get(f"{ns}/{value}")
            if pod is not None:
                await self._handle_orphan(pod)
            return
        selector = json.loads(value)
        for p in [p for p in self.pod_informer.items() if fields.namespace(p) == ns]:
            if pods.selector_matches(selector, fields.labels_of(p)):
                try:
                    await self._handle_orphan(p)
                except ApiError as exc:
                    # Retried on its own, with backoff (upstream does this from 1.37).
                    log.warning("removing finalizer from orphan pod %s: %s", key_of(p), exc)
                    self.orphan_queue.add_rate_limited(("name", ns, fields.name(p)))

    async def _handle_orphan(self, pod: Obj) -> None:
        """Drop the tracking finalizer from a pod no running Job of ours will count."""
        ref = fields.controller_ref(pod)
        if ref is not None:
            if ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
                return
            job = self._resolve(fields.namespace(pod), ref)
            if job is not None:
                if fields.managed_by_external(job) is not None:
                    return
                if not fields.is_finished(job):
                    return  # adopted: its Job will count it
        await self.pod_control.remove_orphan_finalizer(pod)
