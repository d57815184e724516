"""Periodic garbage collection of remote copies whose manager Job is gone or placed elsewhere.

Catches what event-driven cleanup cannot: a manager Job deleted while the controller
was down, a copy left on a worker that was unreachable when its Job moved. A copy is
deleted only after the manager is re-read from the server (a cache can lag a fresh
placement by milliseconds), and only when its origin label is ours.

GC must not starve status writes, which share the manager client's rate limiter: each
copy is first judged against the manager *cache* (free), and only the few the cache says
to delete (or cannot prove ours) are confirmed with a live read, at most
``CONFIRM_BUDGET`` per round (the rest wait for the next). A copy the cache keeps costs
no request; a cache lagging a deletion delays that copy's collection by a round, never
deletes a live one.

Ownership must be proven, not assumed from the origin label alone (two installations
may ship the same ``origin``): a copy whose manager Job exists with the copy's origin
uid is ours by uid; a copy whose manager Job is gone is ours only if it carries our
manager cluster's identity (``jobmirror.dev/origin-cluster``). Anything else is left
alone and counted as unproven, and so is a copy that names a manager object outside its own
namespace (edited on the worker: :func:`mirror.kinds.manager_key_of`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping, Sequence
from enum import StrEnum

from jobapi.objects import annotations_of
from kruntime.client import ApiError, ClusterClient
from kruntime.informer import ObjectCache
from kruntime.resources import Obj, split_key
from mirror import metrics
from mirror.identity import labels_of_copy, manager_key_of
from mirror.kinds import MirroredKind
from mirror.naming import ANNOTATION_CLUSTER, LABEL_ORIGIN_CLUSTER
from mirror.workers import WorkerCluster

log = logging.getLogger(__name__)


class CopyVerdict(StrEnum):
    KEEP = "keep"
    ORPHAN = "orphan"  # the manager Job no longer exists (or is a different Job now)
    STALE = "stale"  # the manager Job is placed on another worker
    UNPROVEN = "unproven"  # our origin label, but no proof it is this manager's copy: kept


def judge(remote: Obj, manager: Obj | None, *, origin: str, manager_cluster: str, worker: str,
          configured: Collection[str]) -> CopyVerdict:
    """Pure decision for one remote copy, given the manager Job as freshly read (or None).

    ``manager_cluster`` is our manager's identity; a copy without it (another manager
    sharing the origin, or a copy made before the label existed) is never an orphan. A copy
    whose Job is placed on a worker name not in ``configured`` (renamed or removed) is kept:
    the reconciler adopts it where it runs, so it is never stale.
    """
    said = labels_of_copy(remote)
    if said.origin != origin:
        return CopyVerdict.KEEP  # never ours to judge
    origin_uid = said.manager_uid
    if manager is not None and origin_uid and manager["metadata"].get("uid") == origin_uid:
        placed = annotations_of(manager).get(ANNOTATION_CLUSTER)
        stale = placed is not None and placed != worker and placed in configured
        return CopyVerdict.STALE if stale else CopyVerdict.KEEP
    if not manager_cluster or said.manager_cluster != manager_cluster:
        return CopyVerdict.UNPROVEN
    return CopyVerdict.ORPHAN


#: live manager reads one GC round may make (per kind); the copies beyond it wait a round
CONFIRM_BUDGET = 100


def needs_confirmation(cached: CopyVerdict) -> bool:
    """Whether a copy judged against the manager cache must be re-judged on a live read.

    Only a keep is final from the cache: a delete is irreversible and the cache may lag a
    fresh placement; an unproven copy may belong to a manager object the cache does not
    hold (it keeps only claimed ones).
    """
    return cached is not CopyVerdict.KEEP


async def collect_once(manager: ClusterClient, workers: list[WorkerCluster], origin: str,
                       kind: MirroredKind, manager_cluster: str, cache: ObjectCache | None = None,
                       budget: int = CONFIRM_BUDGET) -> int:
    """One GC round for ``kind``; ``cache`` None reads every manager object live (no cache yet)."""
    deleted = 0
    configured = {w.name for w in workers}
    for w in workers:
        unproven = 0
        if not w.healthy:
            continue  # retried next round; an unreachable worker never blocks the others
        for remote in w.copies(kind):
            key = manager_key_of(kind.name, remote)
            if key is None:
                unproven += 1
                continue
            ns, name = split_key(key)
            if cache is not None:
                cached = cache.get(key)
                verdict = judge(remote, cached, origin=origin, manager_cluster=manager_cluster, worker=w.name,
                            configured=configured)
                if not needs_confirmation(verdict):
                    continue
            if budget <= 0:
                metrics.GC_DEFERRED.labels(w.name).inc()
                continue
            fresh: Obj | None = None
            budget -= 1
            metrics.GC_MANAGER_READS.inc()
            try:
                fresh = await manager.get(kind.resource, ns, name)
            except ApiError as exc:
                if not exc.not_found:
                    log.warning("gc: reading manager %s %s failed: %s", kind.name, key, exc)
                    continue
            verdict = judge(remote, fresh, origin=origin, manager_cluster=manager_cluster, worker=w.name,
                            configured=configured)
            if verdict is CopyVerdict.UNPROVEN:
                unproven += 1
            if verdict in (CopyVerdict.KEEP, CopyVerdict.UNPROVEN):
                continue
            md = remote["metadata"]
            try:
                await w.client.delete(kind.resource, md["namespace"], md["name"], propagation="Background",
                                      uid=md.get("uid"))
            except ApiError as exc:
                if not (exc.not_found or exc.conflict):
                    log.warning("gc: deleting %s/%s on %s failed (retried next round): %s", md["namespace"],
                                md["name"], w.name, exc)
                continue
            deleted += 1
            metrics.GC_DELETIONS.labels(w.name, verdict.value).inc()
            log.info("gc: deleted %s copy %s/%s on %s", verdict.value, md["namespace"], md["name"], w.name)
        metrics.GC_UNPROVEN.labels(w.name).set(unproven)
        if unproven:
            log.info("gc: kept %d %s copies on %s with origin %s that name no manager object in their own "
                     "namespace, or whose manager object is gone here and that do not carry this manager's %s=%s "
                     "(edited on the worker, another installation's, or made by an older version)",
                     unproven, kind.name, w.name, origin, LABEL_ORIGIN_CLUSTER, manager_cluster)
    return deleted


async def gc_loop(manager: ClusterClient, workers: list[WorkerCluster], origin: str, interval: float,
                  kinds: Sequence[MirroredKind], manager_cluster: str,
                  caches: Mapping[str, ObjectCache] | None = None) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            for kind in kinds:
                await collect_once(manager, workers, origin, kind, manager_cluster,
                                   cache=(caches or {}).get(kind.name))
            metrics.GC_ROUNDS.inc()
        except Exception:
            log.exception("gc round failed; next round in %.0fs", interval)
