"""Which worker gets a Job: a pluggable, pure policy.

The default, LeastLoaded, sends each Job to the healthy worker with the fewest
unfinished mirrored Jobs (including dispatches not yet visible in its cache). Unlike
round-robin it adapts when one worker drains slower or just came back empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


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
    if name == "RoundRobin":
        return RoundRobin()
    return LeastLoaded()
