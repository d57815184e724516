"""Periodic garbage collection of remote copies whose manager Job is gone or placed elsewhere.

Catches what event-driven cleanup cannot: a manager Job deleted while the controller
was down, a copy left on a worker that was unreachable when its Job moved. A copy is
deleted only after the manager is re-read from the server (a cache can lag a fresh
placement by milliseconds), and only when its origin label is ours.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from enum import StrEnum

from jobapi.objects import annotations_of, labels_of
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import Obj, split_key
from mirror import metrics
from mirror.kinds import MirroredKind, manager_key_of
from mirror.naming import ANNOTATION_CLUSTER, LABEL_ORIGIN, LABEL_ORIGIN_UID
from mirror.workers import WorkerCluster

log = logging.getLogger(__name__)


class Verdict(StrEnum):
    KEEP = "keep"
    ORPHAN = "orphan"  # the manager Job no longer exists (or is a different Job now)
    STALE = "stale"  # the manager Job is placed on another worker


def judge(remote: Obj, manager: Obj | None, *, origin: str, worker: str) -> Verdict:
    """Pure decision for one remote copy, given the manager Job as freshly read (or None)."""
    labels = labels_of(remote)
    if labels.get(LABEL_ORIGIN) != origin:
        return Verdict.KEEP  # never ours to judge
    if manager is None or manager["metadata"].get("uid") != labels.get(LABEL_ORIGIN_UID):
        return Verdict.ORPHAN
    placed = annotations_of(manager).get(ANNOTATION_CLUSTER)
    if placed is not None and placed != worker:
        return Verdict.STALE
    return Verdict.KEEP


async def collect_once(manager: ClusterClient, workers: list[WorkerCluster], origin: str,
                       kind: MirroredKind) -> int:
    deleted = 0
    for w in workers:
        if not w.healthy:
            continue  # retried next round; an unreachable worker never blocks the others
        for remote in w.copies(kind):
            key = manager_key_of(kind, remote)
            ns, name = split_key(key) if key else (None, "")
            fresh: Obj | None = None
            if ns:
                try:
                    fresh = await manager.get(kind.resource, ns, name)
                except ApiError as exc:
                    if not exc.not_found:
                        log.warning("gc: reading manager %s %s failed: %s", kind.name, key, exc)
                        continue
            verdict = judge(remote, fresh, origin=origin, worker=w.name)
            if verdict is Verdict.KEEP:
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
    return deleted


async def gc_loop(manager: ClusterClient, workers: list[WorkerCluster], origin: str, interval: float,
                  kinds: Sequence[MirroredKind]) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            for kind in kinds:
                await collect_once(manager, workers, origin, kind)
        except Exception:
            log.exception("gc round failed; next round in %.0fs", interval)
