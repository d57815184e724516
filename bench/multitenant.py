"""``bench placement --multitenant``: who goes first when three tenants share the fleet (issue 35 item 6).

The bed, node shapes, Job kinds, lower bound, controller start and watches are bench/placement.py's.
What is new is the workload and the figures: three tenants (three manager namespaces), one of
which ("burst") submits 10x the Jobs of each of the two others ("small-a", "small-b") at t0; the
small tenants' Jobs trickle in a little after, while the burst still waits ("why is my one Job
waiting behind their ten thousand?"). 20 % of each tenant's Jobs use a high PriorityClass, the rest
a low one (both created on the manager and on the workers, ``preemptionPolicy: Never``, so the
workers' schedulers never evict: the order is the manager's alone). Every Job carries its planned
length in ``jobmirror.dev/expected-duration``, so backfill can use it.

The same seeded Jobs run once per ``scheduling.order`` (``Arrival``, ``FairShare``) on the same bed,
each in fresh namespaces with a fresh controller. Per order: makespan ÷ lower bound, each tenant's
wait (create sent → placement annotation seen, both on the benchmark's clock), the small tenants'
wait during the burst, Jain's index of the tenants' dominant shares while every tenant has work
waiting, priority inversions, and manager calls per Job.

The figures are pure functions (``waits``, ``burst_window``, ``shares_over_time``, ``jain``,
``fairness``, ``inversions``, ...), tested without a bed; everything after ``# -- running`` is glue.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import env, promtext, stats
from bench import placement as pl
from bench.machine import load
from bench.workload import Submission, submit
from clusterbed.cluster import ClusterBed, LocalCluster, scratch_dir
from kruntime.client import ApiError, ClusterClient
from kruntime.informer import Informer
from kruntime.resources import EVENTS, JOBS, PODS, Obj, Resource
from mirror.naming import ANNOTATION_EXPECTED_DURATION
from mirror.room.fit import NodeRoom
from mirror.room.requests import PODS as POD_SLOTS
from testkit.waiting import ensure_namespace

BENCHMARK = "placement-multitenant"
ORDERS = ("Arrival", "FairShare")
BURST = "burst"
SMALL = ("small-a", "small-b")
TENANTS = (BURST, *SMALL)
#: the burst tenant submits this many times the Jobs of each small tenant
BURST_FACTOR = 10
#: the PriorityClasses (name → value) and the share of each tenant's Jobs that are high
HIGH, LOW = "jobmirror-bench-high", "jobmirror-bench-low"
PRIORITY_CLASSES = {HIGH: 1000, LOW: 100}
HIGH_SHARE = 0.2
#: the resources of the dominant share (DRF): of these, the largest fraction of the fleet's allocatable
SHARE_RESOURCES = ("cpu", "memory", pl.GPU)
PRIORITY_CLASS_RESOURCE = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
ANNOTATION_TENANT = "jobmirror.dev/bench-tenant"
DEFAULT_JOBS = 240
DEFAULT_STAGGER = 5.0
DEFAULT_SPREAD = 20.0
#: a higher-priority Job must have been created this long before a lower one's placement for the
#: pair to count as an inversion: the controller cannot order a Job it has not seen yet
INVERSION_GRACE = 1.0

# -- the workload -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TenantJob(pl.PlannedJob):
    """A planned Job of one tenant: its PriorityClass and when (seconds after t0) its create is sent."""

    tenant: str = BURST
    priority_class: str = LOW
    at: float = 0.0

    @property
    def priority(self) -> int:
        return PRIORITY_CLASSES[self.priority_class]


def tenant_sizes(n: int) -> dict[str, int]:
    """Jobs per tenant: ``n`` rounded down to a multiple of 12, the burst 10/12 of it, each small
    tenant 1/12 (at least one each)."""
    k = max(1, n // (BURST_FACTOR + len(SMALL)))
    return {BURST: BURST_FACTOR * k, **{t: k for t in SMALL}}


def _kinds(n: int, rng: random.Random) -> list[str]:
    """``n`` kind names in the KINDS mix (``kind_counts`` when every kind fits, else drawn by share)."""
    if n >= len(pl.KINDS):
        kinds = [name for name, c in pl.kind_counts(n).items() for _ in range(c)]
    else:
        kinds = rng.choices([k.name for k in pl.KINDS], weights=[k.share for k in pl.KINDS], k=n)
    rng.shuffle(kinds)
    return kinds


def arrivals(tenant: str, count: int, stagger: float, spread: float) -> list[float]:
    """Seconds after t0 each Job's create is sent: the burst all at 0; each small tenant's evenly
    over ``[stagger, stagger + spread]`` (the second small tenant half a step later)."""
    if tenant == BURST:
        return [0.0] * count
    step = spread / count
    offset = step * SMALL.index(tenant) / len(SMALL)
    return [round(stagger + offset + i * step, 2) for i in range(count)]


def plan_tenants(n: int, seed: int, duration_scale: float = 1.0, stagger: float = DEFAULT_STAGGER,
                 spread: float = DEFAULT_SPREAD) -> list[TenantJob]:
    """The seeded multi-tenant mix: per tenant the KINDS mix, 20 % high priority, staged arrivals;
    names carry the tenant (unique over the run's namespaces). The same list for every order."""
    rng = random.Random(seed)
    by_name = {k.name: k for k in pl.KINDS}
    out: list[TenantJob] = []
    for tenant, count in tenant_sizes(n).items():
        kinds = _kinds(count, rng)
        high = set(rng.sample(range(count), round(HIGH_SHARE * count)))
        for i, (name, at) in enumerate(zip(kinds, arrivals(tenant, count, stagger, spread), strict=True)):
            k = by_name[name]
            pods = rng.randint(*k.pods)
            secs = max(0.1, round(rng.uniform(*k.seconds) * duration_scale, 1))
            out.append(TenantJob(f"{tenant}-{i:05d}", name, pods, k.requests, secs, tenant=tenant,
                                 priority_class=HIGH if i in high else LOW, at=at))
    return out


def expected_duration(seconds: float) -> str:
    """The annotation's value: the planned pod length (parallelism = completions, so the Job's)."""
    return f"{seconds:g}s"


def tenant_manifest(job: TenantJob, run_id: str) -> Obj:
    """bench/placement.py's Job plus its PriorityClass, expected duration and tenant."""
    m = pl.manifest(job, run_id)
    m["metadata"]["annotations"].update({ANNOTATION_EXPECTED_DURATION: expected_duration(job.seconds),
                                         ANNOTATION_TENANT: job.tenant})
    m["spec"]["template"]["spec"]["priorityClassName"] = job.priority_class
    return m


def priority_class_manifest(name: str, value: int) -> Obj:
    """``preemptionPolicy: Never``: a worker's scheduler never evicts a running pod for a waiting one."""
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": False, "preemptionPolicy": "Never",
            "description": "bench placement --multitenant"}


