"""Which worker gets a Job: a pluggable, pure policy.

The default, LeastLoaded, sends each Job to the healthy worker with the fewest
unfinished mirrored Jobs (including dispatches not yet visible in its cache). Unlike
round-robin it adapts when one worker drains slower or just came back empty. RoomAware
first narrows the candidates by the room each worker's nodes have for the Job's pod
(:func:`narrow_by_room`), then chooses as LeastLoaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from mirror import metrics
from mirror.room.fit import WorkerFit


@dataclass(frozen=True)
class WorkerView:
    name: str
    healthy: bool
    unfinished: int
    labels: dict[str, str]
    #: answering, but slowly (mirror.workers.WorkerCluster.slow): chosen only when no other can be
    slow: bool = False


class PlacementPolicy(Protocol):
    def choose(self, workers: Sequence[WorkerView], pinned: str | None) -> str | None: ...


class NoWorker(Exception):
    """No worker can take the Job now; the message says why (for an event)."""

    reason = "NoWorker"


class NoWorkerFits(NoWorker):
    """No candidate worker could ever run the Job's pod; the message names each worker and why."""

    reason = "NoWorkerFits"


def _candidates(workers: Sequence[WorkerView], pinned: str | None) -> list[WorkerView]:
    if pinned:
        match = [w for w in workers if w.name == pinned]
        if not match:
            raise NoWorker(f"pinned worker {pinned!r} is not configured")
        if not match[0].healthy:
            raise NoWorker(f"pinned worker {pinned!r} is not healthy")
        return match
    healthy = [w for w in workers if w.healthy]
    if not healthy:
        raise NoWorker("no healthy worker")
    return [w for w in healthy if not w.slow] or healthy


class LeastLoaded:
    def choose(self, workers: Sequence[WorkerView], pinned: str | None) -> str | None:
        c = _candidates(workers, pinned)
        return min(c, key=lambda w: (w.unfinished, w.name)).name


class RoundRobin:
    """Kept for comparison in benchmarks; not the default."""

    def __init__(self) -> None:
        self._next = 0

    def choose(self, workers: Sequence[WorkerView], pinned: str | None) -> str | None:
        c = sorted(_candidates(workers, pinned), key=lambda w: w.name)
        w = c[self._next % len(c)]
        self._next += 1
        return w.name


def narrow_by_room(workers: Sequence[WorkerView], fits: Mapping[str, WorkerFit],
                   pinned: str | None) -> list[WorkerView]:
    """``workers`` with only those left healthy where the Job's pod could ever run, and of those the
    ones with room for it now when any has; the policy then chooses among them as usual.

    A worker without a known fit (its room view not synced, or it shows no nodes — scaled to
    zero, or nodes not readable) stays a candidate: unknown is not "never". A pin wins over room.
    Raises NoWorkerFits when every healthy candidate is known never to fit.
    """
    if pinned:
        return list(workers)
    healthy = [w for w in workers if w.healthy]
    could = {w.name for w in healthy if w.name not in fits or fits[w.name].ever}
    if healthy and not could:
        metrics.NO_WORKER_FITS.inc()
        raise NoWorkerFits("no worker could ever run its pod: "
                           + "; ".join(f"{w.name}: {fits[w.name].why}" for w in sorted(healthy, key=lambda w: w.name)))
    roomy = {n for n in could if n not in fits or fits[n].now > 0}
    keep = roomy or could
    return [replace(w, healthy=w.healthy and w.name in keep) for w in workers]


def explain(policy: str, workers: Sequence[WorkerView], chosen: str, pinned: str | None) -> str:
    """Why ``chosen``, as recorded on the manager Job (``jobmirror describe`` shows it).

    The load each worker had when the choice was made is not visible anywhere later, so
    it is written down with the placement itself (same patch, no extra write).
    """
    if pinned:
        return f"pinned: annotation jobmirror.dev/pin-cluster={pinned}"
    load = ", ".join(f"{w.name}={w.unfinished}{' (slow)' if w.slow else ''}" if w.healthy else f"{w.name}=excluded"
                     for w in sorted(workers, key=lambda w: w.name))
    return f"{policy}: chose {chosen}; unfinished copies per worker then: {load}"


def policy_for(name: str) -> PlacementPolicy:
    """The policy that picks among the candidates (RoomAware narrows them first, then is LeastLoaded)."""
    if name == "RoundRobin":
        return RoundRobin()
    return LeastLoaded()
