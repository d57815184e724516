"""Per-tenant quotas across the fleet (issue 35 item 2), as tables over mirror/scheduling/quota.py."""

from __future__ import annotations

import pytest

from mirror.scheduling.quota import Quota, never_within, over_quota, quota_of

GPU = "nvidia.com/gpu"
GI = 2**30


@pytest.mark.parametrize(("config", "quota"), [
    ({}, Quota({}, None)),
    ({"cpu": "64", "memory": "256Gi", GPU: 8, "jobs": 50}, Quota({"cpu": 64_000, "memory": 256 * GI, GPU: 8}, 50)),
    ({"cpu": "500m"}, Quota({"cpu": 500}, None)),
    ({"jobs": 0}, Quota({}, 0)),
])
def test_quota_of_reads_the_config_in_the_schedulers_units(config: dict[str, str | int], quota: Quota) -> None:
    assert quota_of(config) == quota
    assert quota.unlimited is (not config)


Q = Quota({"cpu": 4000, GPU: 2}, jobs=3)


@pytest.mark.parametrize(("used", "jobs", "demand", "over"), [
    ({}, 0, {"cpu": 4000, GPU: 2}, None),  # exactly the whole quota
    ({"cpu": 3000}, 2, {"cpu": 1000}, None),  # exactly at the quota after placing
    ({"cpu": 3000}, 2, {"cpu": 1001}, "cpu 3+1001m > quota 4"),
    ({GPU: 2}, 1, {"cpu": 100, GPU: 1}, f"{GPU} 2+1 > quota 2"),
    ({}, 3, {"cpu": 100}, "Jobs 3+1 > quota 3"),  # the Jobs count alone
    ({"cpu": 4000, GPU: 2}, 3, {"cpu": 1, GPU: 1}, f"Jobs 3+1 > quota 3; cpu 4+1m > quota 4; {GPU} 2+1 > quota 2"),
    ({"cpu": 4000}, 1, {"memory": 64 * GI}, None),  # memory is unlimited here
    ({"cpu": 9000}, 0, {"memory": GI}, None),  # over in cpu already (quota lowered), but it asks none
], ids=["whole-quota", "exactly-at", "one-milli-over", "gpu-over", "jobs-over", "all-over", "unlimited-key",
        "asks-none-of-the-full-one"])
def test_over_quota(used: dict[str, int], jobs: int, demand: dict[str, int], over: str | None) -> None:
    assert over_quota(used, jobs, demand, Q) == over


@pytest.mark.parametrize(("demand", "quota", "never"), [
    ({"cpu": 4000, GPU: 2}, Q, None),
    ({"cpu": 4001}, Q, "it alone asks more than its tenant's quota: cpu 4001m > quota 4"),
    ({"cpu": 8000, GPU: 3}, Q, f"it alone asks more than its tenant's quota: cpu 8 > quota 4, {GPU} 3 > quota 2"),
    ({"cpu": 1}, Quota({}, 0), "its tenant's quota allows 0 Jobs"),
    ({GPU: 1}, Quota({GPU: 0}), f"{GPU} 1 > quota 0"),
    ({"cpu": 1}, Quota({GPU: 0}), None),  # no GPU allowed, none asked
    ({"memory": 10**15}, Quota({"cpu": 1}), None),
], ids=["whole-quota", "cpu", "two-resources", "zero-jobs", "zero-gpus", "zero-gpus-none-asked", "unlimited-key"])
def test_never_within(demand: dict[str, int], quota: Quota, never: str | None) -> None:
    got = never_within(demand, quota)
    if never is None:
        assert got is None
    else:
        assert got is not None and never in got
