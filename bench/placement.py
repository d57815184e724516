"""``bench placement``: the placement policies side by side on one unequal bed (issue 21 item 7).

One bed — a manager without nodes and two UNEQUAL kwok workers (worker-1: 2 large nodes, the
only ones with ``example.com/gpu``; worker-2: 8 small ones) — and one seeded mix of Jobs, all
created at t0, run once per policy (``RoomAware``, ``LeastLoaded``), each in a fresh namespace
with a fresh controller process. Beside them the lower bound, computed, not run.

Figures come from the API servers' own timestamps (second granularity): manager Job
``creationTimestamp`` and ``Complete`` time, worker pods' ``creationTimestamp``, ``PodScheduled``
transition and ``startTime``. Whether a Job was sent where it could never run is judged with
the controller's own pure fit (``mirror.room.fit``) against the nodes as read back from the
workers. A policy that sends Jobs where they can never run would never finish: its run stops
as soon as every unfinished Job sits on such a worker (LeastLoaded never moves a copy), or at
the timeout.

The memory part fills two node-less workers with N non-terminal pods each and reads the RSS of
a RoomAware controller (whose room views cache them) and of a LeastLoaded one (which does not).

The figures are pure functions (``lower_bound``, ``stuck``, ``pending_seconds``, ``never_fit``,
``makespan``) so they are tested without a bed; everything after ``# -- running`` is glue.
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

import yaml

from bench import env, kubetime, promtext, stats
from bench.machine import load
from bench.workload import Submission, job_manifest, submit
from clusterbed.cluster import ClusterBed, ClusterSpec, LocalCluster, scratch_dir
from kruntime.client import ApiError, ClusterClient
from kruntime.informer import Informer
from kruntime.resources import JOBS, NODES, PODS, Obj, Resource
from mirror.jobs.kind import pods_wanted
from mirror.naming import ANNOTATION_CLUSTER, DEFAULT_CONTROLLER_NAME, FINALIZER
from mirror.room.fit import NodeRoom, node_room, worker_fit
from mirror.room.quantity import amounts
from mirror.room.requests import PODS as POD_SLOTS
from mirror.room.requests import shape_of_template
from testkit.waiting import ensure_namespace

POLICIES = ("RoomAware", "LeastLoaded")
#: policies that move a copy stuck before it started (README: only RoomAware): a run of another
#: policy whose unfinished Jobs all sit where they can never run is over
MOVES_STUCK_COPIES = frozenset({"RoomAware"})
GPU = "example.com/gpu"
ORIGIN = "bench-placement"
MEMORY_NAMESPACE = "placement-memory"
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
DEFAULT_SEED = 21
STUCK_AFTER = 60.0

# -- the bed ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeShape:
    """``count`` identical kwok nodes of one worker."""

    count: int
    cpu: str
    memory: str
    pods: int = 110
    extended: tuple[tuple[str, str], ...] = ()

    def resources(self) -> dict[str, str]:
        return {"cpu": self.cpu, "memory": self.memory, "pods": str(self.pods), **dict(self.extended)}


#: unequal on purpose: large Jobs and gpu Jobs fit only worker-1
WORKER_SHAPES: dict[str, NodeShape] = {
    "worker-1": NodeShape(2, "16", "64Gi", extended=((GPU, "4"),)),
    "worker-2": NodeShape(8, "4", "16Gi"),
}


def node_names(worker: str, shape: NodeShape) -> list[str]:
    return [f"{worker}-node-{i}" for i in range(shape.count)]


def node_manifest(name: str, shape: NodeShape, *, kwok: bool = True) -> Obj:
    """A Node of ``shape``. ``kwok``: as ``kwokctl scale node`` makes them (its annotation and labels;
    kwokctl runs kwok with ``--manage-all-nodes``, so kwok keeps it Ready and runs its pods, and
    keeps the allocatable written here); else a plain object whose Ready condition is written once
    (nothing updates it)."""
    res = shape.resources()
    md: Obj = {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                        "kubernetes.io/arch": "amd64", "type": "kwok" if kwok else "static"}}
    if kwok:
        md["annotations"] = {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}
    status: Obj = {"allocatable": res, "capacity": res, "phase": "Running"}
    if not kwok:
        status["conditions"] = [{"type": "Ready", "status": "True", "reason": "Static",
                                 "lastHeartbeatTime": None, "lastTransitionTime": None}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": md, "spec": {}, "status": status}


# -- the workload -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobKind:
    name: str
    share: float  # of the Jobs
    requests: tuple[tuple[str, str], ...]
    pods: tuple[int, int]  # parallelism = completions, uniform in this range
    seconds: tuple[float, float]  # pod run time, uniform in this range


KINDS = (
    JobKind("small", 0.60, (("cpu", "1"), ("memory", "2Gi")), (1, 1), (2.0, 6.0)),
    JobKind("medium", 0.25, (("cpu", "3"), ("memory", "6Gi")), (2, 4), (3.0, 8.0)),
    JobKind("large", 0.10, (("cpu", "12"), ("memory", "24Gi")), (1, 1), (4.0, 10.0)),
    JobKind("gpu", 0.05, (("cpu", "2"), ("memory", "8Gi"), (GPU, "1")), (1, 1), (4.0, 10.0)),
)


@dataclass(frozen=True)
class PlannedJob:
    name: str
    kind: str
    pods: int
    requests: tuple[tuple[str, str], ...]
    seconds: float

    def amounts(self) -> dict[str, int]:
        return amounts(dict(self.requests))


def kind_counts(n: int) -> dict[str, int]:
    """How many Jobs of each kind: every kind at least once (so a toy run still has a large and a
    gpu Job), the first kind takes the rest."""
    if n < len(KINDS):
        raise ValueError(f"--jobs must be at least {len(KINDS)} (one of each kind)")
    counts = {k.name: max(1, round(k.share * n)) for k in KINDS[1:]}
    counts[KINDS[0].name] = n - sum(counts.values())
    return {k.name: counts[k.name] for k in KINDS}


def plan(n: int, seed: int, duration_scale: float = 1.0) -> list[PlannedJob]:
    """The seeded Job mix, kinds shuffled together; the same list for every policy."""
    rng = random.Random(seed)
    by_name = {k.name: k for k in KINDS}
    kinds = [name for name, c in kind_counts(n).items() for _ in range(c)]
    rng.shuffle(kinds)
    out = []
    for i, name in enumerate(kinds):
        k = by_name[name]
        pods = rng.randint(*k.pods)
        secs = round(rng.uniform(*k.seconds) * duration_scale, 1)
        out.append(PlannedJob(f"job-{i:05d}", name, pods, k.requests, max(0.1, secs)))
    return out


def manifest(job: PlannedJob, run_id: str) -> Obj:
    """The manager Job: ``managedBy`` jobmirror, its pods run ``seconds`` on kwok. Extended
    resources must be limited as much as they are requested (API validation)."""
    m = job_manifest(job.name, run_id, completions=job.pods, parallelism=job.pods, managed_by=DEFAULT_CONTROLLER_NAME,
                     pod_duration=f"{round(job.seconds * 1000)}ms", requests=dict(job.requests))
    m["metadata"].setdefault("annotations", {})["jobmirror.dev/bench-kind"] = job.kind
    container = m["spec"]["template"]["spec"]["containers"][0]
    extended = {r: q for r, q in job.requests if "/" in r}
    if extended:
        container["resources"]["limits"] = extended
    return m


def workload_summary(jobs: Sequence[PlannedJob]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in KINDS:
        js = [j for j in jobs if j.kind == k.name]
        secs = [j.seconds for j in js]
        out[k.name] = {"jobs": len(js), "pods": sum(j.pods for j in js), "requestsPerPod": dict(k.requests),
                       "podsPerJob": list(k.pods),
                       "podSeconds": {"min": min(secs, default=None), "max": max(secs, default=None),
                                      "mean": round(sum(secs) / len(secs), 2) if secs else None}}
    return {"jobs": len(jobs), "pods": sum(j.pods for j in jobs), "byKind": out}


# -- the figures (pure) -----------------------------------------------------------------------------


def could_run_on(job: PlannedJob, nodes: Mapping[str, Sequence[NodeRoom]]) -> list[str]:
    """The workers where some node could hold one of ``job``'s pods if it were empty."""
    shape = shape_of_template(manifest(job, "")["spec"]["template"])
    return sorted(w for w, rooms in nodes.items() if worker_fit(shape, rooms, 1).ever)


