"""Which worker gets a Job: a pluggable, pure policy.

The default, LeastLoaded, sends each Job to the healthy worker with the fewest
unfinished mirrored Jobs (including dispatches not yet visible in its cache). Unlike
round-robin it adapts when one worker drains slower or just came back empty. RoomAware
first narrows the candidates by the room each worker's nodes have for the Job's pod
(:func:`narrow_by_room`), then chooses as LeastLoaded. A Job waiting for room holds the workers
it waits for against later Jobs only for a bounded time (:func:`hold_lapses_at`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from mirror import metrics
from mirror.naming import ANNOTATION_WORKER_SELECTOR
from mirror.room.fit import WorkerFit
from mirror.scheduling.line import WaitingLine
from mirror.worker_selector import SelectorError, matches
from mirror.worker_selector import parse as parse_selector


@dataclass(frozen=True)
class WorkerView:
    name: str
    healthy: bool
    unfinished: int
    labels: dict[str, str]
    #: answering, but slowly (mirror.workers.WorkerCluster.slow): chosen only when no other can be
    slow: bool = False


class WorkerChooser(Protocol):
    """Picks one of the candidate workers (config.PlacementPolicy names which: LeastLoaded, RoundRobin)."""

    def choose(self, workers: Sequence[WorkerView], pinned: str | None) -> str | None: ...


class NoWorker(Exception):
    """No worker can take the Job now; the message says why (for an event)."""

    reason = "NoWorker"


class NoWorkerFits(NoWorker):
    """No candidate worker could ever run the Job's pod; the message names each worker and why."""

    reason = "NoWorkerFits"


class WaitingForRoom(NoWorker):
    """Workers could run the Job's pod, but none may take it now: it waits in the manager."""

    reason = "WaitingForRoom"

    def __init__(self, message: str, could: frozenset[str], held_until: float | None = None) -> None:
        super().__init__(message)
        self.could = could
        #: when it waits only because Jobs ahead of it hold workers with room: the clock time the
        #: first of those holds lapses (the placer's sweep wakes it then); None when it waits for room itself
        self.held_until = held_until


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


def select_by_labels(workers: Sequence[WorkerView], selector: str) -> list[WorkerView]:
    """``workers`` with only those whose configured labels match ``selector`` left healthy (the
    Job's ``jobmirror.dev/worker-selector``). Raises NoWorker naming the bad selector, or saying
    that no configured worker matches it."""
    try:
        requirements = parse_selector(selector)
    except SelectorError as exc:
        raise NoWorker(f"annotation {ANNOTATION_WORKER_SELECTOR}: {exc}") from exc
    chosen = {w.name for w in workers if matches(requirements, w.labels)}
    if not chosen:
        raise NoWorker(f"no configured worker has labels matching {ANNOTATION_WORKER_SELECTOR} {selector!r}")
    return [replace(w, healthy=w.healthy and w.name in chosen) for w in workers]


def narrow_by_room(workers: Sequence[WorkerView], fits: Mapping[str, WorkerFit], pinned: str | None, *,
                   rank: Any = ("", ""), waiting: WaitingLine | None = None,
                   now: float = 0.0, hold: float = math.inf, since: float | None = None,
                   backfills: Callable[[str, str], bool] | None = None) -> list[WorkerView]:
    """``workers`` with only those left healthy that may take the Job now, and of those the ones
    where most of its pods fit now (:func:`most_pods_now`); the policy then chooses among them.

    Never a worker where its pod could never run (NoWorkerFits when that is every healthy one).
    Of the others, only those with room for a pod now (WaitingForRoom when none has: the Job waits
    in the manager). Per worker the line's order decides (``rank``, this Job's place in it:
    mirror.scheduling.order): a worker that a Job ranked before this one is waiting for (one it
    could run on) takes no Job behind it, so a stream of small Jobs cannot keep a large one
    waiting for ever; Jobs behind still go to workers no Job ahead waits for, and to a held
    worker when ``backfills(worker, uid of the Job ahead)`` says this one ends before that one
    could start there. The hold is bounded: a Job ahead holds a worker against this one only until
    :func:`hold_lapses_at` (``hold`` seconds after the first of the two began waiting; this
    Job began at ``since``, None: ``now``), so a Job that never finds room cannot keep others
    from it. A worker without a known fit (its room view not synced, or it shows no nodes —
    scaled to zero, or nodes not readable) is treated as having room: unknown is not "never".
    A pin wins over room.
    """
    if pinned:
        return list(workers)
    healthy = [w for w in workers if w.healthy]
    if not healthy:
        return list(workers)  # the policy says no healthy worker
    could = {w.name for w in healthy if w.name not in fits or fits[w.name].ever}
    if not could:
        metrics.NO_WORKER_FITS.inc()
        raise NoWorkerFits("no worker could ever run its pod: "
                           + "; ".join(f"{w.name}: {fits[w.name].why}" for w in sorted(healthy, key=lambda w: w.name)))
    roomy = {n for n in could if n not in fits or fits[n].now > 0}
    held = waiting.held_before(rank, now, hold, since) if waiting is not None else {}
    if backfills is not None:
        held = {w: h for w, h in held.items() if not (w in roomy and backfills(w, h[0]))}
    free = roomy - held.keys()
    if not free:
        if roomy:
            why = (f"{', '.join(sorted(roomy))} {'has' if len(roomy) == 1 else 'have'} room now but "
                   "Jobs ahead of it in line wait for it there")
            until = min(held[n][1] for n in roomy)
            if until < math.inf:
                why += f" for at most {max(0, math.ceil(until - now))} s more (headOfLineHold)"
            raise WaitingForRoom(why, frozenset(could), until)
        why = "no worker has room for its pod now: " + "; ".join(
            f"{n}: {fits[n].why}" for n in sorted(could) if n in fits)
        raise WaitingForRoom(why, frozenset(could))
    return [replace(w, healthy=w.healthy and w.name in most_pods_now(free, fits)) for w in workers]


def most_pods_now(free: set[str], fits: Mapping[str, WorkerFit]) -> set[str]:
    """Of the workers free to take a Job, those where most of its ``min(parallelism, completions)``
    pods fit now: a Job of 8 pods goes where 8 start at once rather than where 2 do. A worker
    whose room is unknown stays among them (it may well hold all of them). For the usual Job of
    one pod every free worker ties, and the policy's balance decides."""
    known = [fits[n].now for n in free if n in fits]
    best = max(known, default=0)
    return {n for n in free if n not in fits or fits[n].now == best}


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


def policy_for(name: str) -> WorkerChooser:
    """The policy that picks among the candidates (RoomAware narrows them first, then is LeastLoaded)."""
    if name == "RoundRobin":
        return RoundRobin()
    return LeastLoaded()
