"""Who goes first (issue 35 item 1), as tables over the pure rules: the rank of a waiting Job
(mirror/scheduling/order.py), the weighted dominant shares it reads (shares.py) and whose a Job
is (tenants.py)."""

from __future__ import annotations

import pytest

from mirror.config import Tenant
from mirror.scheduling.order import OrderRule, within_tenant
from mirror.scheduling.shares import Running, RunningWork, demand_of, dominant_share, weighted_share
from mirror.scheduling.tenants import tenant_name

FAIR = OrderRule(fair=True, starvation_age=600.0)
ARRIVAL = OrderRule(fair=False, starvation_age=600.0)

T1, T2, T3 = ("2026-11-26T10:00:00Z", "u1"), ("2026-11-26T10:00:01Z", "u2"), ("2026-11-26T10:00:02Z", "u3")


def first(rule: OrderRule, jobs: dict[str, tuple[int, tuple[str, str], float, float]]) -> list[str]:
    """The names of ``jobs`` (priority, created, share, waited) in the rule's order."""
    return sorted(jobs, key=lambda n: rule.rank(*jobs[n]))


@pytest.mark.parametrize(("jobs", "order"), [
    # priority first: a later, higher-priority Job of the busiest tenant goes before all
    ({"low-old": (0, T1, 0.0, 0.0), "high-new": (1000, T3, 0.9, 0.0)}, ["high-new", "low-old"]),
    ({"neg": (-10, T1, 0.0, 0.0), "zero": (0, T2, 0.5, 0.0)}, ["zero", "neg"]),
    # one priority: the tenant furthest below its share first, whatever the creation order
    ({"busy-old": (0, T1, 0.5, 10.0), "idle-new": (0, T3, 0.0, 1.0)}, ["idle-new", "busy-old"]),
    ({"a": (0, T2, 0.25, 0.0), "b": (0, T1, 0.26, 0.0), "c": (0, T3, 0.0, 0.0)}, ["c", "a", "b"]),
    # the same share: arrival breaks the tie (creationTimestamp, then uid)
    ({"later": (0, T2, 0.3, 0.0), "earlier": (0, T1, 0.3, 0.0)}, ["earlier", "later"]),
    ({"uid-b": (0, ("2026-11-26T10:00:00Z", "b"), 0.0, 0.0), "uid-a": (0, ("2026-11-26T10:00:00Z", "a"), 0.0, 0.0)},
     ["uid-a", "uid-b"]),
    # aged past starvationAge: ahead of fair-share order within its priority ...
    ({"busy-aged": (0, T3, 0.9, 600.0), "idle": (0, T1, 0.0, 5.0)}, ["busy-aged", "idle"]),
    ({"busy-almost": (0, T3, 0.9, 599.9), "idle": (0, T1, 0.0, 5.0)}, ["idle", "busy-almost"]),
    # ... never ahead of a higher priority, however long it waited
    ({"aged-low": (0, T1, 0.0, 1e6), "fresh-high": (1, T3, 0.9, 0.0)}, ["fresh-high", "aged-low"]),
    # several aged: the longest waiting first (its wait may have begun out of creation order), share
    # no longer counts; the same wait: creation
    ({"aged-2": (0, T2, 0.0, 700.0), "aged-1": (0, T1, 0.9, 650.0)}, ["aged-2", "aged-1"]),
    ({"aged-2": (0, T2, 0.0, 700.0), "aged-1": (0, T1, 0.9, 700.0)}, ["aged-1", "aged-2"]),
], ids=["priority-beats-share-and-age", "negative-priority", "share-beats-arrival", "three-shares",
        "arrival-tie-break", "uid-tie-break", "aged-beats-share", "not-yet-aged", "aged-never-beats-priority",
        "aged-by-wait", "aged-same-wait-by-creation"])
def test_fair_share_order(jobs: dict[str, tuple[int, tuple[str, str], float, float]], order: list[str]) -> None:
    assert first(FAIR, jobs) == order


@pytest.mark.parametrize("jobs", [
    {"b": (1000, T2, 0.0, 0.0), "a": (0, T1, 0.9, 0.0), "c": (0, T3, 0.0, 1e6)},
    {"c": (5, T3, 0.0, 0.0), "b": (-5, T2, 0.0, 700.0), "a": (0, T1, 1.0, 0.0)},
], ids=["priority-share-age-ignored", "all-mixed"])
def test_arrival_order_is_creation_order_alone(jobs: dict[str, tuple[int, tuple[str, str], float, float]]) -> None:
    assert first(ARRIVAL, jobs) == ["a", "b", "c"]


def test_within_one_tenant_the_order_is_priority_then_creation() -> None:
    got = sorted([(0, T1), (1, T3), (0, T2), (1, T2)], key=lambda pc: within_tenant(*pc))
    assert got == [(1, T2), (1, T3), (0, T1), (0, T2)]