def lower_bound(jobs: Sequence[PlannedJob], nodes: Mapping[str, Sequence[NodeRoom]]) -> dict[str, Any]:
    """No schedule can finish sooner than this (seconds from the first create).

    Per resource r: requested r-seconds over all pods ÷ the r all nodes have. The same over the
    Jobs that can only run on some workers ÷ those workers' capacity (large and gpu Jobs on
    worker-1 alone), and the longest single pod. ``seconds`` is the largest of them; ``cpu`` is
    the plain total cpu-seconds ÷ total cpu. Jobs no worker could ever run are left out, counted.
    """
    def capacity(workers: Iterable[str]) -> Counter[str]:
        c: Counter[str] = Counter()
        for w in workers:
            for n in nodes[w]:
                c.update({r: v for r, v in n.allocatable.items() if r != POD_SLOTS})
        return c

    def work(js: Iterable[PlannedJob]) -> Counter[str]:
        c: Counter[str] = Counter()
        for j in js:
            c.update({r: v * j.pods * j.seconds for r, v in j.amounts().items()})
        return c

    could = {j.name: tuple(could_run_on(j, nodes)) for j in jobs}
    runnable = [j for j in jobs if could[j.name]]
    total_cap = capacity(nodes)
    total_work = work(runnable)
    by_resource = {r: round(v / total_cap[r], 2) if total_cap[r] else None for r, v in sorted(total_work.items())}
    restricted: dict[str, dict[str, float]] = {}
    for subset in sorted({c for c in could.values() if c and len(c) < len(nodes)}):
        cap = capacity(subset)
        w = work(j for j in runnable if set(could[j.name]) <= set(subset))
        restricted["+".join(subset)] = {r: round(v / cap[r], 2) for r, v in sorted(w.items()) if cap[r]}
    longest = max((j.seconds for j in runnable), default=0.0)
    candidates: dict[str, float] = {f"total {r}": v for r, v in by_resource.items() if v is not None}
    candidates.update({f"{s} only, {r}": v for s, rs in restricted.items() for r, v in rs.items()})
    candidates["longest pod"] = longest
    binding = max(candidates, key=lambda k: candidates[k]) if candidates else None
    return {
        "seconds": candidates[binding] if binding else 0.0,
        "binding": binding,
        "cpu": by_resource.get("cpu"),
        "byResource": by_resource,
        "restricted": restricted,
        "longestPodSeconds": longest,
        "jobsNoWorkerCouldRun": len(jobs) - len(runnable),
        "note": "requested resource-seconds ÷ capacity, per resource, over all workers and over the workers "
                "the Jobs that fit only some of them can run on; the largest is the bound (no queueing, "
                "packing or API latency)",
    }


def never_fit(placements: Mapping[str, str | None], shapes: Mapping[str, tuple[Obj, int]],
              nodes: Mapping[str, Sequence[NodeRoom]]) -> list[str]:
    """The Jobs whose final placement is a worker where none of their pods could ever run.

    ``shapes``: Job name → (its pod template, pods wanted at once); ``nodes``: the workers'
    static node shapes. A Job not placed, or placed on a worker not in ``nodes``, is not judged.
    """
    out = []
    for name, worker in sorted(placements.items()):
        if worker is None or worker not in nodes or name not in shapes:
            continue
        template, want = shapes[name]
        if not worker_fit(shape_of_template(template), nodes[worker], want).ever:
            out.append(name)
    return out


