"""The pure parts of ``bench placement --multitenant`` (issue 35 item 6): the seeded three-tenant
workload, waits, the burst window, dominant shares over time, Jain's index, priority inversions,
the lower bound with arrivals, and the table; no bed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import multitenant as mt
from bench import placement as pl
from bench import promtext
from mirror.config import Scheduling
from mirror.naming import ANNOTATION_EXPECTED_DURATION
from mirror.room.fit import NodeRoom, node_room

BIG = pl.NodeShape(1, "16", "64Gi", extended=((pl.GPU, "4"),))
SMALL = pl.NodeShape(2, "4", "16Gi")
NODES: dict[str, list[NodeRoom]] = {
    w: [node_room(pl.node_manifest(n, s)) for n in pl.node_names(w, s)]
    for w, s in (("worker-1", BIG), ("worker-2", SMALL))}


# -- the workload -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "sizes"), [
    (240, {"burst": 200, "small-a": 20, "small-b": 20}),
    (250, {"burst": 200, "small-a": 20, "small-b": 20}),  # rounded down to a multiple of 12
    (36, {"burst": 30, "small-a": 3, "small-b": 3}),
    (12, {"burst": 10, "small-a": 1, "small-b": 1}),
    (5, {"burst": 10, "small-a": 1, "small-b": 1}),  # at least one Job per small tenant
])
def test_the_burst_tenant_submits_ten_times_each_small_one(n: int, sizes: dict[str, int]) -> None:
    assert mt.tenant_sizes(n) == sizes


@pytest.mark.parametrize(("tenant", "count", "want"), [
    ("burst", 3, [0.0, 0.0, 0.0]),
    ("small-a", 4, [5.0, 10.0, 15.0, 20.0]),
    ("small-b", 4, [7.5, 12.5, 17.5, 22.5]),  # half a step after small-a: the two interleave
    ("small-a", 1, [5.0]),
])
def test_arrivals_burst_first_small_tenants_a_little_after(tenant: str, count: int, want: list[float]) -> None:
    assert mt.arrivals(tenant, count, stagger=5.0, spread=20.0) == want


def test_the_plan_is_seeded_and_has_every_tenant_priority_and_kind() -> None:
    jobs = mt.plan_tenants(240, seed=21)
    assert jobs == mt.plan_tenants(240, seed=21) and jobs != mt.plan_tenants(240, seed=22)
    assert len({j.name for j in jobs}) == len(jobs) == 240
    by_tenant = {t: [j for j in jobs if j.tenant == t] for t in mt.TENANTS}
    assert [len(v) for v in by_tenant.values()] == [200, 20, 20]
    for t, js in by_tenant.items():
        assert sum(j.priority_class == mt.HIGH for j in js) == round(0.2 * len(js))
        assert {j.kind for j in js} == {k.name for k in pl.KINDS}
        assert all(j.name.startswith(f"{t}-") for j in js)
    assert all(j.at == 0 for j in by_tenant["burst"])
    assert min(j.at for t in mt.SMALL for j in by_tenant[t]) >= mt.DEFAULT_STAGGER
    scaled = mt.plan_tenants(240, seed=21, duration_scale=0.5)
    assert [(s.name, s.tenant, s.kind) for s in scaled] == [(j.name, j.tenant, j.kind) for j in jobs]
    assert all(abs(s.seconds - j.seconds / 2) <= 0.1 for s, j in zip(scaled, jobs, strict=True))


def test_a_tiny_plan_still_has_every_tenant() -> None:
    jobs = mt.plan_tenants(12, seed=3)
    assert sorted({j.tenant for j in jobs}) == sorted(mt.TENANTS) and len(jobs) == 12


@pytest.mark.parametrize(("seconds", "text"), [(5.5, "5.5s"), (6.0, "6s"), (0.1, "0.1s"), (10.0, "10s")])
def test_expected_duration_is_the_planned_length(seconds: float, text: str) -> None:
    assert mt.expected_duration(seconds) == text


def test_the_manifest_carries_priority_class_expected_duration_and_tenant() -> None:
    j = mt.TenantJob("small-a-00001", "gpu", 1, (("cpu", "2"), ("memory", "8Gi"), (pl.GPU, "1")), 4.5,
                     tenant="small-a", priority_class=mt.HIGH, at=5.0)
    m = mt.tenant_manifest(j, "run1")
    assert m["spec"]["template"]["spec"]["priorityClassName"] == mt.HIGH
    assert m["metadata"]["annotations"][ANNOTATION_EXPECTED_DURATION] == "4.5s"
    assert m["metadata"]["annotations"][mt.ANNOTATION_TENANT] == "small-a"
    assert m["spec"]["managedBy"] == "jobmirror.dev/controller"
    assert m["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {pl.GPU: "1"}
    assert j.priority == 1000


def test_priority_classes_never_preempt() -> None:
    m = mt.priority_class_manifest(mt.HIGH, 1000)
    assert m["preemptionPolicy"] == "Never" and m["value"] == 1000 and m["globalDefault"] is False


@pytest.mark.parametrize("order", mt.ORDERS)
def test_the_scheduling_config_is_what_the_controller_accepts(order: str) -> None:
    cfg = mt.scheduling_config(order, mt.namespaces_for(order))
    s = Scheduling.model_validate(cfg)
    assert s.order == order and [t.name for t in s.tenants] == list(mt.TENANTS)
    assert [t.namespaces for t in s.tenants] == [[f"mt-{order.lower()}-{t}"] for t in mt.TENANTS]


def test_the_lower_bound_counts_the_last_arrival() -> None:
    late = mt.TenantJob("small-a-00000", "small", 1, (("cpu", "1"), ("memory", "1Gi")), 4.0, tenant="small-a", at=30)
    early = mt.TenantJob("burst-00000", "small", 1, (("cpu", "1"), ("memory", "1Gi")), 10.0)
    lb = mt.lower_bound([early, late], NODES)
    assert lb["seconds"] == 34.0 and lb["binding"] == "last arrival + its length"
    lb = mt.lower_bound([early], NODES)
    assert lb["seconds"] == 10.0 and lb["binding"] == "longest pod"


# -- waits --------------------------------------------------------------------------------------------


def test_waits_count_a_job_never_placed_until_the_end() -> None:
    w = mt.waits({"a": 10.0, "b": 10.0, "c": 12.0}, {"a": 11.5, "b": None, "c": 11.9}, end=40.0)
    assert w == {"a": 1.5, "b": 30.0, "c": 0.0}


def test_wait_summary_per_tenant() -> None:
    s = mt.wait_summary({"x1": 1.0, "x2": 3.0, "y1": 10.0}, {"x1": "x", "x2": "x", "y1": "y"})
    assert s["x"]["count"] == 2 and s["x"]["p50"] == 2.0 and s["y"]["p99"] == 10.0


@pytest.mark.parametrize(("placed", "want"), [
    ({"b1": 5.0, "b2": 20.0, "s1": 3.0}, (0.0, 20.0)),
    ({"b1": 5.0, "b2": None, "s1": 3.0}, (0.0, 99.0)),  # a burst Job never placed: until the end
])
def test_the_burst_lasts_until_its_last_job_is_placed(placed: dict[str, float | None],
                                                      want: tuple[float, float]) -> None:
    created = {"b1": 0.0, "b2": 0.5, "s1": 2.0}
    tenants = {"b1": "burst", "b2": "burst", "s1": "small-a"}
    assert mt.burst_window(created, placed, tenants, end=99.0) == want
    assert mt.burst_window({"s1": 2.0}, {"s1": 3.0}, {"s1": "small-a"}, end=9.0) is None


def test_waits_during_the_burst_are_the_small_tenants_created_inside_it() -> None:
    created = {"b1": 0.0, "s1": 2.0, "s2": 25.0, "t1": 3.0}
    tenants = {"b1": "burst", "s1": "small-a", "s2": "small-a", "t1": "small-b"}
    w = {"b1": 9.0, "s1": 4.0, "s2": 1.0, "t1": 6.0}
    assert sorted(mt.waits_during(w, created, tenants, mt.SMALL, (0.0, 20.0))) == [4.0, 6.0]
    assert mt.waits_during(w, created, tenants, mt.SMALL, None) == []


# -- shares and fairness ------------------------------------------------------------------------------

CAP = {"cpu": 40_000.0, "memory": 160.0, pl.GPU: 8.0}


@pytest.mark.parametrize(("used", "share"), [
    ({}, 0.0),
    ({"cpu": 10_000}, 0.25),
    ({"cpu": 10_000, "memory": 80}, 0.5),  # memory dominates
    ({"cpu": 2_000, pl.GPU: 4}, 0.5),  # the gpu dominates
    ({"cpu": 2_000, "example.com/other": 99}, 0.05),  # a resource outside the share is ignored
])
def test_dominant_share_is_the_largest_fraction(used: dict[str, float], share: float) -> None:
    assert mt.dominant_share(used, CAP) == share


def test_dominant_share_of_a_resource_the_fleet_lacks_is_ignored() -> None:
    assert mt.dominant_share({pl.GPU: 1}, {"cpu": 1000.0}) == 0.0


def test_shares_and_waiting_over_time() -> None:
    pods = [mt.Span("burst", 0.0, 10.0, {"cpu": 20_000}), mt.Span("small-a", 2.0, None, {"cpu": 10_000}),
            mt.Span("small-b", 3.0, 4.0, {pl.GPU: 2})]
    waiting = [mt.Span("burst", 0.0, 6.0), mt.Span("small-a", 1.0, 2.0), mt.Span("small-b", 1.0, 3.0)]
    weights = dict.fromkeys(mt.TENANTS, 1.0)
    samples = mt.shares_over_time(pods, waiting, CAP, weights, start=0.0, end=4.0)
    assert [s["t"] for s in samples] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert samples[0]["shares"] == {"burst": 0.5, "small-a": 0.0, "small-b": 0.0}
    assert samples[3]["shares"] == {"burst": 0.5, "small-a": 0.25, "small-b": 0.25}
    assert samples[4]["shares"]["small-b"] == 0.0  # its pod ended at 4: end is exclusive
    assert [s["allWaiting"] for s in samples] == [False, True, False, False, False]


def test_a_weight_divides_the_share() -> None:
    pods = [mt.Span("burst", 0.0, None, {"cpu": 20_000})]
    assert mt.shares_at(pods, CAP, 1.0, {"burst": 2.0, "small-a": 1.0}) == {"burst": 0.25, "small-a": 0.0}


@pytest.mark.parametrize(("values", "index"), [
    ([0.3, 0.3, 0.3], 1.0),
    ([0.9, 0.0, 0.0], 0.3333),  # one tenant has everything: 1/n
    ([0.5, 0.25, 0.25], 0.8889),
    ([0.0, 0.0, 0.0], None),  # nobody runs anything: nothing to judge
    ([], None),
])
def test_jain(values: list[float], index: float | None) -> None:
    assert mt.jain(values) == index


@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=8).filter(lambda v: any(x > 1e-6 for x in v)),
       st.floats(min_value=0.01, max_value=100))
def test_jain_lies_between_one_over_n_and_one_and_ignores_scale(values: list[float], k: float) -> None:
    j = mt.jain(values)
    assert j is not None and 1 / len(values) - 1e-3 <= j <= 1 + 1e-9
    scaled = mt.jain([v * k for v in values])
    assert scaled is not None and abs(scaled - j) <= 2e-4


def test_fairness_is_taken_only_while_every_tenant_waits() -> None:
    samples = [{"t": 0, "shares": {"a": 1.0, "b": 0.0, "c": 0.0}, "allWaiting": False},
               {"t": 1, "shares": {"a": 0.3, "b": 0.3, "c": 0.3}, "allWaiting": True},
               {"t": 2, "shares": {"a": 0.5, "b": 0.25, "c": 0.25}, "allWaiting": True},
               {"t": 3, "shares": {"a": 0.0, "b": 0.0, "c": 0.0}, "allWaiting": True}]
    assert mt.fairness(samples) == {"mean": 0.944, "min": 0.8889, "samples": 2, "samplesAllWaiting": 3}
    assert mt.fairness(samples[:1]) == {"mean": None, "min": None, "samples": 0, "samplesAllWaiting": 0}


def row(tenant: str, prio: str, created: float, placed: float | None) -> dict[str, Any]:
    return {"tenant": tenant, "priority": prio, "createdAt": created, "placedAt": placed}


@pytest.mark.parametrize(("rows", "t", "want"), [
    # everybody waits, all low: fair share decides
    ([row("burst", mt.LOW, 0, 9), row("small-a", mt.LOW, 1, 9), row("small-b", mt.LOW, 1, 9)], 2.0, True),
    # the burst also has a high Job waiting: priority decides, the small tenants are behind by priority
    ([row("burst", mt.HIGH, 0, 9), row("burst", mt.LOW, 0, 9), row("small-a", mt.LOW, 1, 9),
      row("small-b", mt.LOW, 1, 9)], 2.0, False),
    # ... until it is placed
    ([row("burst", mt.HIGH, 0, 1.5), row("burst", mt.LOW, 0, 9), row("small-a", mt.LOW, 1, 9),
      row("small-b", mt.LOW, 1, None)], 2.0, True),
    # one tenant waits for nothing
    ([row("burst", mt.LOW, 0, 9), row("small-a", mt.LOW, 1, 9), row("small-b", mt.LOW, 3, 9)], 2.0, False),
    ([], 2.0, False),
])
def test_all_waiting_at_the_top_priority(rows: list[dict[str, Any]], t: float, want: bool) -> None:
    assert mt.all_waiting_at_top(rows, t, mt.TENANTS) is want


def test_fairness_at_the_same_priority_leaves_out_the_seconds_priority_decided() -> None:
    rows = [row("burst", mt.HIGH, 0, 1.5), row("burst", mt.LOW, 0, 9), row("small-a", mt.LOW, 0, 9),
            row("small-b", mt.LOW, 0, 9)]
    samples = [{"t": 1.0, "shares": {"burst": 0.9, "small-a": 0.0, "small-b": 0.0}, "allWaiting": True},
               {"t": 2.0, "shares": {"burst": 0.3, "small-a": 0.3, "small-b": 0.3}, "allWaiting": True}]
    assert mt.fairness(samples)["samples"] == 2
    assert mt.fairness_same_priority(samples, rows) == {"mean": 1.0, "min": 1.0, "samples": 1,
                                                        "samplesAllWaiting": 1}


# -- priority inversions ------------------------------------------------------------------------------

ONE = {"cpu": 1000, "memory": 2 << 30}
TWELVE = {"cpu": 12_000, "memory": 24 << 30}
BOTH = frozenset({"worker-1", "worker-2"})


def placed(name: str, prio: int, created: float, at: float | None, worker: str | None = "worker-1",
           pod: dict[str, int] | None = None, pods: int = 1, fits: frozenset[str] = BOTH) -> mt.Placed:
    return mt.Placed(name, prio, created, at, worker if at is not None else None, pod or ONE, pods, fits)


@pytest.mark.parametrize(("jobs", "strict", "loose"), [
    # the high one was placed first: no inversion
    ([placed("h", 1000, 0.0, 1.0), placed("l", 100, 0.0, 2.0)], [], []),
    # the low one placed while the high one (same size, created 5 s before) waited
    ([placed("h", 1000, 0.0, 9.0), placed("l", 100, 0.0, 5.0)], [("h", "l")], [("h", "l")]),
    # ... or never placed at all
    ([placed("h", 1000, 0.0, None), placed("l", 100, 0.0, 5.0)], [("h", "l")], [("h", "l")]),
    # the high one was created under a second before: the controller may not have seen it yet
    ([placed("h", 1000, 4.5, 9.0), placed("l", 100, 0.0, 5.0)], [], []),
    # same priority: arrival or fair share decides, not an inversion
    ([placed("h", 100, 0.0, 9.0), placed("l", 100, 0.0, 5.0)], [], []),
    # the high one is larger than the room the low one took: not strict (backfill), loose
    ([placed("h", 1000, 0.0, 9.0, pod=TWELVE), placed("l", 100, 0.0, 5.0)], [], [("h", "l")]),
    # more pods than the low one had: the same
    ([placed("h", 1000, 0.0, 9.0, pods=3), placed("l", 100, 0.0, 5.0, pods=2)], [], [("h", "l")]),
    # the low one went to a worker where the high one can never run: neither
    ([placed("h", 1000, 0.0, 9.0, fits=frozenset({"worker-1"})), placed("l", 100, 0.0, 5.0, worker="worker-2")],
     [], []),
    # a smaller high one fits in a larger low one's room
    ([placed("h", 1000, 0.0, 9.0), placed("l", 100, 0.0, 5.0, pod=TWELVE, pods=2)], [("h", "l")], [("h", "l")]),
])
def test_inversions(jobs: list[mt.Placed], strict: list[tuple[str, str]], loose: list[tuple[str, str]]) -> None:
    assert mt.inversions(jobs) == strict
    assert mt.inversions(jobs, strict=False) == loose


@pytest.mark.parametrize(("said", "in_line"), [
    (3.0, [("h", "l")]),  # the controller had said h waits before l was placed: its line's order broke
    (6.0, []),  # said only after l's placement: l may have been placed before the controller saw h
    (None, []),  # never said to wait
])
def test_inversions_in_the_waiting_line(said: float | None, in_line: list[tuple[str, str]]) -> None:
    h = mt.Placed("h", 1000, 0.0, 9.0, "worker-1", ONE, 1, BOTH, waiting_seen=said)
    jobs = [h, placed("l", 100, 0.0, 5.0)]
    assert mt.inversions(jobs) == [("h", "l")]
    assert mt.inversions(jobs, seen_waiting=True) == in_line


def test_wait_watch_keeps_the_first_waiting_event_of_a_job() -> None:
    w = mt.WaitWatch()
    ev = {"reason": "WaitingForRoom", "involvedObject": {"kind": "Job", "name": "burst-00001"}}
    w.on_event("ADDED", None, ev)
    first = w.first["burst-00001"]
    w.on_event("MODIFIED", None, ev)
    w.on_event("ADDED", None, {"reason": "Dispatched", "involvedObject": {"kind": "Job", "name": "x"}})
    w.on_event("ADDED", None, {"reason": "WaitingForRoom", "involvedObject": {"kind": "Pod", "name": "y"}})
    assert w.first == {"burst-00001": first}


def _record(i: int, prio: int, created: float, delay: float | None, w: str, cpu: int, pods: int,
            said: float | None) -> mt.Placed:
    at = None if delay is None else created + delay
    return mt.Placed(f"j{i}", prio, created, at, w if at is not None else None, {"cpu": cpu}, pods, BOTH,
                     None if said is None else created + said)


job_records = st.builds(
    _record, st.integers(0, 10**6), st.sampled_from([100, 1000]), st.floats(0, 100),
    st.one_of(st.none(), st.floats(0, 50)), st.sampled_from(["worker-1", "worker-2"]),
    st.sampled_from([1000, 3000, 12_000]), st.integers(1, 4), st.one_of(st.none(), st.floats(0, 20)))


@given(st.lists(job_records, max_size=25, unique_by=lambda j: j.name))
def test_strict_inversions_are_loose_ones(jobs: list[mt.Placed]) -> None:
    assert set(mt.inversions(jobs, seen_waiting=True)) <= set(mt.inversions(jobs)) <= set(
        mt.inversions(jobs, strict=False))


@given(st.lists(job_records, max_size=25, unique_by=lambda j: j.name))
def test_placing_by_priority_first_has_no_inversion(jobs: list[mt.Placed]) -> None:
    # every higher-priority Job placed before any lower one is: the order never inverts
    highs = [j for j in jobs if j.priority == 1000]
    lows = [j for j in jobs if j.priority == 100]
    last_high = max((j.placed or 0.0 for j in highs), default=0.0)
    ordered = [mt.Placed(j.name, j.priority, j.created, i * 0.001, j.worker or "worker-1", j.pod, j.pods, j.fits_on)
               for i, j in enumerate(highs)]
    ordered += [mt.Placed(j.name, j.priority, j.created, last_high + 1000 + i, j.worker or "worker-1", j.pod, j.pods,
                          j.fits_on) for i, j in enumerate(lows)]
    assert mt.inversions(ordered, strict=False) == []


# -- reporting ----------------------------------------------------------------------------------------


def fake_order(order: str, makespan: float | None) -> dict[str, Any]:
    per_job = [{"name": f"{t}-0", "tenant": t, "wait": 1.0 + i} for i, t in enumerate(mt.TENANTS)]
    return {"order": order, "makespanSeconds": makespan, "makespanOverBound": None if makespan is None else 1.3,
            "runSeconds": 60.0, "completed": 3 if makespan else 2,
            "waitSeconds": {t: {"p50": 1.0, "p99": 2.0} for t in mt.TENANTS},
            "smallDuringBurst": {"p99": 3.0, "p99OverMeanLength": 0.6}, "fairness": {"mean": 0.9, "min": 0.5,
                                                                                     "samples": 4},
            "fairnessSamePriority": {"mean": 0.95, "samples": 3},
            "priorityInversions": 0, "priorityInversionsLoose": 2, "priorityInversionsInLine": 0,
            "managerCallsPerJob": 9.1, "perJob": per_job,
            "sharesOverTime": [{"t": 0.0, "shares": {"burst": 0.5, "small-a": 0.1, "small-b": 0.0},
                                "allWaiting": True}]}


def fake_result() -> dict[str, Any]:
    return {"benchmark": mt.BENCHMARK, "seed": 21, "workload": {"jobs": 3}, "lowerBound": {"seconds": 40.0,
                                                                                            "binding": "total cpu"},
            "orders": {"Arrival": fake_order("Arrival", 52.0), "FairShare": fake_order("FairShare", None),
                       "Broken": {"order": "Broken", "error": "boom"}}}


def test_markdown_table_has_a_row_per_order() -> None:
    table = mt.markdown_table(fake_result())
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert rows[1].startswith("| Arrival | 52.0 (1.30x) | 3/3 | 1.0 / 2.0 |")
    assert "| FairShare | did not finish in 60.0 |" in table and "| Broken | failed: boom |" in table
    assert "| 0 (0; 2) |" in rows[1] and "0.90 (0.50), 4 | 0.95, 3 |" in rows[1]
    assert all(r.count("|") == rows[0].count("|") for r in rows)


def test_no_small_job_in_the_burst_leaves_the_ratio_out() -> None:
    result = fake_result()
    result["orders"]["Arrival"]["smallDuringBurst"] = {"p99": None, "p99OverMeanLength": None}
    row = next(line for line in mt.markdown_table(result).splitlines() if line.startswith("| Arrival"))
    assert "| - |" in row and "x)" not in row.split("|")[7]


def test_the_plot_renders(tmp_path: Path) -> None:
    from bench import plot

    out = plot.plot_multitenant(fake_result(), tmp_path / "mt.png")
    assert out.stat().st_size > 10_000


@pytest.mark.parametrize(("figures", "calls", "met"), [
    ({"makespanOverBound": 1.1, "smallDuringBurst": {"p99OverMeanLength": 1.5}, "fairness": {"mean": 0.95},
      "priorityInversions": 0, "managerCallsPerJob": 9.0}, 9.5,
     {"makespanOverBound": True, "smallP99OverLength": True, "jain": True, "priorityInversions": True,
      "managerCallsPerJob": True}),
    ({"makespanOverBound": 1.45, "smallDuringBurst": {"p99OverMeanLength": 8.0}, "fairness": {"mean": 0.4},
      "priorityInversions": 3, "managerCallsPerJob": 10.0}, 9.5,
     {"makespanOverBound": False, "smallP99OverLength": False, "jain": False, "priorityInversions": False,
      "managerCallsPerJob": False}),
    ({"makespanOverBound": None, "smallDuringBurst": {}, "fairness": {"mean": None}, "priorityInversions": 0,
      "managerCallsPerJob": 9.0}, None,
     {"makespanOverBound": None, "smallP99OverLength": None, "jain": None, "priorityInversions": True,
      "managerCallsPerJob": None}),
])
def test_targets(figures: dict[str, Any], calls: float | None, met: dict[str, bool | None]) -> None:
    assert {k: t["met"] for k, t in mt.targets(figures, calls).items()} == met


def test_the_table_says_which_targets_are_met() -> None:
    result = fake_result()
    result["orders"]["Arrival"]["targets"] = mt.targets(result["orders"]["Arrival"], 9.1)
    table = mt.markdown_table(result)
    assert "Arrival, issue 35 targets: makespanOverBound 1.30 ≤ 1.2: NOT met;" in table
    assert "priorityInversions 0 ≤ 0: met" in table


def test_passes_per_job_and_backfills_come_from_the_controllers_counters() -> None:
    def samples(passes: float, backfills: dict[str, float]) -> list[promtext.Sample]:
        return [promtext.Sample("jobmirror_sync_duration_seconds_count", {}, passes),
                *(promtext.Sample("jobmirror_backfills_total", {"worker": w}, v) for w, v in backfills.items())]

    got = mt.controller_counts(samples(10, {"worker-1": 1}), samples(490, {"worker-1": 4, "worker-2": 2}), 240)
    assert got == {"passesPerJob": 2.0, "backfills": 5}
    assert mt.controller_counts(None, samples(1, {}), 240) == {"passesPerJob": None, "backfills": None}
