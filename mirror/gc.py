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

A user who may edit Jobs in one worker namespace can forge "copies" there (issue 32): GC must
not let them stop it for every other tenant. The budget is shared fairly by the workers and
rotated within each, a copy whose confirmation proved nothing is not read again until its
resourceVersion changes, and an error on one copy is counted and logged, never the end of the
round.

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
from bisect import bisect_right
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from jobapi.objects import annotations_of
from kruntime.client import ApiError, ClusterClient
from kruntime.informer import ObjectCache, paced
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


#: live manager reads one GC round may make (per kind), shared fairly by the workers; the copies
#: beyond a worker's share wait a round
CONFIRM_BUDGET = 100


def needs_confirmation(cached: CopyVerdict) -> bool:
    """Whether a copy judged against the manager cache must be re-judged on a live read.

    Only a keep is final from the cache: a delete is irreversible and the cache may lag a
    fresh placement; an unproven copy may belong to a manager object the cache does not
    hold (it keeps only claimed ones).
    """
    return cached is not CopyVerdict.KEEP


def fair_shares(wanted: Mapping[str, int], budget: int, *, first: int = 0) -> dict[str, int]:
    """The budget split among workers: equal shares, none above what a worker wants, what one leaves
    going to the others. A worker full of forged copies so gets no more than the others' share, and
    a real orphan elsewhere is still confirmed. ``first`` rotates which workers get the remainder
    (and, with more workers than budget, any share at all) from round to round."""
    names = sorted(wanted)
    if names:
        names = names[first % len(names):] + names[:first % len(names)]
    shares = dict.fromkeys(names, 0)
    left = max(0, budget)
    hungry = [n for n in names if wanted[n] > 0]
    while left and hungry:
        each = max(1, left // len(hungry))
        for n in hungry:
            give = min(each, wanted[n] - shares[n], left)
            shares[n] += give
            left -= give
        hungry = [n for n in hungry if shares[n] < wanted[n]]
    return shares


def rotated(keys: Sequence[str], after: str | None) -> list[str]:
    """``keys`` in order, starting after the one a worker's last round stopped at: copies beyond a
    share get their turn next round instead of the same first ones every round."""
    ordered = sorted(keys)
    if after is None:
        return ordered
    cut = bisect_right(ordered, after)
    return ordered[cut:] + ordered[:cut]


@dataclass
class GcMemory:
    """What GC keeps between rounds for one kind.

    ``failed`` holds the resourceVersion of each copy whose live confirmation proved nothing
    (unproven) or raised: it is not read again until it changes, so forged copies cost the
    manager one read each, not one per round. ``cursor`` is where each worker's confirmations
    resume (:func:`rotated`); ``rounds`` rotates :func:`fair_shares`.
    """

    failed: dict[tuple[str, str], str | None] = field(default_factory=dict)  # (worker, copy uid) -> resourceVersion
    cursor: dict[str, str] = field(default_factory=dict)
    rounds: int = 0

    def proved_nothing(self, worker: str, copy: Obj) -> bool:
        md = copy["metadata"]
        key = (worker, str(md.get("uid")))
        return key in self.failed and self.failed[key] == md.get("resourceVersion")

    def remember(self, worker: str, copy: Obj) -> None:
        md = copy["metadata"]
        self.failed[(worker, str(md.get("uid")))] = md.get("resourceVersion")

    def forget_gone(self, worker: str, present: Collection[str]) -> None:
        """Drop what is remembered of copies no longer on ``worker`` (the memory stays bounded)."""
        for key in [k for k in self.failed if k[0] == worker and k[1] not in present]:
            del self.failed[key]


def _copy_key(copy: Obj) -> str:
    md = copy["metadata"]
    return f"{md.get('namespace')}/{md.get('name')}"


@dataclass
class _Round:
    """One GC round of one kind: what it is judged against, and what it found."""

    manager: ClusterClient
    kind: MirroredKind
    origin: str
    manager_cluster: str
    configured: frozenset[str]
    memory: GcMemory
    unproven: dict[str, int] = field(default_factory=dict)

    def judge(self, remote: Obj, manager: Obj | None, worker: str) -> CopyVerdict:
        return judge(remote, manager, origin=self.origin, manager_cluster=self.manager_cluster, worker=worker,
                     configured=self.configured)

    def candidate(self, w: WorkerCluster, remote: Obj, cache: ObjectCache | None) -> bool:
        """Whether ``remote`` needs a live read of its manager object (counting the unproven)."""
        key = manager_key_of(self.kind.name, remote)
        if key is None or self.memory.proved_nothing(w.name, remote):
            self.unproven[w.name] += 1
            return False
        return cache is None or needs_confirmation(self.judge(remote, cache.get(key), w.name))

    async def confirm(self, w: WorkerCluster, remote: Obj) -> int:
        """Re-judge ``remote`` on a live read and delete it if it is an orphan or stale; 1 if deleted."""
        key = manager_key_of(self.kind.name, remote)
        assert key is not None  # a candidate names a valid manager object in its own namespace
        ns, name = split_key(key)
        fresh: Obj | None = None
        metrics.GC_MANAGER_READS.inc()
        try:
            fresh = await self.manager.get(self.kind.resource, ns, name)
        except ApiError as exc:
            if not exc.not_found:
                log.warning("gc: reading manager %s %s failed: %s", self.kind.name, key, exc)
                return 0  # retried next round
        verdict = self.judge(remote, fresh, w.name)
        if verdict is CopyVerdict.UNPROVEN:
            self.unproven[w.name] += 1
            self.memory.remember(w.name, remote)
        if verdict in (CopyVerdict.KEEP, CopyVerdict.UNPROVEN):
            return 0
        md = remote["metadata"]
        try:
            await w.client.delete(self.kind.resource, md["namespace"], md["name"], propagation="Background",
                                  uid=md.get("uid"))
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                log.warning("gc: deleting %s/%s on %s failed (retried next round): %s", md["namespace"],
                            md["name"], w.name, exc)
            return 0
        metrics.GC_DELETIONS.labels(w.name, verdict.value).inc()
        log.info("gc: deleted %s copy %s/%s on %s", verdict.value, md["namespace"], md["name"], w.name)
        return 1

    def failed(self, w: WorkerCluster, remote: Obj, exc: Exception) -> None:
        """One copy could not be judged: counted, logged, remembered; the round goes on."""
        metrics.GC_ERRORS.labels(w.name).inc()
        self.unproven[w.name] += 1
        self.memory.remember(w.name, remote)
        log.warning("gc: %s copy %s on %s could not be judged, skipped until it changes: %r", self.kind.name,
                    _copy_key(remote), w.name, exc)


async def collect_once(manager: ClusterClient, workers: list[WorkerCluster], origin: str,
                       kind: MirroredKind, manager_cluster: str, cache: ObjectCache | None = None,
                       budget: int = CONFIRM_BUDGET, memory: GcMemory | None = None) -> int:
    """One GC round for ``kind``; ``cache`` None reads every manager object live (no cache yet).

    First every healthy worker's copies are judged against the cache (free), then the copies
    that need a live read are confirmed within ``budget``, shared fairly by the workers. Nothing
    one copy holds (a name no object can have, a field of the wrong type) stops the round.
    """
    memory = memory if memory is not None else GcMemory()
    healthy = [w for w in workers if w.healthy]  # the others are retried next round
    r = _Round(manager, kind, origin, manager_cluster, frozenset(w.name for w in workers), memory,
               unproven=dict.fromkeys((w.name for w in healthy), 0))
    todo: dict[str, dict[str, Obj]] = {w.name: {} for w in healthy}
    every: list[tuple[WorkerCluster, Obj]] = []
    for w in healthy:
        copies = w.copies(kind)
        memory.forget_gone(w.name, {str(c["metadata"].get("uid")) for c in copies})
        every += ((w, remote) for remote in copies)
    # Paced over all workers' copies together: 20,000 copies of 50 workers (400 each) judged in one
    # go held the loop (the Lease, the probes) for 0.2 s.
    async for w, remote in paced(every):
        try:
            if r.candidate(w, remote, cache):
                todo[w.name][_copy_key(remote)] = remote
        except Exception as exc:  # one copy never stops the round
            r.failed(w, remote, exc)
    shares = fair_shares({n: len(c) for n, c in todo.items()}, budget, first=memory.rounds)
    memory.rounds += 1
    deleted = 0
    for w in healthy:
        order = rotated(list(todo[w.name]), memory.cursor.get(w.name))
        if len(order) > shares[w.name]:
            metrics.GC_DEFERRED.labels(w.name).inc(len(order) - shares[w.name])
        for key in order[:shares[w.name]]:
            memory.cursor[w.name] = key
            try:
                deleted += await r.confirm(w, todo[w.name][key])
            except Exception as exc:  # one copy never stops the round
                r.failed(w, todo[w.name][key], exc)
    for w in healthy:
        unproven = r.unproven[w.name]
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
    memories = {kind.name: GcMemory() for kind in kinds}
    while True:
        await asyncio.sleep(interval)
        try:
            for kind in kinds:
                await collect_once(manager, workers, origin, kind, manager_cluster,
                                   cache=(caches or {}).get(kind.name), memory=memories[kind.name])
            metrics.GC_ROUNDS.inc()
        except Exception:
            log.exception("gc round failed; next round in %.0fs", interval)