def stuck(created: float | None, first_start: float | None, after: float = STUCK_AFTER) -> bool:
    """No pod of the Job running ``after`` seconds after the manager Job was created (or never)."""
    if first_start is None or created is None:
        return True
    return first_start - created > after


@dataclass
class PodTimes:
    """One worker pod, POSIX seconds from its object (``deleted``: local receive time)."""

    job: str
    worker: str
    created: float | None = None
    scheduled: float | None = None
    started: float | None = None
    deleted: float | None = None


def pending_seconds(pods: Iterable[PodTimes], end: float) -> float:
    """Sum over pods of created → scheduled; a pod never scheduled counts until ``end`` (or
    until it was deleted, if earlier)."""
    total = 0.0
    for p in pods:
        if p.created is None:
            continue
        until = p.scheduled if p.scheduled is not None else min(end, p.deleted if p.deleted is not None else end)
        total += max(0.0, until - p.created)
    return round(total, 1)


def makespan(created: Iterable[float | None], complete: Sequence[float | None]) -> float | None:
    """First manager Job created → last one Complete; ``None`` while any is not Complete."""
    starts = [c for c in created if c is not None]
    if not starts or not complete or any(c is None for c in complete):
        return None
    return round(max(c for c in complete if c is not None) - min(starts), 1)


def run_is_over(unfinished: Iterable[str], never: Iterable[str], policy: str) -> bool:
    """A run of a policy that never moves copies is over once every unfinished Job sits on a
    worker where it can never run (nothing left can change)."""
    left = set(unfinished)
    return bool(left) and policy not in MOVES_STUCK_COPIES and left <= set(never)


def bytes_per_pod(rss_with_kib: int | None, rss_without_kib: int | None, pods: int) -> float | None:
    if rss_with_kib is None or rss_without_kib is None or pods <= 0:
        return None
    return round((rss_with_kib - rss_without_kib) * 1024 / pods, 1)


def default_timeout(bound: float) -> float:
    return round(3 * bound + 120, 0)


# -- what a run saw ---------------------------------------------------------------------------------


@dataclass
class JobSeen:
    created: float | None = None
    placement: str | None = None
    placed_seen: float | None = None  # local receive time of the placement annotation
    complete: float | None = None  # Complete condition lastTransitionTime
    failed: bool = False
    released: bool = False  # our finalizer gone after the Job finished


@dataclass
class Seen:
    """Manager Jobs and worker pods of one policy's namespace, from watches."""

    jobs: dict[str, JobSeen] = field(default_factory=dict)
    pods: dict[str, PodTimes] = field(default_factory=dict)

    def on_job(self, etype: str, old: Obj | None, new: Obj) -> None:
        if etype == "DELETED":
            return
        j = self.jobs.setdefault(new["metadata"]["name"], JobSeen())
        md = new["metadata"]
        j.created = j.created or kubetime.creation_time(new)
        j.placement = (md.get("annotations") or {}).get(ANNOTATION_CLUSTER) or j.placement
        if j.placement and j.placed_seen is None:
            j.placed_seen = time.time()
        c = kubetime.condition(new, "Complete")
        if c is not None and c.get("status") == "True" and j.complete is None:
            j.complete = kubetime.parse_time(c.get("lastTransitionTime"))
        j.failed = j.failed or kubetime.condition_true(new, "Failed")
        j.released = (j.complete is not None or j.failed) and FINALIZER not in (md.get("finalizers") or [])

    def pod_handler(self, worker: str) -> Any:
        def handle(etype: str, old: Obj | None, new: Obj) -> None:
            md = new.get("metadata") or {}
            uid = md.get("uid") or md.get("name")
            labels = md.get("labels") or {}
            job = next((labels[k] for k in JOB_NAME_LABELS if k in labels), None)
            if job is None:
                return
            p = self.pods.setdefault(str(uid), PodTimes(job, worker, kubetime.creation_time(new)))
            if etype == "DELETED":
                p.deleted = p.deleted or time.time()
            sched = kubetime.condition(new, "PodScheduled")
            if sched is not None and sched.get("status") == "True" and p.scheduled is None:
                p.scheduled = kubetime.parse_time(sched.get("lastTransitionTime"))
            start = kubetime.parse_time((new.get("status") or {}).get("startTime"))
            if start is not None and p.started is None:
                p.started = start
                p.scheduled = p.scheduled or start

        return handle

    def first_start(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for p in self.pods.values():
            if p.started is not None and (p.job not in out or p.started < out[p.job]):
                out[p.job] = p.started
        return out

    def unfinished(self) -> list[str]:
        return [n for n, j in self.jobs.items() if j.complete is None and not j.failed]


def figures(jobs: Sequence[PlannedJob], seen: Seen, never: list[str], t0: float, end: float,
            stuck_after: float = STUCK_AFTER) -> dict[str, Any]:
    """The per-policy figures from what one run saw (pure over ``seen``)."""
    starts = seen.first_start()
    rows: list[dict[str, Any]] = []
    for j in jobs:
        s = seen.jobs.get(j.name, JobSeen())
        first = starts.get(j.name)
        rows.append({"name": j.name, "kind": j.kind, "pods": j.pods, "seconds": j.seconds, "placement": s.placement,
                     "timeToStart": None if first is None or s.created is None else round(first - s.created, 1),
                     "completeAfter": None if s.complete is None or s.created is None else round(
                         s.complete - s.created, 1),
                     "stuck": stuck(s.created, first, stuck_after), "neverFit": j.name in never})
    created = [seen.jobs[j.name].created if j.name in seen.jobs else None for j in jobs]
    completes = [seen.jobs[j.name].complete if j.name in seen.jobs else None for j in jobs]
    done = [c for c in completes if c is not None]
    first_created = min((c for c in created if c is not None), default=t0)
    placement: Counter[str] = Counter(r["placement"] or "none" for r in rows)
    by_kind: dict[str, dict[str, int]] = {}
    for r in rows:
        by_kind.setdefault(r["kind"], {}).setdefault(r["placement"] or "none", 0)
        by_kind[r["kind"]][r["placement"] or "none"] += 1
    pods = list(seen.pods.values())
    tts = [r["timeToStart"] for r in rows]
    return {
        "jobs": len(jobs),
        "completed": len(done),
        "failed": sum(1 for j in seen.jobs.values() if j.failed),
        "makespanSeconds": makespan(created, completes),
        "lastCompleteSeconds": round(max(done) - first_created, 1) if done else None,
        "stuckOver60s": sum(1 for r in rows if r["stuck"]),
        "stuckAfterSeconds": stuck_after,
        "pendingPodSeconds": pending_seconds(pods, end),
        "pods": {"created": len(pods), "scheduled": sum(1 for p in pods if p.scheduled is not None),
                 "neverScheduled": sum(1 for p in pods if p.scheduled is None)},
        "neverFit": len(never),
        "neverFitJobs": never[:50],
        "placement": dict(sorted(placement.items())),
        "placementByKind": by_kind,
        "timeToStartSeconds": stats.summarize(tts, digits=1),
        "completeSeconds": sorted(round(c - first_created, 1) for c in done),
        "placedSeconds": sorted(round(j.placed_seen - first_created, 1) for j in seen.jobs.values()
                                if j.placed_seen is not None),
        "perJob": rows,
    }


# -- running ------------------------------------------------------------------------------------------


@dataclass
class PlacementOptions:
    out: Path
    jobs: int = 300
    seed: int = DEFAULT_SEED
    memory_pods: int = 20000
    memory_workers: int = 2
    timeout: float | None = None  # per policy; None = 3 x lower bound + 120 s
    duration_scale: float = 1.0
    policies: tuple[str, ...] = POLICIES
    create_concurrency: int = 50
    cleanup_timeout: float = 60.0
    memory_settle: float = 5.0


def _slim_pod(pod: Obj) -> Obj:
    md, st = pod.get("metadata") or {}, pod.get("status") or {}
    return {"metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "labels",
                                           "creationTimestamp") if k in md},
            "status": {"startTime": st.get("startTime"),
                       "conditions": [c for c in st.get("conditions") or [] if c.get("type") == "PodScheduled"]}}