def namespaces_for(order: str) -> dict[str, str]:
    """Tenant → its manager namespace in the run of ``order`` (fresh per order)."""
    return {t: f"mt-{order.lower()}-{t}" for t in TENANTS}


def scheduling_config(order: str, namespaces: Mapping[str, str]) -> dict[str, Any]:
    """The controller's ``scheduling:`` (one tenant per namespace, weight 1, no quota). Backfill's margin
    for pod start-up is 1 s: kwok starts a pod at once (a real cluster keeps the default 5 s)."""
    return {"order": order, "tenants": [{"name": t, "namespaces": [ns], "weight": 1} for t, ns in namespaces.items()],
            "backfillMargin": 1.0}


def workload_summary(jobs: Sequence[TenantJob]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in TENANTS:
        js = [j for j in jobs if j.tenant == t]
        out[t] = {"jobs": len(js), "pods": sum(j.pods for j in js),
                  "high": sum(1 for j in js if j.priority_class == HIGH),
                  "byKind": dict(Counter(j.kind for j in js)),
                  "meanSeconds": round(sum(j.seconds for j in js) / len(js), 2) if js else None,
                  "arrivals": [min((j.at for j in js), default=None), max((j.at for j in js), default=None)]}
    return {"jobs": len(jobs), "pods": sum(j.pods for j in jobs), "byTenant": out,
            "priorityClasses": PRIORITY_CLASSES, "highShare": HIGH_SHARE}


def arrival_bound(jobs: Iterable[TenantJob]) -> float:
    """No schedule ends before the last-arriving Job's own length after its arrival."""
    return round(max((j.at + j.seconds for j in jobs), default=0.0), 2)


def lower_bound(jobs: Sequence[TenantJob], nodes: Mapping[str, Sequence[NodeRoom]]) -> dict[str, Any]:
    """bench/placement.py's bound with the arrivals as one more candidate."""
    lb = pl.lower_bound(jobs, nodes)
    arrive = arrival_bound(jobs)
    lb["lastArrivalPlusLength"] = arrive
    if arrive > lb["seconds"]:
        lb["seconds"], lb["binding"] = arrive, "last arrival + its length"
    return lb


# -- the figures (pure) -----------------------------------------------------------------------------


def waits(created: Mapping[str, float], placed: Mapping[str, float | None], end: float) -> dict[str, float]:
    """Per Job: create sent → placement seen (seconds). A Job never placed waited at least until
    ``end``: it counts with that (censored) value, so percentiles are never flattered."""
    return {n: round(max(0.0, (placed.get(n) or end) - c), 3) for n, c in created.items()}


def wait_summary(w: Mapping[str, float], tenant_of: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Per tenant: count/p50/p99/max of its Jobs' waits."""
    by: dict[str, list[float]] = {}
    for n, v in w.items():
        by.setdefault(tenant_of[n], []).append(v)
    return {t: stats.summarize(vs, digits=2) for t, vs in sorted(by.items())}


def burst_window(created: Mapping[str, float], placed: Mapping[str, float | None], tenant_of: Mapping[str, str],
                 end: float, burst: str = BURST) -> tuple[float, float] | None:
    """The burst: its tenant's first create → its last Job placed (``end`` if one never was)."""
    mine = [n for n in created if tenant_of[n] == burst]
    if not mine:
        return None
    last = max((placed.get(n) or end) for n in mine)
    return min(created[n] for n in mine), last


def waits_during(w: Mapping[str, float], created: Mapping[str, float], tenant_of: Mapping[str, str],
                 tenants: Iterable[str], window: tuple[float, float] | None) -> list[float]:
    """Waits of ``tenants``' Jobs created inside ``window``."""
    if window is None:
        return []
    want = set(tenants)
    return [w[n] for n, c in created.items() if tenant_of[n] in want and window[0] <= c <= window[1]]


@dataclass(frozen=True)
class Span:
    """One pod (or one Job's wait): ``tenant``'s, from ``start`` until ``end`` (None: still at the end)."""

    tenant: str
    start: float
    end: float | None
    amounts: Mapping[str, int] = field(default_factory=dict)

    def covers(self, t: float) -> bool:
        return self.start <= t and (self.end is None or t < self.end)


def dominant_share(used: Mapping[str, float], capacity: Mapping[str, float],
                   resources: Iterable[str] = SHARE_RESOURCES) -> float:
    """DRF: the largest fraction of the fleet's capacity of any resource that ``used`` takes."""
    return max((used.get(r, 0) / capacity[r] for r in resources if capacity.get(r)), default=0.0)


def shares_at(spans: Iterable[Span], capacity: Mapping[str, float], t: float,
              weights: Mapping[str, float]) -> dict[str, float]:
    """Each tenant's weighted dominant share of the pods running at ``t`` (share ÷ weight)."""
    used: dict[str, Counter[str]] = {tn: Counter() for tn in weights}
    for s in spans:
        if s.covers(t):
            used.setdefault(s.tenant, Counter()).update(s.amounts)
    return {tn: round(dominant_share(used[tn], capacity) / weights.get(tn, 1.0), 4) for tn in weights}


def waiting_at(waiting: Iterable[Span], t: float, tenants: Iterable[str]) -> bool:
    """Every one of ``tenants`` has a Job waiting at ``t`` (a span from create to placement)."""
    left = set(tenants)
    for s in waiting:
        if s.tenant in left and s.covers(t):
            left.discard(s.tenant)
            if not left:
                return True
    return not left


def shares_over_time(pods: Sequence[Span], waiting: Sequence[Span], capacity: Mapping[str, float],
                     weights: Mapping[str, float], start: float, end: float,
                     step: float = 1.0) -> list[dict[str, Any]]:
    """Samples every ``step`` s from ``start`` to ``end``: seconds since ``start``, the tenants'
    weighted dominant shares, and whether every tenant had work waiting then."""
    out = []
    k = 0
    while start + k * step <= end:
        t = start + k * step
        out.append({"t": round(k * step, 3), "shares": shares_at(pods, capacity, t, weights),
                    "allWaiting": waiting_at(waiting, t, weights)})
        k += 1
    return out


def jain(values: Sequence[float]) -> float | None:
    """Jain's fairness index (Σx)² / (n·Σx²): 1 when all are equal, 1/n when one has everything.
    None when there is nothing to judge (no values, or all zero: nobody runs anything)."""
    sq = sum(v * v for v in values)
    if not values or sq == 0:
        return None
    return round(sum(values) ** 2 / (len(values) * sq), 4)


def fairness(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Jain's index of the shares over the samples where every tenant had work waiting: mean, min
    and how many samples (seconds) that was."""
    js = [j for s in samples if s["allWaiting"] for j in [jain(list(s["shares"].values()))] if j is not None]
    return {"mean": round(sum(js) / len(js), 3) if js else None, "min": min(js) if js else None,
            "samples": len(js), "samplesAllWaiting": sum(1 for s in samples if s["allWaiting"])}


def all_waiting_at_top(rows: Sequence[Mapping[str, Any]], t: float, tenants: Iterable[str]) -> bool:
    """Every tenant has a Job waiting at ``t`` at the highest priority any waiting Job has: the
    moments fair share, not priority, decides between them. ``rows``: ``perJob`` entries
    (``createdAt``/``placedAt`` seconds since t0, ``priority`` a PriorityClass name)."""
    waiting = [r for r in rows if r.get("createdAt") is not None and r["createdAt"] <= t
               and (r.get("placedAt") is None or t < r["placedAt"])]
    if not waiting:
        return False
    top = max(PRIORITY_CLASSES[r["priority"]] for r in waiting)
    return set(tenants) <= {r["tenant"] for r in waiting if PRIORITY_CLASSES[r["priority"]] == top}


def fairness_same_priority(samples: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]],
                           tenants: Iterable[str] = TENANTS) -> dict[str, Any]:
    """``fairness`` over only the samples where every tenant waits at the top waiting priority (a
    tenant whose waiting Jobs are all of a lower priority than another's is behind by priority, which
    comes first by design)."""
    ts = list(tenants)
    return fairness([{**sm, "allWaiting": all_waiting_at_top(rows, sm["t"], ts)} for sm in samples])


@dataclass(frozen=True)
class Placed:
    """What the inversion count needs of one Job."""

    name: str
    priority: int
    created: float
    placed: float | None
    worker: str | None
    pod: Mapping[str, int]  # one pod's requests, scheduler units
    pods: int
    fits_on: frozenset[str]  # workers where a node could ever hold one of its pods
    #: when the benchmark first saw the controller say the Job waits (its WaitingForRoom event)
    waiting_seen: float | None = None


def fits_in_room_of(high: Placed, low: Placed) -> bool:
    """``high`` would have fit wherever ``low`` was put: a worker where it could run at all, with
    no more pods than ``low`` and no pod asking more of any resource than ``low``'s pods do."""
    if low.worker is None or low.worker not in high.fits_on or high.pods > low.pods:
        return False
    return all(v <= low.pod.get(r, 0) for r, v in high.pod.items() if r != POD_SLOTS)


def inversions(jobs: Sequence[Placed], grace: float = INVERSION_GRACE, *,
               strict: bool = True, seen_waiting: bool = False) -> list[tuple[str, str]]:
    """Pairs (higher, lower) where the lower-priority Job was placed while the higher one waited:
    the higher was created at least ``grace`` s before the lower's placement and placed after it
    (or never), and — ``strict`` — the higher fit in the room the lower took (``fits_in_room_of``).
    Not strict: it could merely ever run on the lower's worker (this also counts legitimate
    backfill of a small Job past a large one that did not fit yet). ``seen_waiting``: only highers
    the controller had already said wait (``waiting_seen`` before the lower's placement): Jobs in
    its waiting line, which its order governs, as opposed to ones it had not looked at yet."""
    placed = sorted((j for j in jobs if j.placed is not None), key=lambda j: j.placed or 0.0)
    out = []
    for low in placed:
        assert low.placed is not None
        for high in jobs:
            if high.priority <= low.priority or high.created + grace > low.placed:
                continue
            if high.placed is not None and high.placed <= low.placed:
                continue
            if seen_waiting and (high.waiting_seen is None or high.waiting_seen > low.placed):
                continue
            ok = fits_in_room_of(high, low) if strict else (low.worker in high.fits_on)
            if ok:
                out.append((high.name, low.name))
    return out


#: issue 35's targets for the new order: (figure, limit, how it compares)
TARGETS = (("makespanOverBound", 1.2, "≤"), ("smallP99OverLength", 2.0, "≤"), ("jain", 0.9, "≥"),
           ("priorityInversions", 0, "≤"))


def controller_counts(before: list[promtext.Sample] | None, after: list[promtext.Sample] | None,
                      jobs: int) -> dict[str, Any]:
    """Reconcile passes per Job and the placements that backfilled, from the controller's own counters."""
    if before is None or after is None or jobs <= 0:
        return {"passesPerJob": None, "backfills": None}

    def delta(name: str) -> float:
        return promtext.total(after, name) - promtext.total(before, name)

    return {"passesPerJob": round(delta("jobmirror_sync_duration_seconds_count") / jobs, 2),
            "backfills": int(delta("jobmirror_backfills_total"))}


def targets(r: Mapping[str, Any], baseline_calls: float | None = None) -> dict[str, dict[str, Any]]:
    """Issue 35's targets judged on one order's figures (None: not measurable in this run);
    ``baseline_calls``: the Arrival order's manager calls per Job (no more than today's)."""
    have = {"makespanOverBound": r.get("makespanOverBound"),
            "smallP99OverLength": (r.get("smallDuringBurst") or {}).get("p99OverMeanLength"),
            "jain": (r.get("fairness") or {}).get("mean"), "priorityInversions": r.get("priorityInversions")}
    out: dict[str, dict[str, Any]] = {}
    for key, limit, op in TARGETS:
        v = have[key]
        out[key] = {"value": v, "target": f"{op} {limit}",
                    "met": None if v is None else (v <= limit if op == "≤" else v >= limit)}
    calls = r.get("managerCallsPerJob")
    out["managerCallsPerJob"] = {"value": calls, "target": f"≤ {baseline_calls} (Arrival)",
                                 "met": None if calls is None or baseline_calls is None else calls <= baseline_calls}
    return out


# -- running ------------------------------------------------------------------------------------------


@dataclass
class MultiTenantOptions:
    out: Path
    jobs: int = DEFAULT_JOBS
    seed: int = pl.DEFAULT_SEED
    timeout: float | None = None  # per order; None = 3 x lower bound + 120 s
    duration_scale: float = 1.0
    stagger: float = DEFAULT_STAGGER  # seconds, times duration_scale
    spread: float = DEFAULT_SPREAD  # seconds, times duration_scale
    orders: tuple[str, ...] = ORDERS
    create_concurrency: int = 50
    cleanup_timeout: float = 60.0
    sample_step: float = 1.0


@dataclass
class PodSpan:
    """A pod as the benchmark saw it, on its own clock: first seen running, first seen finished."""

    job: str
    worker: str
    running: float | None = None
    ended: float | None = None


class SpanWatch:
    """Pod running intervals (local receive times) for the shares over time."""

    def __init__(self) -> None:
        self.pods: dict[str, PodSpan] = {}

    def handler(self, worker: str) -> Any:
        def handle(etype: str, old: Obj | None, new: Obj) -> None:
            md = new.get("metadata") or {}
            labels = md.get("labels") or {}
            job = next((labels[k] for k in pl.JOB_NAME_LABELS if k in labels), None)
            if job is None:
                return
            p = self.pods.setdefault(str(md.get("uid") or md.get("name")), PodSpan(job, worker))
            st = new.get("status") or {}
            now = time.time()
            if p.running is None and (st.get("startTime") or st.get("phase") == "Running"):
                p.running = now
            if p.ended is None and (etype == "DELETED" or st.get("phase") in ("Succeeded", "Failed")):
                p.ended = now

        return handle


class WaitWatch:
    """When each Job's first "waits" event (WaitingForRoom, WaitingForQuota) was seen (local time)."""

    REASONS = frozenset({"WaitingForRoom", "WaitingForQuota"})

    def __init__(self) -> None:
        self.first: dict[str, float] = {}

    def on_event(self, etype: str, old: Obj | None, new: Obj) -> None:
        obj = new.get("involvedObject") or new.get("regarding") or {}
        if etype != "DELETED" and new.get("reason") in self.REASONS and obj.get("kind") == "Job":
            self.first.setdefault(str(obj.get("name")), time.time())


def _slim_pod(pod: Obj) -> Obj:
    out = pl._slim_pod(pod)
    out["status"]["phase"] = (pod.get("status") or {}).get("phase")
    return out


def fleet_capacity(nodes: Mapping[str, Sequence[NodeRoom]]) -> dict[str, float]:
    c: Counter[str] = Counter()
    for rooms in nodes.values():
        for n in rooms:
            c.update({r: v for r, v in n.allocatable.items() if r != POD_SLOTS})
    return {r: float(v) for r, v in c.items()}


async def ensure_priority_classes(client: ClusterClient) -> None:
    for name, value in PRIORITY_CLASSES.items():
        with contextlib.suppress(ApiError):
            await client.create(PRIORITY_CLASS_RESOURCE, None, priority_class_manifest(name, value))


async def staged_submit(mgr: ClusterClient, jobs: Sequence[TenantJob], manifests: Mapping[str, Obj],
                        namespaces: Mapping[str, str], t0: float, concurrency: int) -> Submission:
    """Each group of Jobs (one tenant, one arrival time) is created at t0 + its ``at``; one
    Submission for all (``sent``: when each create was sent)."""
    groups: dict[tuple[str, float], list[Obj]] = {}
    for j in jobs:
        groups.setdefault((j.tenant, j.at), []).append(manifests[j.name])
    total = Submission(started=t0)

    async def one(tenant: str, at: float, ms: list[Obj]) -> None:
        await asyncio.sleep(max(0.0, t0 + at - time.time()))
        sub = await submit(mgr, namespaces[tenant], ms, concurrency)
        total.sent.update(sub.sent)
        total.acked.update(sub.acked)
        total.errors.extend(sub.errors)
        total.retries += sub.retries

    await asyncio.gather(*(one(t, at, ms) for (t, at), ms in sorted(groups.items(), key=lambda kv: kv[0][1])))
    total.finished = time.time()
    return total


def order_figures(jobs: Sequence[TenantJob], seen: pl.Seen, spans: SpanWatch, sub: Submission,
                  nodes: Mapping[str, Sequence[NodeRoom]], t0: float, end: float, bound: float,
                  step: float = 1.0, said_waiting: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Every multi-tenant figure of one order's run, from what it saw."""
    tenant_of = {j.name: j.tenant for j in jobs}
    by_name = {j.name: j for j in jobs}
    created = {n: sub.sent[n] for n in tenant_of if n in sub.sent}
    placed = {n: (seen.jobs[n].placed_seen if n in seen.jobs else None) for n in tenant_of}
    w = waits(created, placed, end)
    window = burst_window(created, placed, tenant_of, end)
    during = waits_during(w, created, tenant_of, SMALL, window)
    small_during = [by_name[n].seconds for n, c in created.items()
                    if tenant_of[n] in SMALL and window and window[0] <= c <= window[1]]
    mean_len = sum(small_during) / len(small_during) if small_during else None
    p99 = stats.percentile(during, 99)
    pod_spans = [Span(tenant_of[p.job], p.running, p.ended, by_name[p.job].amounts())
                 for p in spans.pods.values() if p.running is not None and p.job in by_name]
    waiting = [Span(tenant_of[n], c, placed[n]) for n, c in created.items()]
    samples = shares_over_time(pod_spans, waiting, fleet_capacity(nodes), dict.fromkeys(TENANTS, 1.0), t0, end, step)
    said = said_waiting or {}
    recs = [Placed(j.name, j.priority, created.get(j.name, t0 + j.at), placed[j.name],
                   seen.jobs[j.name].placement if j.name in seen.jobs else None, j.amounts(), j.pods,
                   frozenset(pl.could_run_on(j, nodes)), said.get(j.name)) for j in jobs]
    strict = inversions(recs)
    loose = inversions(recs, strict=False)
    in_line = inversions(recs, seen_waiting=True)
    by_prio = {pc: [w[n] for n in w if tenant_of[n] in SMALL and by_name[n].priority_class == pc
                    and window and window[0] <= created[n] <= window[1]] for pc in PRIORITY_CLASSES}

    def rel(x: float | None) -> float | None:
        return None if x is None else round(x - t0, 3)

    starts = seen.first_start()
    made = {n: seen.jobs[n].created for n in tenant_of if n in seen.jobs}
    to_start = {n: round(starts[n] - c, 1) for n, c in made.items() if n in starts and c is not None}
    completes = [seen.jobs[j.name].complete if j.name in seen.jobs else None for j in jobs]
    # as bench placement: first creationTimestamp → last Complete condition (object stamps, 1 s)
    ms = pl.makespan([seen.jobs[j.name].created if j.name in seen.jobs else None for j in jobs], completes)
    out: dict[str, Any] = {
        "makespanSeconds": ms,
        "makespanOverBound": round(ms / bound, 3) if ms is not None and bound else None,
        "completed": sum(1 for c in completes if c is not None),
        "notPlaced": sum(1 for v in placed.values() if v is None),
        "waitSeconds": wait_summary(w, tenant_of),
        "waitNote": "manager Job create sent → its placement annotation seen (benchmark clock); a Job never "
                    "placed counts until the end of the run",
        "timeToStartSeconds": wait_summary(to_start, tenant_of),
        "timeToStartNote": "manager creationTimestamp → first pod startTime (object timestamps, 1 s)",
        "burstWindowSeconds": [round(window[0] - t0, 1), round(window[1] - t0, 1)] if window else None,
        "smallDuringBurst": {"jobs": len(during), "p50": stats.rounded(stats.percentile(during, 50), 2),
                             "p99": stats.rounded(p99, 2),
                             "meanJobSeconds": round(mean_len, 2) if mean_len else None,
                             "p99OverMeanLength": round(p99 / mean_len, 2) if p99 is not None and mean_len else None,
                             "byPriority": {pc: {"jobs": len(v), "p50": stats.rounded(stats.percentile(v, 50), 2),
                                                 "p99": stats.rounded(stats.percentile(v, 99), 2)}
                                            for pc, v in by_prio.items()}},
        "fairness": fairness(samples),
        "fairnessSamePriority": None,  # filled in below from perJob
        "fairnessNote": "Jain's index of the tenants' dominant shares (DRF over cpu, memory, gpu of their running "
                        "pods ÷ fleet allocatable, weight 1 each), sampled every "
                        f"{step:g} s while every tenant had a Job waiting; fairnessSamePriority: only the seconds "
                        "every tenant had a Job waiting at the highest priority then waiting",
        "priorityInversions": len(strict),
        "priorityInversionsLoose": len(loose),
        "priorityInversionsInLine": len(in_line) if said else None,
        "inversionExamples": strict[:20],
        "inversionInLineExamples": in_line[:20],
        "inversionNote": f"pairs (higher, lower): the lower-priority Job was placed while the higher one, created "
                         f"≥ {INVERSION_GRACE:g} s before, waited, and the higher fit in the room the lower took "
                         "(a worker it can run on, no more pods, no pod asking more of any resource); loose: "
                         "only 'a worker it can run on' (also counts legitimate backfill); in line: strict, and the "
                         "higher's WaitingForRoom/WaitingForQuota event was seen before the lower's placement",
        "sharesOverTime": samples,
        "perJob": [{"name": j.name, "tenant": j.tenant, "kind": j.kind, "priority": j.priority_class,
                    "at": j.at, "seconds": j.seconds, "wait": w.get(j.name),
                    "placement": seen.jobs[j.name].placement if j.name in seen.jobs else None,
                    "timeToStart": to_start.get(j.name), "createdAt": rel(created.get(j.name)),
                    "placedAt": rel(placed[j.name]), "saidWaitingAt": rel(said.get(j.name))} for j in jobs],
    }
    out["fairnessSamePriority"] = fairness_same_priority(samples, out["perJob"])
    return out


async def run_order(order: str, jobs: Sequence[TenantJob], nodes: Mapping[str, Sequence[NodeRoom]],
                    bound: float, opts: MultiTenantOptions, bed: ClusterBed,
                    clusters: dict[str, LocalCluster]) -> dict[str, Any]:
    """One order: fresh namespaces and controller, staged arrivals, until every Job is Complete or
    the timeout; then the figures and a cleanup."""
    from bench.machine import git_info
    from bench.mirror_bench import _client_side

    namespaces = namespaces_for(order)
    workers = list(pl.WORKER_SHAPES)
    timeout = opts.timeout or pl.default_timeout(bound)
    run_id = uuid.uuid4().hex[:8]
    res: dict[str, Any] = {"order": order, "namespaces": namespaces, "timeoutSeconds": timeout, "runId": run_id,
                           "loadAverage": {"start": load()}, "git": git_info()}
    opened: list[ClusterClient] = []
    try:
        for name in ("manager", *workers):
            opened.append(await env.client_for(clusters[name]))
            await ensure_priority_classes(opened[-1])
            for ns in namespaces.values():
                await ensure_namespace(opened[-1], ns)
    except BaseException:
        for c in opened:
            await c.close()
        raise
    mgr, wcl = opened[0], dict(zip(workers, opened[1:], strict=True))
    seen, spans, said = pl.Seen(), SpanWatch(), WaitWatch()
    informers = []
    for ns in namespaces.values():
        inf = Informer(mgr, JOBS, namespace=ns)
        inf.add_handler(seen.on_job)
        informers.append(inf)
        einf = Informer(mgr, EVENTS, namespace=ns)
        einf.add_handler(said.on_event)
        informers.append(einf)
        for w, c in wcl.items():
            pinf = Informer(c, PODS, namespace=ns, transform=_slim_pod)
            pinf.add_handler(seen.pod_handler(w))
            pinf.add_handler(spans.handler(w))
            informers.append(pinf)
    tasks = [asyncio.create_task(i.run()) for i in informers]
    manifests = {j.name: tenant_manifest(j, run_id) for j in jobs}
    ctrl: env.ControllerProcess | None = None
    try:
        await asyncio.gather(*(i.wait_synced(30) for i in informers))
        t = time.time()
        extra = {"scheduling": scheduling_config(order, namespaces)}
        ctrl = await pl._start_controller(bed, clusters, workers, "RoomAware", list(namespaces.values()),
                                          opts.out / "logs", f"multitenant-{order.lower()}", extra=extra)
        if not await pl._room_synced(ctrl, pl.room_expectation(nodes, workers), 60):
            raise RuntimeError(f"{order}: room views not synced in 60 s:\n{ctrl.log_tail()}")
        res["controllerStartupSeconds"] = round(time.time() - t, 1)
        ctrl_before = await ctrl.metrics()
        t0 = time.time()

        def progress() -> str:
            placed = Counter(j.tenant for j in jobs if j.name in seen.jobs and seen.jobs[j.name].placement)
            done = sum(1 for j in seen.jobs.values() if j.complete is not None)
            return (f"{order} t={time.time() - t0:5.1f}s created {len(seen.jobs)}/{len(jobs)} · placed "
                    f"{', '.join(f'{t} {placed[t]}' for t in TENANTS)} · Complete {done} · load {load()[0]}")

        stop_reason = "timeout"
        with env.Progress(progress, 5.0):
            submitting = asyncio.create_task(staged_submit(mgr, jobs, manifests, namespaces, t0,
                                                           opts.create_concurrency))
            while time.time() - t0 < timeout:
                if submitting.done() and submitting.result().errors:
                    raise RuntimeError(f"Jobs not created, e.g. {submitting.result().errors[0]}")
                if submitting.done() and len(seen.jobs) >= len(jobs) and not seen.unfinished():
                    stop_reason = "all finished"
                    break
                if not ctrl.alive():
                    raise RuntimeError(f"{order}: controller exited:\n{ctrl.log_tail()}")
                await asyncio.sleep(0.5)
            t_end = time.time()
            sub = await submitting
            env.say(f"{order}: run over after {t_end - t0:.1f}s ({stop_reason})")
            if stop_reason == "all finished":
                await env.wait_until(lambda: all(j.released for j in seen.jobs.values()), 30, 0.2)
        await asyncio.sleep(1.0)
        ctrl_after = await ctrl.metrics()
        res.update(order_figures(jobs, seen, spans, sub, nodes, t0, t_end, bound, opts.sample_step, said.first))
        res["stopReason"] = stop_reason
        res["finished"] = stop_reason == "all finished"
        res["runSeconds"] = round(t_end - t0, 1)
        client = _client_side(ctrl_before, ctrl_after, len(jobs))
        res["apiRequests"] = client
        res["managerCallsPerJob"] = (client or {}).get("manager", {}).get("perJob")
        res.update(controller_counts(ctrl_before, ctrl_after, len(jobs)))
        res["loadAverage"]["end"] = load()
    finally:
        for ns in namespaces.values():
            with contextlib.suppress(Exception):
                res.setdefault("cleanup", {})[ns] = await pl._cleanup(order, mgr, wcl, ns, ctrl, opts.cleanup_timeout)
        if ctrl is not None:
            res["controllerExitCode"] = await ctrl.stop()
            res["controllerLog"] = ctrl.log_summary()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in opened:
            await c.close()
    return res


async def run(opts: MultiTenantOptions) -> dict[str, Any]:
    from bench.machine import git_info, machine_info, now_iso

    unknown = [o for o in opts.orders if o not in ORDERS]
    if unknown:
        raise ValueError(f"unknown orders {unknown}; known: {', '.join(ORDERS)}")
    jobs = plan_tenants(opts.jobs, opts.seed, opts.duration_scale, opts.stagger * opts.duration_scale,
                        opts.spread * opts.duration_scale)
    env.say(f"placement --multitenant: {len(jobs)} Jobs ({tenant_sizes(opts.jobs)}), seed {opts.seed}")
    result: dict[str, Any] = {
        "benchmark": BENCHMARK, "date": now_iso(), "machine": machine_info(), "git": git_info(),
        "loadAverage": {"start": load()}, "seed": opts.seed,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()},
        "bed": {"manager": "kube-apiserver + kcm, no nodes",
                "workers": {w: {"nodes": s.count, "perNode": s.resources()} for w, s in pl.WORKER_SHAPES.items()}},
        "workload": workload_summary(jobs), "orders": {}, "order": list(opts.orders),
    }
    phases: dict[str, float] = {}
    result["phaseSeconds"] = phases
    bed = ClusterBed(scratch_dir("jobmirror-multitenant-"))
    try:
        clusters, nodes = await pl.unequal_bed(bed, result, phases)
        bound = lower_bound(jobs, nodes)
        result["lowerBound"] = bound
        env.say(f"lower bound {bound['seconds']} s ({bound['binding']})")
        for order in opts.orders:
            env.say(f"=== placement --multitenant: scheduling.order {order}, {len(jobs)} Jobs ===")
            t = time.monotonic()
            try:
                r = await run_order(order, jobs, nodes, bound["seconds"], opts, bed, clusters)
            except Exception as exc:  # keep the other order's results
                env.say(f"{order} FAILED: {type(exc).__name__}: {exc}")
                r = {"order": order, "error": f"{type(exc).__name__}: {exc}"[:4000]}
            result["orders"][order] = r
            phases[order] = round(time.monotonic() - t, 1)
            env.say(summary_line(r))
    finally:
        t = time.monotonic()
        bed.down()
        phases["tearDown"] = round(time.monotonic() - t, 1)
    result["loadAverage"]["end"] = load()
    base = (result["orders"].get("Arrival") or {}).get("managerCallsPerJob")
    for r in result["orders"].values():
        if "error" not in r:
            r["targets"] = targets(r, base)
    return result


# -- reporting ----------------------------------------------------------------------------------------


def _f(x: Any, digits: int = 1) -> str:
    return pl._f(x, digits)


def summary_line(r: Mapping[str, Any]) -> str:
    if "error" in r:
        return f"{r['order']}: failed: {r['error'][:300]}"
    s = r["smallDuringBurst"]
    return (f"{r['order']}: makespan {r['makespanSeconds']} s ({r['makespanOverBound']}x bound), "
            f"{r['completed']} Complete, small p99 wait in burst {_f(s['p99'], 2)}, Jain {r['fairness']['mean']}, "
            f"inversions {r['priorityInversions']}, manager calls/Job {r['managerCallsPerJob']}")


def _verdict(met: bool | None) -> str:
    return "-" if met is None else "met" if met else "NOT met"


def markdown_table(result: Mapping[str, Any]) -> str:
    """One row per order: the issue's figures side by side (waits: create → placed, seconds)."""
    lb = result.get("lowerBound") or {}
    head = ["order", "makespan s (÷ bound)", "Complete"] + [f"{t} wait p50 / p99" for t in TENANTS] + [
        "small p99 wait in burst (÷ Job length)", "Jain (min), s", "Jain same priority, s",
        "inversions (in line; loose)", "manager calls/Job", "passes/Job", "backfills"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    n = result["workload"]["jobs"]
    for order, r in result["orders"].items():
        if "error" in r:
            lines.append(f"| {order} | failed: {r['error'][:80]} |" + " |" * (len(head) - 2))
            continue
        ms = (f"{_f(r['makespanSeconds'])} ({_f(r['makespanOverBound'], 2)}x)" if r["makespanSeconds"] is not None
              else f"did not finish in {_f(r['runSeconds'])}")
        wt = [f"{_f(r['waitSeconds'].get(t, {}).get('p50'))} / {_f(r['waitSeconds'].get(t, {}).get('p99'))}"
              for t in TENANTS]
        s, fa, sp = r["smallDuringBurst"], r["fairness"], r.get("fairnessSamePriority") or {}
        lines.append("| " + " | ".join([
            order, ms, f"{r['completed']}/{n}", *wt,
            f"{_f(s['p99'])}" + (f" ({_f(s['p99OverMeanLength'], 1)}x)" if s["p99OverMeanLength"] is not None else ""),
            f"{_f(fa['mean'], 2)} ({_f(fa['min'], 2)}), {fa['samples']}",
            f"{_f(sp.get('mean'), 2)}, {sp.get('samples', '-')}",
            f"{r['priorityInversions']} ({_f(r.get('priorityInversionsInLine'))}; {r['priorityInversionsLoose']})",
            _f(r["managerCallsPerJob"], 2), _f(r.get("passesPerJob"), 2), _f(r.get("backfills"))]) + " |")
    lines.append(f"\nlower bound {_f(lb.get('seconds'))} s ({lb.get('binding')}); waits: create sent → placed (s); "
                 "Jain: mean (min) over the seconds every tenant had work waiting, and how many seconds")
    for order, r in result["orders"].items():
        if r.get("targets"):
            lines.append(f"{order}, issue 35 targets: " + "; ".join(
                f"{k} {_f(t['value'], 2)} {t['target']}: {_verdict(t['met'])}" for k, t in r["targets"].items()))
    return "\n".join(lines)
