"""The end of a manager object's life here: its copies deleted, its finalizer released.

Which copies go and which wait is decided by :func:`mirror.decisions.plan_cleanup` (pure); this
module performs the deletes, the one confirming read and the finalizer write, and says what was
left behind. A copy on an unreachable worker keeps the finalizer until the worker answers or
workerLostTimeout passes (then garbage collection deletes it when the worker is back).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kruntime.client import ApiError
from kruntime.resources import Obj
from mirror import metrics
from mirror.acting import Acting
from mirror.decisions import copy_propagation, is_refusal, placement_of, plan_cleanup, routine_cleanup
from mirror.event_reasons import (
    COPY_LEFT_FOR_GC,
    FINALIZER_RELEASED,
    FINISHED_WITHOUT_COPY,
    REMOTE_DELETED,
    WORKER_REFUSED,
)
from mirror.identity import is_copy_of
from mirror.naming import FINALIZER
from mirror.workers import WorkerCluster

log = logging.getLogger(__name__)


async def delete_copy(a: Acting, job: Obj, worker: WorkerCluster, remote: Obj, reason: str,
                      propagation: str = "Background", *, unchanged: bool = False) -> bool:
    """Delete one of our copies (background propagation by default: its pods go too). True when gone.

    Foreground: True only once the worker has deleted the pods and then the copy. ``unchanged``:
    only while the copy is as ``remote`` shows it (resourceVersion precondition) — a stuck copy
    whose worker's Job controller just wrote to it may have started a pod; False then, looked at again.
    """
    if not worker.healthy:
        return False
    md = remote["metadata"]
    if propagation == "Foreground" and md.get("deletionTimestamp"):
        return False  # being deleted, dependents first: wait for it to vanish from the cache
    try:
        answer = await a.calls.call(worker, worker.client.delete(
            a.resource, md["namespace"], md["name"], propagation=propagation, uid=md.get("uid"),
            resource_version=md.get("resourceVersion") if unchanged else None))
    except ApiError as exc:
        if exc.not_found:
            return True
        if exc.conflict:  # a different Job now has that name (not ours: gone), or the copy changed
            return not unchanged
        if not is_refusal(exc.status):
            raise
        metrics.WORKER_REFUSALS.labels(worker.name, "delete").inc()
        a.refusal_delay(job["metadata"]["uid"], "delete")
        a.say(job, WORKER_REFUSED, f"worker {worker.name} refused to delete "
              f"{md['namespace']}/{md['name']} ({reason}): {exc.message}; retried with backoff")
        return False
    metrics.REMOTE_DELETES.labels(worker.name, reason).inc()
    uid = job["metadata"]["uid"]
    a.attempted[worker.name].discard(uid)  # known gone: no need to ask the server again
    a.places.not_dispatched(worker.name, uid)
    how = "" if propagation == "Background" else f", propagation {propagation}"
    if routine_cleanup(reason, propagation):
        log.debug("%s/%s: deleted its finished copy on worker %s", md["namespace"], md["name"], worker.name)
    else:
        a.say(job, REMOTE_DELETED, f"deleted {md['namespace']}/{md['name']} on worker {worker.name} ({reason}{how})")
    # A foreground delete answers with the object while its pods are still being deleted.
    return propagation != "Foreground" or answer.get("kind") == "Status"


async def finish(a: Acting, job: Obj, copies: dict[str, Obj]) -> float | None:
    """A finished object: its copies deleted and the finalizer released (or only released:
    keepFinishedRemote)."""
    if a.cfg.keep_finished_remote:
        await a.writes.drop_finalizer(job)
        return None
    return await finalize(a, job, copies)


async def finish_decided(a: Acting, job: Obj, why: str) -> float | None:
    """A decided outcome is final: write the terminal status instead of running the Job again."""
    final = a.kind.decided_status(job, a.now())
    assert final is not None
    job = await a.writes.put_status(job, final)
    a.say(job, FINISHED_WITHOUT_COPY, f"{why}; its outcome was already decided, so it is finished as "
          f"{a.kind.state(job)} from its last mirrored status instead of running again")
    return await finish(a, job, a.copies_of(job))


async def finalize(a: Acting, job: Obj, copies: dict[str, Obj]) -> float | None:
    """Delete every copy we know of, then release the manager Job's finalizer (:func:`plan_cleanup`).

    A copy on an unreachable worker keeps the finalizer (and this key re-queued)
    until the worker answers: cleanup is retried until it succeeds.
    """
    uid = job["metadata"]["uid"]
    deleted = bool(job["metadata"].get("deletionTimestamp"))
    reason = "deleted" if deleted else "finished"
    propagation = copy_propagation(job) if deleted else "Background"
    placement = placement_of(job)
    plan = plan_cleanup(copies, placement.worker, a.worker_states(job), deleted=deleted,
                        worker_lost_timeout=a.cfg.worker_lost_timeout)
    all_gone = not plan.blocked
    for name in plan.delete:
        copy_uid = copies[name]["metadata"].get("uid") or ""
        if propagation == "Background":  # gone at once: its DELETED event is ours (before the call: it may come first)
            a.deleted_here[copy_uid] = None
        gone = False
        try:
            gone = await delete_copy(a, job, a.workers[name], copies[name], reason, propagation)
        finally:
            if not gone:
                a.deleted_here.pop(copy_uid, None)  # still there: its deletion, when it comes, needs a pass
        all_gone &= gone
    for name in plan.confirm:
        all_gone &= await _delete_unseen(a, job, a.workers[name], placement.remote_name, reason, propagation)
    if not all_gone:
        return a.delete_backoff(uid)
    a.forget(uid)
    await a.writes.drop_finalizer(job)
    _say_left(a, job, copies, deleted, plan.left_for_gc)
    return None


async def _delete_unseen(a: Acting, job: Obj, worker: WorkerCluster, remote_name: str, reason: str,
                         propagation: str) -> bool:
    """A worker's cache shows no copy, but a create was sent there (or the cache has not synced):
    read it live, and delete it when it is ours. True when none is left."""
    try:
        remote = await a.calls.call(worker, worker.client.get(a.resource, job["metadata"]["namespace"],
                                                              remote_name))
    except ApiError as exc:
        if not exc.not_found:
            raise
        return True
    if not is_copy_of(a.kind.name, remote, job, origin=a.origin):
        return True
    return await delete_copy(a, job, worker, remote, reason, propagation)


def _say_left(a: Acting, job: Obj, copies: dict[str, Obj], deleted: bool, left_for_gc: Iterable[str]) -> None:
    """The finalizer is released with a copy left behind: say where, and who deletes it."""
    placed = placement_of(job).worker
    if deleted and placed is not None and placed not in a.workers and not copies:
        a.say(job, COPY_LEFT_FOR_GC, f"worker {placed} is not in the configuration: the finalizer is "
              "released without deleting a copy there; delete it on that cluster, or configure the worker "
              "again and garbage collection does")
    for name in left_for_gc:
        metrics.COPIES_LEFT_FOR_GC.labels(name).inc()
        a.say(job, COPY_LEFT_FOR_GC, f"worker {name} has been unreachable for longer than workerLostTimeout "
              f"({a.cfg.worker_lost_timeout:.0f}s): the finalizer is released without deleting the copy there; "
              "garbage collection deletes it when the worker answers again")


async def release_unclaimed(a: Acting, job: Obj) -> None:
    """We no longer claim this Job: let go of it. Its copy, if any, is left as it is."""
    await a.writes.drop_finalizer(job)
    a.forget(job["metadata"]["uid"])
    metrics.UNCLAIMED_RELEASES.inc()
    placed = placement_of(job).worker
    a.say(job, FINALIZER_RELEASED, f"no longer claimed by this jobmirror (controllerName "
          f"{a.cfg.controller_name!r}, namespaces {a.cfg.namespaces or 'all'}): finalizer {FINALIZER} removed"
          + (f"; its copy on worker {placed} is left as it is" if placed else ""))