async def _shape_nodes(client: ClusterClient, worker: str, shape: NodeShape, timeout: float = 90) -> list[Obj]:
    """Give ``worker`` exactly ``shape``'s nodes: ours created (kwok-managed), kwokctl's default
    ones deleted; returns once every node is Ready with the allocatable we wrote (kwok's node
    stages fill in conditions but keep a status they are given) and it stays so for 2 s."""
    ours = node_names(worker, shape)
    for name in ours:
        with contextlib.suppress(ApiError):
            await client.create(NODES, None, node_manifest(name, shape))
    for n in (await client.list(NODES)).get("items") or []:
        if n["metadata"]["name"] not in ours:
            await client.delete(NODES, None, n["metadata"]["name"])
    want = amounts(shape.resources())
    deadline = time.monotonic() + timeout
    stable_since: float | None = None
    items: list[Obj] = []
    while True:
        items = (await client.list(NODES)).get("items") or []
        rooms = [node_room(n) for n in items]
        ok = (sorted(r.name for r in rooms) == sorted(ours)
              and all(r.ready and dict(r.allocatable) == want for r in rooms))
        if ok:
            stable_since = stable_since or time.monotonic()
            if time.monotonic() - stable_since >= 2:
                return items
        else:
            stable_since = None
        if time.monotonic() > deadline:
            raise RuntimeError(f"{worker}: nodes not as shaped after {timeout:.0f}s: "
                               + "; ".join(f"{r.name} ready={r.ready} allocatable={dict(r.allocatable)}"
                                           for r in rooms))
        await asyncio.sleep(0.5)


def _config(bed: ClusterBed, clusters: dict[str, LocalCluster], workers: Sequence[str], policy: str,
            namespace: str | Sequence[str], port: int, tag: str, extra: Mapping[str, Any] | None = None) -> Path:
    """The controller's config file; ``extra``: more top-level keys (the multi-tenant run's
    ``scheduling:``)."""
    cfg: dict[str, Any] = {
        "controllerName": DEFAULT_CONTROLLER_NAME, "origin": ORIGIN,
        "managerKubeconfig": str(clusters["manager"].kubeconfig),
        "workers": [{"name": w, "kubeconfig": str(clusters[w].kubeconfig)} for w in workers],
        "metricsAddress": f"127.0.0.1:{port}", "placement": policy,
        "namespaces": [namespace] if isinstance(namespace, str) else list(namespace),
        # Workers count as up after their second probe: 1 s apart instead of 5 s shortens each
        # start (4 per run) and changes nothing the placement figures measure.
        "healthProbeInterval": 1.0,
        **(extra or {}),
    }
    path = bed.workdir / f"placement-{tag}-{policy}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


