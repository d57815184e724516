"""How two Jobs waiting in the manager compare: the rank of a waiting Job (smaller goes first).

FairShare: higher priority first; within one priority, a Job that has waited past the starvation
age goes ahead of fair-share order (the one that has waited longest first, then creation order), then
the Job of the tenant with the smallest weighted dominant share, then creation order. Arrival:
creation order only.

Bound on waiting within one priority: after ``starvation_age`` a Job is ahead of every Job of its
priority that has not waited as long, so from then on only Jobs of its priority that began waiting
before it (and Jobs of higher priority) go first — a finite set that no later arrival joins.

Aged Jobs go by how long they waited, not by creation: a Job's wait may begin out of its creation
order (it waited for its tenant's quota first, or lost its worker and waits again), and the waiting
line finds the best of a tenant's Jobs from two heaps, one in creation order and one in the order
they began waiting (:mod:`mirror.scheduling.line`); by creation among aged Jobs, it could not.
"""

from __future__ import annotations

from dataclasses import dataclass

#: (-priority, 0 when aged else 1, weighted share (-waited when aged), (creationTimestamp, uid))
Rank = tuple[int, int, float, tuple[str, str]]


@dataclass(frozen=True)
class OrderRule:
    fair: bool = True
    starvation_age: float = 600.0

    def rank(self, priority: int, created: tuple[str, str], share: float, waited: float) -> Rank:
        if not self.fair:
            return (0, 1, 0.0, created)
        if waited >= self.starvation_age:
            return (-priority, 0, -waited, created)
        return (-priority, 1, share, created)


def within_tenant(priority: int, created: tuple[str, str]) -> tuple[int, tuple[str, str]]:
    """The order of one tenant's Jobs that have not waited past the starvation age: the same for every
    rank (share is the tenant's), so each tenant's line is a heap on it and only its head is ranked
    (with the head of the tenant's heap in the order its Jobs began waiting, for the aged ones)."""
    return (-priority, created)