# -- dominant shares ---------------------------------------------------------------------------------

GPU = "nvidia.com/gpu"
FLEET = {"cpu": 100_000, "memory": 400 * 2**30, GPU: 8, "pods": 1000}


@pytest.mark.parametrize(("usage", "share"), [
    ({}, 0.0),
    ({"cpu": 25_000}, 0.25),
    ({"cpu": 10_000, "memory": 200 * 2**30}, 0.5),  # memory dominates
    ({"cpu": 1_000, GPU: 2}, 0.25),  # one GPU of eight is worth more than 1% of the cpu
    ({"cpu": 10_000, "pods": 900}, 0.1),  # pod slots are not a resource of the share
    ({"cpu": 10_000, "example.com/fpga": 4}, 0.1),  # a resource the fleet lacks counts for nothing
    ({"cpu": 0, "memory": 0}, 0.0),
    ({"cpu": 200_000}, 2.0),  # more than the fleet (a worker left): the share says so
], ids=["nothing", "cpu", "memory-dominates", "gpu-dominates", "pods-left-out", "lacking-resource-left-out",
        "zeros", "over-one"])
def test_dominant_share(usage: dict[str, int], share: float) -> None:
    assert dominant_share(usage, FLEET) == pytest.approx(share)


@pytest.mark.parametrize(("usage", "weight", "share"), [
    ({GPU: 4}, 1.0, 0.5),
    ({GPU: 4}, 2.0, 0.25),  # twice the weight: half as far along its fair share
    ({"cpu": 50_000}, 0.5, 1.0),
])
def test_weighted_share(usage: dict[str, int], weight: float, share: float) -> None:
    assert weighted_share(usage, FLEET, weight) == pytest.approx(share)


def test_a_heavier_tenant_with_more_running_still_goes_first_below_its_weighted_share() -> None:
    heavy = weighted_share({"cpu": 30_000}, FLEET, 4.0)  # 0.3 of the fleet at weight 4: 0.075
    light = weighted_share({GPU: 1}, FLEET, 1.0)  # 0.125 at weight 1
    ranks = {t: FAIR.rank(0, T1 if t == "light" else T2, s, 0.0) for t, s in (("heavy", heavy), ("light", light))}
    assert min(ranks, key=lambda t: ranks[t]) == "heavy"


def test_demand_of_a_job_is_its_pods_at_once_without_pod_slots_or_zeros() -> None:
    assert demand_of({"cpu": 500, "memory": 2**30, GPU: 1, "pods": 1, "example.com/x": 0}, 4) == {
        "cpu": 2000, "memory": 4 * 2**30, GPU: 4}


def test_running_work_sums_per_tenant_and_forgets_a_tenant_with_nothing_running() -> None:
    work = RunningWork()
    work.add("j1", Running("a", {"cpu": 1000, GPU: 1}, "w1", 0.0, 60.0))
    work.add("j2", Running("a", {"cpu": 500}, "w2"))
    work.add("j3", Running("b", {"memory": 2**30}, "w1"))
    assert work.usage("a") == {"cpu": 1500, GPU: 1} and work.jobs("a") == 2 and len(work) == 3
    work.add("j1", Running("a", {"cpu": 2000}, "w1", 5.0, 60.0))  # looked at again: replaced, not added twice
    assert work.usage("a") == {"cpu": 2500} and work.jobs("a") == 2
    assert sorted(r.ends_at or 0.0 for r in work.on("w1")) == [0.0, 65.0]  # j3: length not known
    assert work.drop("j2") is not None and work.drop("j1") is not None and work.drop("j1") is None
    assert work.usage("a") == {} and work.jobs("a") == 0 and sorted(work.tenants()) == ["b"]
    assert "j3" in work and "j1" not in work


# -- tenants -----------------------------------------------------------------------------------------

TENANTS = [
    Tenant.model_validate({"name": "ml", "namespaces": ["ml-*", "research"], "weight": 2}),
    Tenant.model_validate({"name": "batch", "namespaceSelector": {"matchLabels": {"team": "batch"}}}),
    Tenant.model_validate({"name": "both", "namespaces": ["shared"],
                           "namespaceSelector": {"matchLabels": {"team": "ml"}}}),
]


@pytest.mark.parametrize(("namespace", "labels", "tenant"), [
    ("ml-train", None, "ml"),
    ("research", {"team": "batch"}, "ml"),  # the first tenant that lists or selects it
    ("nightly", {"team": "batch"}, "batch"),
    ("nightly", None, "nightly"),  # labels not known yet: its own tenant
    ("shared", {}, "both"),
    ("ml", {"team": "ml"}, "both"),
    ("other", {"team": "web"}, "other"),
])
def test_whose_a_job_is(namespace: str, labels: dict[str, str] | None, tenant: str) -> None:
    assert tenant_name(namespace, labels, TENANTS) == tenant