async def _start_controller(bed: ClusterBed, clusters: dict[str, LocalCluster], workers: Sequence[str], policy: str,
                            namespace: str | Sequence[str], logs: Path, tag: str, *, workers_up: bool = True,
                            extra: Mapping[str, Any] | None = None) -> env.ControllerProcess:
    """Start a controller of ``policy`` and return once ready (``workers_up``: and every worker
    healthy, which takes its second health probe, ~1 s here: Jobs sent earlier would find none)."""
    from bench.mirror_bench import _worker_up, controller_argv

    port = env.free_port()
    cfg = _config(bed, clusters, workers, policy, namespace, port, tag, extra)
    p = env.ControllerProcess(f"{tag}-{policy}", controller_argv(cfg, None), logs / f"placement-{tag}-{policy}.log",
                              port)
    p.start()
    try:
        await p.wait_ready()
        if workers_up and not await _worker_up(p, tuple(workers)):
            raise RuntimeError(f"{policy}: controller never saw every worker healthy:\n{p.log_tail()}")
    except BaseException:
        await p.stop()
        raise
    return p


def room_expectation(nodes: Mapping[str, Sequence[NodeRoom]],
                     workers: Sequence[str]) -> dict[str, tuple[str, str, float]]:
    """What a RoomAware controller's allocatable gauge reads once its room views hold every node."""
    return {w: ("jobmirror_worker_allocatable", "cpu", float(sum(n.allocatable.get("cpu", 0) for n in nodes[w])))
            for w in workers}


async def _room_synced(p: env.ControllerProcess, expect: Mapping[str, tuple[str, str, float]],
                       timeout: float) -> bool:
    """Until each worker's room gauge ``(metric, resource, value)`` reads the value (a RoomAware
    controller exports them from its views, every second until synced, then every 10 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = await p.metrics()
        if m is not None and all(promtext.total(m, metric, {"worker": w, "resource": r}) == v
                                 for w, (metric, r, v) in expect.items()):
            return True
        await asyncio.sleep(0.5)
    return False


async def _delete_jobs(client: ClusterClient, namespace: str) -> None:
    with contextlib.suppress(ApiError):
        await client.request("DELETE", JOBS.path(namespace), body={
            "kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})


async def _count(client: ClusterClient, res: Resource, namespace: str) -> int:
    try:
        return len((await client.list(res, namespace)).get("items") or [])
    except ApiError:
        return -1


async def _cleanup(policy: str, mgr: ClusterClient, wcl: Mapping[str, ClusterClient], namespace: str,
                   ctrl: env.ControllerProcess | None, timeout: float) -> dict[str, Any]:
    """Delete the run's manager Jobs while its controller still runs (it deletes the copies and
    releases its finalizer); what is left after ``timeout`` is removed by force."""
    t = time.monotonic()
    await _delete_jobs(mgr, namespace)

    async def left() -> dict[str, int]:
        return {"manager": await _count(mgr, JOBS, namespace),
                **{w: await _count(c, PODS, namespace) for w, c in wcl.items()}}

    remaining = await left()
    while ctrl is not None and ctrl.alive() and any(remaining.values()) and time.monotonic() - t < timeout:
        await asyncio.sleep(1)
        remaining = await left()
    out: dict[str, Any] = {"seconds": round(time.monotonic() - t, 1), "leftAfterController": remaining}
    if any(remaining.values()):
        env.say(f"{policy}: cleanup left {remaining}; removing by force")
        for job in (await mgr.list(JOBS, namespace)).get("items") or []:
            with contextlib.suppress(ApiError):
                await mgr.patch(JOBS, namespace, job["metadata"]["name"], {"metadata": {"finalizers": None}})
        for c in wcl.values():
            await _delete_jobs(c, namespace)
    return out


async def run_policy(policy: str, jobs: Sequence[PlannedJob], nodes: Mapping[str, Sequence[NodeRoom]],
                     bound: float, opts: PlacementOptions, bed: ClusterBed,
                     clusters: dict[str, LocalCluster]) -> dict[str, Any]:
    """One policy: fresh namespace and controller, every Job at t0, until done, stuck for good or
    the timeout; then the figures and a cleanup."""
    from bench.machine import git_info
    from bench.mirror_bench import _client_side

    namespace = f"placement-{policy.lower()}"
    workers = list(WORKER_SHAPES)
    timeout = opts.timeout or default_timeout(bound)
    run_id = uuid.uuid4().hex[:8]
    res: dict[str, Any] = {"policy": policy, "namespace": namespace, "timeoutSeconds": timeout, "runId": run_id,
                           "loadAverage": {"start": load()}, "git": git_info()}
    opened: list[ClusterClient] = []
    try:
        for name in ("manager", *workers):
            opened.append(await env.client_for(clusters[name]))
            await ensure_namespace(opened[-1], namespace)
    except BaseException:  # interrupted here: close what was opened (the finally below is not reached)
        for c in opened:
            await c.close()
        raise
    mgr, wcl = opened[0], dict(zip(workers, opened[1:], strict=True))
    seen = Seen()
    informers = [Informer(mgr, JOBS, namespace=namespace)]
    informers[0].add_handler(seen.on_job)
    for w, c in wcl.items():
        inf = Informer(c, PODS, namespace=namespace, transform=_slim_pod)
        inf.add_handler(seen.pod_handler(w))
        informers.append(inf)
    tasks = [asyncio.create_task(i.run()) for i in informers]
    manifests = [manifest(j, run_id) for j in jobs]
    shapes = {m["metadata"]["name"]: (m["spec"]["template"], pods_wanted(m["spec"])) for m in manifests}
    ctrl: env.ControllerProcess | None = None
    sampler: env.Sampler | None = None
    try:
        await asyncio.gather(*(i.wait_synced(30) for i in informers))
        t = time.time()
        ctrl = await _start_controller(bed, clusters, workers, policy, namespace, opts.out / "logs", "run")
        if policy == "RoomAware":
            expect = room_expectation(nodes, workers)
            if not await _room_synced(ctrl, expect, 60):
                raise RuntimeError(f"RoomAware: room views not synced in 60 s (want {expect}):\n{ctrl.log_tail()}")
        res["controllerStartupSeconds"] = round(time.time() - t, 1)
        startup = ctrl.sample()
        ctrl_before = await ctrl.metrics()
        sampler = env.Sampler({"controller": ctrl.pid})
        sub = Submission()
        t0 = time.time()
        sampler.start(t0)

        def never() -> list[str]:
            return never_fit({n: j.placement for n, j in seen.jobs.items()}, shapes, nodes)

        def progress() -> str:
            placed = Counter(j.placement for j in seen.jobs.values() if j.placement)
            running = {p.job for p in seen.pods.values() if p.started is not None}
            done = sum(1 for j in seen.jobs.values() if j.complete is not None)
            return (f"{policy} t={time.time() - t0:5.1f}s created {len(sub.acked)}/{len(jobs)} · placed "
                    f"{sum(placed.values())} ({', '.join(f'{w} {c}' for w, c in sorted(placed.items())) or '-'}) · "
                    f"started {len(running)} · Complete {done} · never-fit {len(never())} · load {load()[0]}")

        stop_reason = "timeout"
        with env.Progress(progress, 5.0):
            await submit(mgr, namespace, manifests, opts.create_concurrency, sub)
            if sub.errors:
                raise RuntimeError(f"{len(sub.errors)} Jobs not created, e.g. {sub.errors[0]}")
            while time.time() - t0 < timeout:
                left = seen.unfinished() if len(seen.jobs) >= len(jobs) else ["?"]
                if not left:
                    stop_reason = "all finished"
                    break
                if run_is_over(left, never(), policy):
                    stop_reason = "every unfinished Job sits on a worker where it can never run"
                    break
                if not ctrl.alive():
                    raise RuntimeError(f"{policy}: controller exited:\n{ctrl.log_tail()}")
                await asyncio.sleep(0.5)
            t_end = time.time()
            env.say(f"{policy}: run over after {t_end - t0:.1f}s ({stop_reason})")
            if stop_reason == "all finished":  # count the controller's calls that finish the Jobs, too
                await env.wait_until(lambda: all(j.released for j in seen.jobs.values()), 30, 0.2)
        await asyncio.sleep(1.0)
        ctrl_after = await ctrl.metrics()
        after = ctrl.sample()
        await sampler.stop()
        nf = never()
        res.update(figures(jobs, seen, nf, t0, t_end))
        res["stopReason"] = stop_reason
        res["finished"] = stop_reason == "all finished"
        res["runSeconds"] = round(t_end - t0, 1)
        res["submission"] = sub.summary(opts.create_concurrency)
        client = _client_side(ctrl_before, ctrl_after, len(jobs))
        res["apiRequests"] = client
        res["managerCallsPerJob"] = (client or {}).get("manager", {}).get("perJob")
        res["workerCallsPerJob"] = (client or {}).get("workersCombined", {}).get("perJob")
        assert startup is not None and after is not None
        res["controller"] = {
            "cpuSecondsStartup": round(startup.cpu_seconds, 2),
            "cpuSeconds": round(after.cpu_seconds - startup.cpu_seconds, 2),
            "peakRssMiB": env.mib(after.hwm_kib), "rssAtEndMiB": env.mib(after.rss_kib),
            "note": "cpuSeconds: /proc utime+stime from the first create to the end of the run (+ the release "
                    "of finished Jobs); peak RSS = VmHWM",
        }
        res["loadAverage"]["end"] = load()
        res["loadAverage"]["max1mDuringRun"] = sampler.max_load()
    finally:
        if sampler is not None:
            with contextlib.suppress(Exception):
                await sampler.stop()
        with contextlib.suppress(Exception):
            res["cleanup"] = await _cleanup(policy, mgr, wcl, namespace, ctrl, opts.cleanup_timeout)
        if ctrl is not None:
            res.setdefault("controller", {})["exitCode"] = await ctrl.stop()
            res["controller"]["log"] = ctrl.log_summary()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in (mgr, *wcl.values()):
            await c.close()
    return res


def memory_pod(i: int, nodes: int) -> Obj:
    """A non-terminal pod bound to one of ``nodes`` static nodes (no kubelet or kwok: it stays
    Pending with its nodeName, which the room view counts as holding room)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"mem-{i:06d}", "labels": {"app": "placement-memory",
                                                             "batch.kubernetes.io/job-name": f"mem-{i // 4:06d}"}},
            "spec": {"nodeName": f"mem-node-{i % nodes}", "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "automountServiceAccountToken": False,
                     "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"],
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}


