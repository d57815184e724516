"""The copy on the placed worker: found (cache, else a live read), created when missing, its
mutable spec kept in line with the manager's.

What a find-or-create came to is returned as a :class:`mirror.plan.Found` for the plan to judge
(a refusal, a decided object whose copy vanished, fields the worker dropped, held while
suspended); a refused spec patch backs off here (or, for a suspended copy running nothing, the
copy is deleted to be created again from the manager's template) — the plan says which.
"""

from __future__ import annotations

import logging

from jobapi.objects import not_ended
from kruntime.client import ApiError
from kruntime.resources import PODS, Obj
from mirror import metrics, tenancy
from mirror.acting import Acting
from mirror.copy_cleanup import delete_copy
from mirror.copy_namespaces import missing_namespace
from mirror.decisions import RETRY_CAP, Placement, is_refusal
from mirror.event_reasons import COPY_RECREATED, NAMESPACE_NOT_ALLOWED, WORKER_REFUSED
from mirror.plan import Found, IfAbsent
from mirror.workers import WorkerCluster

log = logging.getLogger(__name__)


async def find_or_create(a: Acting, job: Obj, worker: WorkerCluster, placement: Placement,
                         if_absent: IfAbsent) -> tuple[Obj | None, Found]:
    """The copy on the placed worker, or, when it has none, what the plan said (create it; a decided
    object's copy vanished; held while suspended), and what that came to; a refusal raises (the plan
    judges it)."""
    ns, uid = job["metadata"]["namespace"], job["metadata"]["uid"]
    if uid in a.attempted[worker.name] or not worker.synced(a.kind):
        # We may have created it a moment ago (the cache lags) or cannot trust the cache:
        # ask the server. Otherwise the synced cache is authoritative and we save a call.
        try:
            return await a.calls.call(worker, worker.client.get(a.resource, ns, placement.remote_name)), Found()
        except ApiError as exc:
            if not exc.not_found:
                raise
    if if_absent is IfAbsent.FINISH:
        return None, Found(vanished=f"its copy {ns}/{placement.remote_name} is gone from worker {worker.name}")
    if if_absent is IfAbsent.HOLD:
        return None, Found(held=True)
    body = a.kind.build_copy(job, origin=a.origin, origin_cluster=a.manager_cluster,
                             remote_name=placement.remote_name)
    try:
        created = await _create(a, job, worker, ns, body)
    except ApiError as exc:
        if exc.already_exists:
            return await a.calls.call(worker, worker.client.get(a.resource, ns, placement.remote_name)), Found()
        raise
    if created is None:
        return None, Found()
    dropped = a.kind.dropped_fields(body, created)
    if dropped:
        return created, Found(dropped=tuple(dropped))
    a.places.dispatched(worker.name, uid)
    metrics.DISPATCHES.labels(worker.name).inc()
    a.recalled(uid).refusals.pop("create", None)
    # No event: the Job's placement annotations already say where it runs and why, for as long as it
    # exists (an event expires after an hour), and a POST per Job cost a fifth of the manager calls.
    log.debug("%s/%s: created %s on worker %s", ns, job["metadata"]["name"], placement.remote_name, worker.name)
    return created, Found()


async def _create(a: Acting, job: Obj, worker: WorkerCluster, ns: str, body: Obj) -> Obj | None:
    if not tenancy.may_use(ns, a.cfg.worker_namespaces):
        a.say(job, NAMESPACE_NOT_ALLOWED, tenancy.not_allowed_reason(ns, a.cfg.worker_namespaces))
        return None
    await a.namespaces.check_posture(worker, ns)
    attempted, uid = a.attempted[worker.name], job["metadata"]["uid"]
    try:
        # Counted as attempted only once the create is sent: a pass parked or turned away before
        # sent nothing, and the worker's synced cache still answers for it without a GET (issue 38).
        return await a.calls.call(worker, worker.client.create(a.resource, ns, body),
                                  on_sent=lambda: attempted.add(uid))
    except ApiError as exc:
        if not missing_namespace(exc):
            raise
    if not await a.namespaces.make(job, worker, ns):
        return None
    return await a.calls.call(worker, worker.client.create(a.resource, ns, body))


async def copy_pods(a: Acting, worker: WorkerCluster, remote: Obj) -> list[Obj]:
    """The copy's pods, read live from its worker (none when the kind's pods are not known)."""
    if a.kind.pods is None:
        return []
    pods, _ = await a.calls.call(worker, worker.client.list_all(
        PODS, remote["metadata"]["namespace"], label_selector=a.kind.pods.selector(remote)))
    return pods


async def patch_copy(a: Acting, job: Obj, worker: WorkerCluster, remote: Obj, patch: Obj) -> ApiError | None:
    """Send the spec patch to the copy: None when the worker took it, else its refusal (the plan
    judges it: re-create a suspended copy running nothing, or back off)."""
    md = remote["metadata"]
    try:
        await a.calls.call(worker, worker.client.patch(a.resource, md["namespace"], md["name"], patch))
    except ApiError as exc:
        if not is_refusal(exc.status):
            raise
        metrics.WORKER_REFUSALS.labels(worker.name, "patch").inc()
        return exc
    memory = a.recalled(job["metadata"]["uid"])
    memory.patch_not_before = 0.0
    memory.refusals.pop("patch", None)
    return None


async def recreate_copy(a: Acting, job: Obj, worker: WorkerCluster, remote: Obj, patch: Obj,
                        refused: ApiError) -> float:
    """A suspended copy whose pods are all gone runs nothing: delete it, to be created again from the
    manager's template (nothing runs twice; a pod still terminating could, so wait for it)."""
    md = remote["metadata"]
    # Pods of the copy that have not ended, terminating ones included (``status.active`` does
    # not count those, and ``status.terminating`` is missing on older workers).
    left = not_ended(await copy_pods(a, worker, remote))
    if left:
        log.info("%s/%s on %s: waiting for %d pod(s) of the suspended copy to end before re-creating "
                 "it (%s)", md["namespace"], md["name"], worker.name, len(left), ", ".join(left[:3]))
        return min(2.0, a.cfg.resync_period)
    if await delete_copy(a, job, worker, remote, "re-created for its new template"):
        a.say(job, COPY_RECREATED, f"worker {worker.name} refused to rewrite the suspended copy's pod template "
              f"({refused.message}); deleted it to be created again from the manager's template")
        return 0.0
    return patch_backoff(a, job, worker, remote, patch, refused)


def patch_backoff(a: Acting, job: Obj, worker: WorkerCluster, remote: Obj, patch: Obj, refused: ApiError) -> float:
    """The worker refused the spec change: said, and tried again with backoff (status is still mirrored)."""
    uid, md = job["metadata"]["uid"], remote["metadata"]
    delay = a.refusal_delay(uid, "patch")
    a.remember_about(uid).patch_not_before = a.clock() + delay
    a.say(job, WORKER_REFUSED, f"worker {worker.name} refused the spec change {patch} on "
          f"{md['namespace']}/{md['name']}: {refused.message}; status is still mirrored, the change is retried "
          f"with backoff (at most every {RETRY_CAP:.0f}s)")
    return delay
