"""Room-aware choice of a worker for one Job: never where it can never run, and where
most of its pods fit now.

Candidates are the healthy workers the Job may use (its pin, else those its
``jobmirror.dev/worker-selector`` matches). If none of them could ever run its pod the Job
is refused with every worker's reason (``NoWorkerFits``); if some could but none has room
now it waits in the manager (``WaitingForRoom``). Otherwise the worker where most of
``min(parallelism, completions)`` pods fit now wins, fewer unfinished copies breaking ties.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from mirror.room.fit import WorkerFit
from mirror.room.selector import Requirement, matches


@dataclass(frozen=True)
class Candidate:
    name: str
    healthy: bool
    labels: Mapping[str, str]
    fit: WorkerFit
    unfinished: int


class Outcome(StrEnum):
    PLACE = "Place"
    NO_WORKER_FITS = "NoWorkerFits"  # no candidate could ever run it: say why, per worker
    WAITING_FOR_ROOM = "WaitingForRoom"  # some could, none has room now: keep it in the manager
    NO_CANDIDATE = "NoWorker"  # pin unknown/unhealthy, selector matches nothing, none healthy


@dataclass(frozen=True)
class Choice:
    outcome: Outcome
    worker: str | None
    why: str


def _per_worker(cands: Sequence[Candidate]) -> str:
    return "; ".join(f"{c.name}: {c.fit.why}" for c in sorted(cands, key=lambda c: c.name))


def choose(workers: Sequence[Candidate], *, pinned: str | None = None,
           selector: tuple[Requirement, ...] = ()) -> Choice:
    if pinned:
        cands = [w for w in workers if w.name == pinned]
        if not cands:
            return Choice(Outcome.NO_CANDIDATE, None, f"pinned worker {pinned!r} is not configured")
    else:
        cands = [w for w in workers if matches(selector, w.labels)]
        if not cands:
            return Choice(Outcome.NO_CANDIDATE, None, "no configured worker matches the worker selector")
    healthy = [w for w in cands if w.healthy]
    if not healthy:
        which = f"pinned worker {pinned!r} is" if pinned else "no candidate worker is"
        return Choice(Outcome.NO_CANDIDATE, None, f"{which} healthy")
    could = [w for w in healthy if w.fit.ever]
    if not could:
        return Choice(Outcome.NO_WORKER_FITS, None, _per_worker(healthy))
    roomy = [w for w in could if w.fit.has_room]
    if not roomy:
        return Choice(Outcome.WAITING_FOR_ROOM, None, _per_worker(healthy))
    best = min(roomy, key=lambda w: (-w.fit.now, w.unfinished, w.name))
    others = [w for w in healthy if w is not best]
    why = f"{best.name}: {best.fit.why}" + (f"; {_per_worker(others)}" if others else "")
    return Choice(Outcome.PLACE, best.name, why)