MEMORY_NODES = 4
MEMORY_POD_CPU_MILLI = 10


async def _fill(client: ClusterClient, worker: str, n: int, concurrency: int = 100) -> float:
    """Create ``n`` pods on ``worker`` (progress every 3 s); returns the seconds it took."""
    await ensure_namespace(client, MEMORY_NAMESPACE)
    with contextlib.suppress(ApiError):
        await client.create(SERVICE_ACCOUNTS, MEMORY_NAMESPACE, {"apiVersion": "v1", "kind": "ServiceAccount",
                                                                 "metadata": {"name": "default"}})
    big = NodeShape(MEMORY_NODES, "1000", "4Ti", pods=100000)
    for i in range(MEMORY_NODES):
        name = f"mem-node-{i}"
        body = node_manifest(name, big, kwok=False)
        with contextlib.suppress(ApiError):
            await client.create(NODES, None, body)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for c in body["status"]["conditions"]:
            c["lastHeartbeatTime"] = c["lastTransitionTime"] = now
        await client.patch(NODES, None, name, {"status": body["status"]}, subresource="status")
    created = 0
    errors: list[str] = []
    queue = iter(range(n))
    t = time.monotonic()

    async def worker_task() -> None:
        nonlocal created
        for i in queue:
            for attempt in range(6):
                try:
                    await client.create(PODS, MEMORY_NAMESPACE, memory_pod(i, MEMORY_NODES))
                except ApiError as exc:
                    if exc.already_exists:
                        break
                    if exc.transient and attempt < 5:
                        await asyncio.sleep(0.1 * 2 ** attempt)
                        continue
                    errors.append(str(exc))
                    return
                break
            created += 1

    with env.Progress(lambda: f"memory: created {created}/{n} pods on {worker}", 3.0):
        await asyncio.gather(*(worker_task() for _ in range(concurrency)))
    if errors:
        raise RuntimeError(f"{worker}: {len(errors)} pods not created, e.g. {errors[0][:300]}")
    secs = time.monotonic() - t
    env.say(f"memory: {n} pods on {worker} in {secs:.1f}s ({n / secs:.0f}/s)")
    return round(secs, 1)


