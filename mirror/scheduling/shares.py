"""What each tenant runs across the fleet, and its weighted dominant share of the fleet (DRF).

Dominant Resource Fairness (Ghodsi et al., NSDI 2011): a tenant's share is the largest fraction
it holds of any one resource of the fleet; the tenant with the smallest share (divided by its
weight) is the furthest below its fair share and goes first. Pod slots are not a resource here:
every pod takes one, so they would make every tenant's share its pod count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mirror.room.requests import PODS as POD_SLOTS

Amounts = Mapping[str, int]


def dominant_share(usage: Amounts, capacity: Amounts) -> float:
    """The largest fraction of the fleet's ``capacity`` that ``usage`` holds of one resource. A
    resource the fleet has none of is left out: no tenant could be given more of it."""
    return max((used / capacity[r] for r, used in usage.items()
                if r != POD_SLOTS and used > 0 and capacity.get(r, 0) > 0), default=0.0)


def weighted_share(usage: Amounts, capacity: Amounts, weight: float) -> float:
    return dominant_share(usage, capacity) / weight


def demand_of(per_pod: Amounts, pods: int) -> dict[str, int]:
    """What a Job holds while it runs: ``pods`` of its pod at once."""
    return {r: v * pods for r, v in per_pod.items() if r != POD_SLOTS and v > 0}


@dataclass(frozen=True)
class Running:
    """A placed, unfinished Job as fair share and quotas count it."""

    tenant: str
    demand: Mapping[str, int]
    worker: str = ""
    #: when it was placed and how long it runs (None: not known), on the placer's clock
    placed_at: float = 0.0
    length: float | None = None

    @property
    def ends_at(self) -> float | None:
        return None if self.length is None else self.placed_at + self.length


class RunningWork:
    """The placed, unfinished Jobs by uid, summed per tenant (kept as Jobs are placed and end)."""

    def __init__(self) -> None:
        self._jobs: dict[str, Running] = {}
        self._usage: dict[str, Counter[str]] = {}
        self._count: Counter[str] = Counter()

    def __contains__(self, uid: object) -> bool:
        return uid in self._jobs

    def __len__(self) -> int:
        return len(self._jobs)

    def add(self, uid: str, running: Running) -> None:
        self.drop(uid)
        self._jobs[uid] = running
        self._usage.setdefault(running.tenant, Counter()).update(running.demand)
        self._count[running.tenant] += 1

    def drop(self, uid: str) -> Running | None:
        gone = self._jobs.pop(uid, None)
        if gone is not None:
            usage = self._usage[gone.tenant]
            usage.subtract(gone.demand)
            self._count[gone.tenant] -= 1
            if self._count[gone.tenant] <= 0:
                del self._usage[gone.tenant], self._count[gone.tenant]
        return gone

    def get(self, uid: str) -> Running | None:
        return self._jobs.get(uid)

    def usage(self, tenant: str) -> dict[str, int]:
        return {r: v for r, v in (self._usage.get(tenant) or {}).items() if v > 0}

    def jobs(self, tenant: str) -> int:
        return self._count.get(tenant, 0)

    def tenants(self) -> Iterable[str]:
        return list(self._usage)

    def on(self, worker: str) -> list[Running]:
        """The Jobs running on ``worker`` (for its release schedule: O(running))."""
        return [r for r in self._jobs.values() if r.worker == worker]
