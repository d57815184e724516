"""The chaos tier: every scenario of ``python -m bench chaos``, through the same code, at 50 Jobs.

Each test fails when the invariant checker finds a lost Job, a duplicate running copy after
recovery, an orphan, a wrong outcome or a rejected status write, or when the Jobs did not all
finish. Scenarios share the session's bed (each has its own namespace and origin). The seed is
printed; ``JOBMIRROR_CHAOS_SEED`` repeats a run, ``JOBMIRROR_CHAOS_JOBS`` changes the size.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from bench import chaos
from clusterbed.cluster import ClusterSpec, LocalCluster

JOBS = int(os.environ.get("JOBMIRROR_CHAOS_JOBS", "50"))
SEED = int(os.environ.get("JOBMIRROR_CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))
LOGS = Path(tempfile.mkdtemp(prefix="jobmirror-chaos-logs-"))


@pytest.mark.chaos
@pytest.mark.parametrize("scenario", list(chaos.SCENARIOS))
async def test_scenario_keeps_the_invariants(scenario: str, cluster: Callable[[ClusterSpec], LocalCluster]) -> None:
    print(f"chaos {scenario}: seed {SEED} (JOBMIRROR_CHAOS_SEED={SEED} repeats it), logs in {LOGS}")
    r = await chaos.run_scenario(scenario, JOBS, SEED, cluster, LOGS)
    v = r["verdict"]
    where = f"{scenario}, seed {SEED}, controller logs in {LOGS / scenario}"
    assert r["allFinished"], f"not every Job finished ({where}): {v.explain()}\nevents: {r['events']}"
    assert v.jobs == JOBS * (2 if scenario == "shared-worker" else 1), f"the checker saw {v.jobs} Jobs ({where})"
    assert v.copies_seen >= v.jobs, f"fewer copies than Jobs seen: the checker is blind ({where})"
    assert v.ok, f"invariants broken ({where}): {v.explain()}\nevents: {r['events']}"
    # Only a replica that lost its Lease may end on its own (by design; its Deployment restarts it).
    unexpected = [e for e in r["controllerExits"] if scenario != "leader-kill" or "lost leadership" not in e]
    assert not unexpected, f"controller processes ended on their own ({where}): {unexpected}"