async def memory_part(opts: PlacementOptions, bed: ClusterBed, manager: LocalCluster) -> dict[str, Any]:
    """RSS of a RoomAware and a LeastLoaded controller against workers with N non-terminal pods
    each; the difference is what the room views' pod caches cost."""
    names = [f"mem-{i + 1}" for i in range(opts.memory_workers)]
    specs = [ClusterSpec(w, controller_manager=False, nodes=0) for w in names]
    t = time.monotonic()
    clusters = {"manager": manager, **await env.bring_up(bed, specs)}
    out: dict[str, Any] = {"podsPerWorker": opts.memory_pods, "workers": names,
                           "pod": "one container requesting cpu 10m / memory 16Mi, nodeName set, no kubelet: Pending",
                           "bed": "workers: kube-apiserver + etcd only (no scheduler, kwok or kcm); "
                                  f"{MEMORY_NODES} static Ready nodes each",
                           "bringUpSeconds": round(time.monotonic() - t, 1), "createSeconds": {}, "policies": {}}
    mgr = await env.client_for(manager)
    try:
        await ensure_namespace(mgr, MEMORY_NAMESPACE)
    finally:
        await mgr.close()
    for w in names:
        c = await env.client_for(clusters[w], burst=100000)
        try:
            out["createSeconds"][w] = await _fill(c, w, opts.memory_pods)
        finally:
            await c.close()
    expect = {w: ("jobmirror_worker_requested", "cpu", float(opts.memory_pods * MEMORY_POD_CPU_MILLI)) for w in names}
    for policy in opts.policies:
        env.say(f"memory: {policy} controller against {len(names)} x {opts.memory_pods} pods")
        t = time.time()
        # no Jobs here: what must have synced is the room view (RoomAware), not the workers' health
        p = await _start_controller(bed, clusters, names, policy, MEMORY_NAMESPACE, opts.out / "logs", "memory",
                                    workers_up=False)
        try:
            synced = None
            if policy == "RoomAware":
                synced = await _room_synced(p, expect, 180)
                if not synced:
                    env.say(f"memory: RoomAware views did not count every pod in 180 s (want {expect})")
            ready = time.time() - t
            await asyncio.sleep(opts.memory_settle)
            s = p.sample()
            m = await p.metrics()
            out["policies"][policy] = {
                "readySeconds": round(ready, 1), "roomSynced": synced,
                "rssMiB": env.mib(s.rss_kib if s else None), "peakRssMiB": env.mib(s.hwm_kib if s else None),
                "rssKiB": s.rss_kib if s else None, "peakRssKiB": s.hwm_kib if s else None,
                "cpuSeconds": round(s.cpu_seconds, 2) if s else None,
                "requestedCpuGauge": {w: promtext.total(m or [], "jobmirror_worker_requested",
                                                        {"worker": w, "resource": "cpu"}) for w in names},
            }
        finally:
            await p.stop()
    ra, ll = out["policies"].get("RoomAware", {}), out["policies"].get("LeastLoaded", {})
    cached = opts.memory_pods * len(names)
    out["bytesPerPod"] = bytes_per_pod(ra.get("rssKiB"), ll.get("rssKiB"), cached)
    out["peakBytesPerPod"] = bytes_per_pod(ra.get("peakRssKiB"), ll.get("peakRssKiB"), cached)
    out["note"] = (f"RSS {opts.memory_settle:.0f} s after the RoomAware views counted every pod (gauge "
                   "jobmirror_worker_requested) or, for LeastLoaded, after ready; bytes/pod = RSS difference ÷ "
                   "pods cached over all workers")
    for w in names:
        await asyncio.to_thread(bed.delete, w)
    return out


