"""Per-tenant quotas across the fleet: the most a tenant may run at once over all workers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mirror.config import QUOTA_JOBS
from mirror.room.quantity import amount, show


@dataclass(frozen=True)
class Quota:
    """A tenant's quota in the scheduler's units (millicores for cpu); unset keys are unlimited."""

    resources: Mapping[str, int]
    jobs: int | None = None

    @property
    def unlimited(self) -> bool:
        return not self.resources and self.jobs is None


def quota_of(config: Mapping[str, str | int]) -> Quota:
    """A configured quota (``{"cpu": "64", "jobs": 50}``) in the scheduler's units."""
    jobs = config.get(QUOTA_JOBS)
    return Quota({r: amount(r, v) for r, v in config.items() if r != QUOTA_JOBS},
                 int(jobs) if jobs is not None else None)


def never_within(demand: Mapping[str, int], quota: Quota) -> str | None:
    """Why a Job can never run under ``quota`` (it asks more than the whole quota), or None."""
    if quota.jobs == 0:
        return "its tenant's quota allows 0 Jobs"
    over = [f"{r} {show(r, want)} > quota {show(r, quota.resources[r])}"
            for r, want in sorted(demand.items()) if r in quota.resources and want > quota.resources[r]]
    return f"it alone asks more than its tenant's quota: {', '.join(over)}" if over else None


def over_quota(used: Mapping[str, int], jobs: int, demand: Mapping[str, int], quota: Quota) -> str | None:
    """Why placing a Job of ``demand`` now would take its tenant past ``quota`` (running ``used``
    in ``jobs`` Jobs), naming each resource; None when it fits."""
    over = []
    if quota.jobs is not None and jobs + 1 > quota.jobs:
        over.append(f"Jobs {jobs}+1 > quota {quota.jobs}")
    for r, want in sorted(demand.items()):
        limit = quota.resources.get(r)
        if limit is not None and used.get(r, 0) + want > limit:
            over.append(f"{r} {show(r, used.get(r, 0))}+{show(r, want)} > quota {show(r, limit)}")
    return "; ".join(over) or None
