"""How two Jobs waiting in the manager compare: the rank of a waiting Job (smaller goes first).

FairShare: higher priority first; within one priority, a Job that has waited past the starvation
age goes ahead of fair-share order (oldest such first), then the Job of the tenant with the smallest
weighted dominant share, then creation order. Arrival: creation order only.

Bound on waiting within one priority: after ``starvation_age`` a Job is ahead of every Job of its
priority that has not waited as long, so from then on only Jobs of its priority created before it
(and Jobs of higher priority) go first — a finite set that no later arrival joins.
"""

from __future__ import annotations

from dataclasses import dataclass

#: (-priority, 0 when aged else 1, weighted share (0 when aged), (creationTimestamp, uid))
Rank = tuple[int, int, float, tuple[str, str]]


@dataclass(frozen=True)
class OrderRule:
    fair: bool = True
    starvation_age: float = 600.0

    def rank(self, priority: int, created: tuple[str, str], share: float, waited: float) -> Rank:
        if not self.fair:
            return (0, 1, 0.0, created)
        if waited >= self.starvation_age:
            return (-priority, 0, 0.0, created)
        return (-priority, 1, share, created)


def within_tenant(priority: int, created: tuple[str, str]) -> tuple[int, tuple[str, str]]:
    """The order of one tenant's waiting Jobs: the same for every rank (share is the tenant's,
    aging follows creation), so each tenant's line is a heap on it and only its head is ranked."""
    return (-priority, created)