async def unequal_bed(bed: ClusterBed, result: dict[str, Any],
                      phases: dict[str, float]) -> tuple[dict[str, LocalCluster], dict[str, list[NodeRoom]]]:
    """The manager and the two unequal workers of ``WORKER_SHAPES``, their nodes shaped; records
    the server version in ``result`` and the seconds taken in ``phases``."""
    specs = [ClusterSpec("manager", nodes=0)] + [ClusterSpec(w, nodes=1) for w in WORKER_SHAPES]
    t = time.monotonic()
    clusters = await env.bring_up(bed, specs)
    phases["bringUp"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    wcl = {w: await env.client_for(clusters[w]) for w in WORKER_SHAPES}
    try:
        shaped = await asyncio.gather(*(_shape_nodes(wcl[w], w, s) for w, s in WORKER_SHAPES.items()))
        nodes = {w: [node_room(n) for n in items] for w, items in zip(WORKER_SHAPES, shaped, strict=True)}
        result["kubernetes"] = {"serverVersion": await env.server_version(wcl["worker-1"])}
    finally:
        for c in wcl.values():
            await c.close()
    phases["shapeNodes"] = round(time.monotonic() - t, 1)
    env.say("nodes shaped: " + "; ".join(f"{w}: {len(ns)} x {dict(ns[0].allocatable)}" for w, ns in nodes.items()))
    return clusters, nodes


async def run(opts: PlacementOptions) -> dict[str, Any]:
    from bench.machine import git_info, machine_info, now_iso

    unknown = [p for p in opts.policies if p not in POLICIES]
    if unknown:
        raise ValueError(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    jobs = plan(opts.jobs, opts.seed, opts.duration_scale)
    env.say(f"placement: {len(jobs)} Jobs, seed {opts.seed} (repeat with --seed {opts.seed})")
    result: dict[str, Any] = {
        "benchmark": "placement", "date": now_iso(), "machine": machine_info(), "git": git_info(),
        "loadAverage": {"start": load()}, "seed": opts.seed,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()},
        "bed": {"manager": "kube-apiserver + kcm, no nodes",
                "workers": {w: {"nodes": s.count, "perNode": s.resources()} for w, s in WORKER_SHAPES.items()},
                "note": "each worker: kube-apiserver, kcm, kube-scheduler, kwok; nodes created by the benchmark "
                        "(kwokctl runs kwok with --manage-all-nodes), kwokctl's default node deleted"},
        "workload": workload_summary(jobs), "order": list(opts.policies), "policies": {},
    }
    phases: dict[str, float] = {}
    result["phaseSeconds"] = phases
    bed = ClusterBed(scratch_dir("jobmirror-placement-"))
    try:
        clusters, nodes = await unequal_bed(bed, result, phases)
        bound = lower_bound(jobs, nodes)
        result["lowerBound"] = bound
        env.say(f"lower bound {bound['seconds']} s ({bound['binding']}); total cpu bound {bound['cpu']} s")
        for policy in opts.policies:
            env.say(f"=== placement: {policy}, {len(jobs)} Jobs ===")
            t = time.monotonic()
            try:
                r = await run_policy(policy, jobs, nodes, bound["seconds"], opts, bed, clusters)
            except Exception as exc:  # keep the other policy's results
                env.say(f"{policy} FAILED: {type(exc).__name__}: {exc}")
                r = {"policy": policy, "error": f"{type(exc).__name__}: {exc}"[:4000]}
            result["policies"][policy] = r
            phases[policy] = round(time.monotonic() - t, 1)
            env.say(summary_line(r))
        if opts.memory_pods > 0:
            for w in WORKER_SHAPES:  # the placement workers are done with: free their CPU
                await asyncio.to_thread(bed.delete, w)
            env.say(f"=== memory: {opts.memory_workers} workers x {opts.memory_pods} non-terminal pods ===")
            t = time.monotonic()
            try:
                result["memory"] = await memory_part(opts, bed, clusters["manager"])
            except Exception as exc:
                env.say(f"memory part FAILED: {type(exc).__name__}: {exc}")
                result["memory"] = {"error": f"{type(exc).__name__}: {exc}"[:4000]}
            phases["memory"] = round(time.monotonic() - t, 1)
    finally:
        t = time.monotonic()
        bed.down()  # synchronously: runs even while the task is being cancelled (Ctrl-C)
        phases["tearDown"] = round(time.monotonic() - t, 1)
    result["loadAverage"]["end"] = load()
    return result


# -- reporting ----------------------------------------------------------------------------------------


def _f(x: Any, digits: int = 1) -> str:
    if x is None:
        return "-"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def summary_line(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"{r['policy']}: failed: {r['error'][:300]}"
    ms = f"makespan {r['makespanSeconds']} s" if r["finished"] else f"did not finish ({r['stopReason']})"
    return (f"{r['policy']}: {ms}, {r['completed']}/{r['jobs']} Complete, stuck>60s {r['stuckOver60s']}, pending "
            f"pod-s {r['pendingPodSeconds']}, never-fit {r['neverFit']}, manager calls/Job {r['managerCallsPerJob']}, "
            f"CPU {r['controller']['cpuSeconds']} s, peak RSS {r['controller']['peakRssMiB']} MiB")


def markdown_table(result: dict[str, Any]) -> str:
    """The README's tables of one run: the policies beside the lower bound, then memory."""
    n = result["workload"]["jobs"]
    lines = ["| policy | makespan (s) | Complete | stuck > 60 s | pending pod-s | never-fit | manager calls/Job | "
             "controller CPU s | peak RSS MiB |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for policy, r in result["policies"].items():
        if "error" in r:
            lines.append(f"| {policy} | failed: {r['error'][:80]} ||||||||")
            continue
        ms = (_f(r["makespanSeconds"]) if r["finished"] else
              f"did not finish: {'timed out' if r['stopReason'] == 'timeout' else 'stuck for good'} at "
              f"{_f(r['runSeconds'])} (last Complete {_f(r['lastCompleteSeconds'])})")
        lines.append(f"| {policy} | {ms} | {r['completed']}/{n} | {r['stuckOver60s']} | "
                     f"{_f(r['pendingPodSeconds'], 0)} | {r['neverFit']} | {_f(r['managerCallsPerJob'], 2)} | "
                     f"{_f(r['controller']['cpuSeconds'])} | {_f(r['controller']['peakRssMiB'])} |")
    lb = result.get("lowerBound") or {}
    lines.append(f"| lower bound ({lb.get('binding')}) | {_f(lb.get('seconds'))} | {n}/{n} | 0 | - | 0 | - | - | - |")
    mem = result.get("memory")
    if mem and "error" not in mem:
        lines += ["", "| policy | non-terminal pods per worker x workers | RSS MiB | peak RSS MiB |",
                  "|---|---:|---:|---:|"]
        for policy, m in mem["policies"].items():
            lines.append(f"| {policy} | {mem['podsPerWorker']} x {len(mem['workers'])} | {_f(m['rssMiB'])} | "
                         f"{_f(m['peakRssMiB'])} |")
        lines.append(f"\nroom views: {_f(mem.get('bytesPerPod'), 0)} bytes per cached pod (RSS), "
                     f"{_f(mem.get('peakBytesPerPod'), 0)} (peak)")
    elif mem:
        lines.append(f"\nmemory part failed: {mem['error'][:200]}")
    return "\n".join(lines)
