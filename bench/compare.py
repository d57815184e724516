"""``bench compare``: jobmirror, MultiKueue, the guarantees floor and the bare-API limit on the same bed, one run.

Every contender gets freshly built clusters (manager + 2 kwok workers), the same Job
manifests, the same watches (:class:`bench.mirror_bench.Tracker`) and the same scrapes
(``apiserver_request_total``, ``/proc`` CPU and peak RSS of every process the contender
runs). Contenders run in alternating order per size so drift in the machine's load does
not always favour the same one.

Contenders (keys):

- ``bare``: :mod:`bench.bare` — create copy, copy final status, delete copy; no decisions.
- ``floor``: :mod:`bench.floor` — exactly what jobmirror's guarantees need: claim (finalizer +
  placement, resourceVersion precondition), create copy, one valid final status, delete copy,
  release the finalizer. jobmirror ÷ floor is the price of everything else it does.
- ``jobmirror``: defaults (200 QPS / burst 400 per cluster, 32 reconcilers).
- ``jobmirror-5qps``: 5 QPS / burst 10 on every worker connection, as MultiKueue v0.19.2.
- ``multikueue``: Kueue v0.19.2 with its shipped configuration (manager client 300/500,
  Job/Workload reconcilers 5/10); worker connections are client-go's 5/10 and cannot be
  changed in v0.19.2.
- ``multikueue-equal``: the same with the manager client and reconcilers set to
  jobmirror's (200/400, 32/32) — as equal as v0.19.2 allows (workers still 5/10).
- ``multikueue-patched``: as ``multikueue-equal``, on a v0.19.2 build patched so its worker
  connections run at 200/400 too (kueue#15280's effect, which later releases ship).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench import cpuprofile, env, promtext
from bench.machine import load
from bench.mirror_bench import (
    NAMESPACE,
    ORIGIN,
    WORKERS,
    Tracker,
    _client_side,
    _controller_counters,
    _results,
    _worker_up,
    controller_argv,
)
from bench.multikueue import KueueSettings, MultiKueue, queued_job
from bench.stats import summarize
from bench.workload import Submission, job_manifest, submit
from clusterbed import versions
from clusterbed.cluster import ClusterBed, ClusterSpec, LocalCluster, scratch_dir
from kruntime.client import ClusterClient
from kruntime.informer import Informer
from kruntime.resources import JOBS, Obj
from mirror.naming import DEFAULT_CONTROLLER_NAME, FIELD_MANAGER, LABEL_ORIGIN
from testkit.waiting import ensure_namespace

DEFAULT_SIZES = [100, 1000]
#: Every contender's pods request this. Kueue v0.19.2 attaches a ClusterQueue's admission checks
#: by the flavors a workload was assigned; a Job that requests nothing gets no flavor, so no
#: MultiKueue check: it is admitted in the manager and never mirrored back (seen here).
REQUESTS = {"cpu": "10m", "memory": "16Mi"}
MIRROR_QPS, MIRROR_BURST, MIRROR_RECONCILERS = 200.0, 400, 32


@dataclass(frozen=True)
class Contender:
    key: str
    system: str  # bare | floor | jobmirror | multikueue
    label: str
    worker_qps: float | None = None  # None: the system's default
    worker_burst: int | None = None
    kueue: KueueSettings | None = None
    #: jobmirror config keys set over its defaults (workersConcurrency, placement, statusBatchPeriod …)
    config: Mapping[str, Any] = field(default_factory=dict)


CONTENDERS: dict[str, Contender] = {c.key: c for c in (
    Contender("bare", "bare", f"bare-API limit ({MIRROR_QPS:g}/{MIRROR_BURST})"),
    Contender("floor", "floor", f"guarantees floor ({MIRROR_QPS:g}/{MIRROR_BURST})"),
    Contender("jobmirror", "jobmirror", f"jobmirror defaults ({MIRROR_QPS:g}/{MIRROR_BURST})"),
    Contender("jobmirror-5qps", "jobmirror", "jobmirror, workers 5/10", worker_qps=5, worker_burst=10),
    # issue 38: passes in flight against the urgent lane's drain after a burst of completions
    Contender("jobmirror-64", "jobmirror", "jobmirror, workersConcurrency 64", config={"workersConcurrency": 64}),
    Contender("jobmirror-128", "jobmirror", "jobmirror, workersConcurrency 128", config={"workersConcurrency": 128}),
    # issue 38: what seeing the workers' room (their Node and Pod watches) costs per Job
    Contender("jobmirror-leastloaded", "jobmirror", "jobmirror, placement LeastLoaded (no room watches)",
              config={"placement": "LeastLoaded"}),
    # ... and what the running counters cost on top: a batch period longer than these Jobs' lives
    # leaves only the deciding conditions to mirror, the floor's status contract
    Contender("jobmirror-floor-contract", "jobmirror", "jobmirror, LeastLoaded, statusBatchPeriod 30 s "
              "(no running counters for 1-s pods)", config={"placement": "LeastLoaded", "statusBatchPeriod": 30.0}),
    Contender("multikueue", "multikueue", f"MultiKueue v{versions.KUEUE_VERSION} shipped config",
              kueue=KueueSettings()),
    Contender("multikueue-equal", "multikueue", f"MultiKueue v{versions.KUEUE_VERSION}, manager {MIRROR_QPS:g}/"
              f"{MIRROR_BURST}", kueue=KueueSettings(qps=MIRROR_QPS, burst=MIRROR_BURST,
                                                     job_concurrency=MIRROR_RECONCILERS,
                                                     workload_concurrency=MIRROR_RECONCILERS)),
    # issue 38: equal limits on every connection, which v0.19.2 cannot set for its workers
    Contender("multikueue-patched", "multikueue", f"MultiKueue v{versions.KUEUE_VERSION} + local patch, "
              f"manager and workers {MIRROR_QPS:g}/{MIRROR_BURST}",
              kueue=KueueSettings(qps=MIRROR_QPS, burst=MIRROR_BURST, job_concurrency=MIRROR_RECONCILERS,
                                  workload_concurrency=MIRROR_RECONCILERS,
                                  worker_limits=(MIRROR_QPS, MIRROR_BURST))),
)}


def order_for(keys: list[str], round_index: int) -> list[str]:
    """Alternate the order between rounds (sizes) so no contender always runs first."""
    return list(keys) if round_index % 2 == 0 else list(reversed(keys))


@dataclass
class CompareOptions:
    sizes: list[int]
    out: Path
    contenders: list[str] = field(default_factory=lambda: list(CONTENDERS))
    worker_nodes: int = 4
    pod_duration: str = "1s"
    create_concurrency: int = 50
    timeout: float | None = None  # per contender and size; None = 120 s + 1 s per Job
    cleanup_timeout: float = 60.0
    idle_window: float = 5.0
    #: one bed per size for every contender, each in its own namespace: saves a bed bring-up per
    #: contender, for smoke tests only (a contender then runs beside the previous one's leftovers:
    #: its pods' deletion, caches, etcd history), so its figures are not comparable
    shared_bed: bool = False
    #: runs of every contender per size, the order alternating between them: figures are reported as
    #: median and spread (min-max) over the repeats
    repeats: int = 1
    #: attach py-spy at this rate (Hz) to each Python process of a contender for the measured window
    #: (bench/cpuprofile.py); None: not profiled
    profile_cpu: float | None = None


class Running:
    """What one contender runs: its processes and how to read its own counters."""

    def __init__(self, procs: dict[str, env.ControllerProcess], mk: MultiKueue | None = None) -> None:
        self.procs = procs
        self.mk = mk

    async def metrics(self) -> list[promtext.Sample] | None:
        p = self.procs.get("jobmirror")
        return await p.metrics() if p is not None else None

    async def stop(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, p in self.procs.items():
            out[name] = {"exitCode": await p.stop(), "log": p.log_summary()}
        return out


def manifests(c: Contender, n: int, run_id: str, pod_duration: str) -> list[Obj]:
    """The same one-pod Jobs for everybody; only what claims them differs."""
    from bench import bare, floor

    managed_by = {"bare": bare.MANAGED_BY, "floor": floor.MANAGED_BY,
                  "jobmirror": DEFAULT_CONTROLLER_NAME}.get(c.system)
    jobs = [job_manifest(f"job-{i:05d}", run_id, managed_by=managed_by, pod_duration=pod_duration,
                         requests=REQUESTS) for i in range(n)]
    return [queued_job(j) for j in jobs] if c.system == "multikueue" else jobs


def worker_selector(c: Contender) -> str:
    from bench import multikueue

    return (f"{multikueue.ORIGIN_LABEL}={multikueue.ORIGIN}" if c.system == "multikueue"
            else f"{LABEL_ORIGIN}={ORIGIN}")


async def start(c: Contender, bed: ClusterBed, clusters: dict[str, LocalCluster], logs: Path,
                n: int, *, workers: tuple[str, ...] = WORKERS, namespaces: tuple[str, ...] = (NAMESPACE,)) -> Running:
    """Start contender ``c`` against ``clusters`` and return once it can take Jobs."""
    if c.system == "multikueue":
        assert c.kueue is not None
        mk = MultiKueue(bed.workdir, clusters["manager"], {w: clusters[w] for w in workers}, list(namespaces),
                        c.kueue, quota=str(max(1000, 2 * n)), log_dir=logs / f"{c.key}-{n}")
        try:
            secs = await mk.start()
        except BaseException:
            await mk.stop()
            raise
        env.say(f"{c.key}: MultiKueue Active in {secs:.1f}s")
        return Running({f"kueue-{k}": p for k, p in mk.procs.items()}, mk)
    port = env.free_port()
    if c.system in ("bare", "floor"):  # bench.minimal processes: the same flags
        argv = [sys.executable, "-m", f"bench.{c.system}", "--manager", str(clusters["manager"].kubeconfig),
                *[a for w in workers for a in ("--worker", f"{w}={clusters[w].kubeconfig}")],
                "--namespace", namespaces[0], "--origin", ORIGIN,
                "--qps", str(MIRROR_QPS), "--burst", str(MIRROR_BURST),
                "--concurrency", str(MIRROR_RECONCILERS), "--health-port", str(port)]
        p = env.ControllerProcess(f"{c.key}-{n}", argv, logs / f"{c.key}-{n}.log", port)
        p.start()
        await p.wait_ready()
        return Running({c.system: p})
    cfg: dict[str, Any] = {
        "controllerName": DEFAULT_CONTROLLER_NAME, "origin": ORIGIN,
        "managerKubeconfig": str(clusters["manager"].kubeconfig),
        "workers": [{"name": w, "kubeconfig": str(clusters[w].kubeconfig)} for w in workers],
        "metricsAddress": f"127.0.0.1:{port}",
    }
    if c.worker_qps is not None:
        for w in cfg["workers"]:
            w["qps"], w["burst"] = c.worker_qps, c.worker_burst
    cfg.update(c.config)
    cfg_path = bed.workdir / f"{c.key}-{n}.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    p = env.ControllerProcess(f"{c.key}-{n}", controller_argv(cfg_path, None), logs / f"{c.key}-{n}.log", port)
    p.start()
    try:
        await p.wait_ready()
        if not await _worker_up(p, workers):
            raise RuntimeError(f"jobmirror never saw both workers healthy:\n{p.log_tail()}")
    except BaseException:
        await p.stop()
        raise
    return Running({"jobmirror": p})


async def _scrape(clients: dict[str, ClusterClient]) -> dict[str, list[promtext.Sample]]:
    return {name: await env.apiserver_metrics(c) for name, c in clients.items()}


async def measure(c: Contender, n: int, opts: CompareOptions, bed: ClusterBed,
                  clusters: dict[str, LocalCluster], namespace: str = NAMESPACE) -> dict[str, Any]:
    """Start ``c``, submit ``n`` Jobs, wait for all-Complete on the manager, and measure as mirror_bench does."""
    from bench import bare, floor
    from bench.machine import git_info

    run_id = uuid.uuid4().hex[:8]
    timeout = opts.timeout or 120 + 1.0 * n
    res: dict[str, Any] = {"contender": c.key, "label": c.label, "jobs": n, "runId": run_id,
                           "loadAverage": {"start": load()}, "git": git_info()}
    clients = {"manager": await env.client_for(clusters["manager"]),
               **{w: await env.client_for(clusters[w]) for w in WORKERS}}
    for cl in clients.values():
        await ensure_namespace(cl, namespace)
    # Whose status write on the manager marks "propagated" in the managedFields view.
    tracker = Tracker(status_manager={"jobmirror": FIELD_MANAGER, "bare": bare.FIELD_MANAGER,
                                      "floor": floor.FIELD_MANAGER}.get(c.system))
    informers = [Informer(clients["manager"], JOBS, namespace=namespace)]
    informers[0].add_handler(tracker.on_manager)
    for w in WORKERS:
        inf = Informer(clients[w], JOBS, namespace=namespace, label_selector=worker_selector(c))
        inf.add_handler(tracker.worker_handler(w))
        informers.append(inf)
    tasks = [asyncio.create_task(i.run()) for i in informers]
    running: Running | None = None
    sampler: env.Sampler | None = None
    spies: dict[str, cpuprofile.Recorder] = {}
    logs = opts.out / "logs"
    try:
        t_start = time.time()
        running = await start(c, bed, clusters, logs, n, namespaces=(namespace,))
        res["startupSeconds"] = round(time.time() - t_start, 2)
        await asyncio.gather(*(i.wait_synced(30) for i in informers))
        idle0 = await _scrape(clients)
        t_idle = time.time()
        await asyncio.sleep(opts.idle_window)
        before = await _scrape(clients)
        idle_secs = time.time() - t_idle
        idle_rate = {k: max(0.0, promtext.total(before[k], "apiserver_request_total")
                            - promtext.total(idle0[k], "apiserver_request_total")) / idle_secs for k in before}
        ctrl_before = await running.metrics()
        cpu_before = {k: p.sample() for k, p in running.procs.items()}
        sampler = env.Sampler({k: p.pid for k, p in running.procs.items()})
        jobs = manifests(c, n, run_id, opts.pod_duration)
        sub = Submission()
        t0 = time.time()
        sampler.start(t0)
        if opts.profile_cpu:
            profiles = opts.out / "profiles"
            profiles.mkdir(parents=True, exist_ok=True)
            spies = {k: cpuprofile.Recorder(p.pid, profiles / f"{c.key}-{n}-{run_id}-{k}.raw", opts.profile_cpu)
                     for k, p in running.procs.items() if p.python}

        def progress() -> str:
            k = tracker.counts
            return (f"{c.key} n={n} t={time.time() - t0:5.1f}s submitted {len(sub.acked)}/{n} · dispatched "
                    f"{k['dispatched']} · worker-complete {k['workerDone']} · manager-complete {k['managerDone']} "
                    f"· cleaned {k['remoteDeleted']} · load {load()[0]}")

        with env.Progress(progress):
            await submit(clients["manager"], namespace, jobs, opts.create_concurrency, sub)
            done = await env.wait_until(lambda: tracker.counts["managerDone"] >= len(sub.acked),
                                        timeout - (time.time() - t0), 0.05)
            t_done = time.time()
            # Finished is when every copy is gone and our finalizer released (a contender without
            # one counts as released once Complete): the release is part of each Job's cost.
            cleaned = await env.wait_until(
                lambda: min(tracker.counts["remoteDeleted"], tracker.counts["released"]) >= len(sub.acked),
                opts.cleanup_timeout, 0.1) if done else False
            t_clean = time.time()
        # py-spy writes and the stacks are sorted off the loop (the watches keep being read meanwhile)
        profiled = {k: await asyncio.to_thread(spy.stop) for k, spy in spies.items()}
        await asyncio.sleep(1.0)
        after = await _scrape(clients)
        ctrl_after = await running.metrics()
        cpu_after = {k: p.sample() for k, p in running.procs.items()}
        t_after = time.time()
        await sampler.stop()
        res["loadAverage"]["end"] = load()
        res["loadAverage"]["max1mDuringRun"] = sampler.max_load()
        res["timedOut"] = not done
        res["cleanupTimedOut"] = done and not cleaned
        res["submission"] = sub.summary(opts.create_concurrency)
        res.update(_results(n, tracker, sub, t0, t_done, t_clean))
        measured = t_after - t0
        api: dict[str, Any] = {
            "window": "first create → all manager Jobs Complete, every remote copy deleted and every finalizer "
                      "released, or the cleanup "
                      f"timeout ({opts.cleanup_timeout:.0f} s) (+1 s)",
            "windowSeconds": round(measured, 2),
        }
        for k in clients:
            api[k] = promtext.apiserver_requests(before[k], after[k], idle_rate[k], measured, n, "Job")
        api["managerNote"] = f"includes this benchmark's own {n} POST jobs and its watches"
        wsum = sum(api[w]["total"] for w in WORKERS)
        api["workersCombined"] = {"total": wsum, "perJob": round(wsum / n, 2),
                                  "perJobExcludingIdle": round(sum(api[w]["perJobExcludingIdle"] for w in WORKERS), 2)}
        api["byVerb"] = {k: verbs(before[k], after[k], n) for k in clients}
        api["managerOwnCalls"] = own_calls(promtext.counter_delta(
            before["manager"], after["manager"], "apiserver_request_total",
            ("verb", "group", "resource", "subresource")), n)
        if ctrl_before is not None:
            api["controllerClientSide"] = _client_side(ctrl_before, ctrl_after, n)
        res["apiRequests"] = api
        procs: dict[str, Any] = {}
        for k in running.procs:
            a, b = cpu_before.get(k), cpu_after.get(k)
            if a is None or b is None:
                continue
            procs[k] = {"cpuSeconds": round(b.cpu_seconds - a.cpu_seconds, 2), "peakRssMiB": env.mib(b.hwm_kib)}
        cpu = sum(p["cpuSeconds"] for p in procs.values())
        res["controller"] = {
            "processes": procs,
            "cpuSecondsWorkload": round(cpu, 2),
            "cpuSecondsPerJob": round(cpu / n, 4),
            "peakRssMiB": round(sum(p["peakRssMiB"] or 0 for p in procs.values()), 1),
            "note": "sum over every process the contender runs (MultiKueue: the manager's Kueue and one Kueue per "
                    "worker, all three are needed); /proc utime+stime during the window, VmHWM",
            **(_controller_counters(ctrl_before, ctrl_after) if ctrl_before is not None else {}),
        }
        if opts.profile_cpu:
            res["controller"]["cpuProfile"] = {"hz": opts.profile_cpu, "processes": profiled,
                                               "note": cpuprofile.__doc__.split("\n\n")[1].replace("\n", " ")}
            res["profiled"] = True
        res["samplesTimeline"] = sampler.rows
    finally:
        for spy in spies.values():
            spy.stop()  # stopped already on the way here, unless the run failed
        if sampler is not None:
            with contextlib.suppress(Exception):
                await sampler.stop()
        if running is not None:
            res.setdefault("controller", {})["stopped"] = await running.stop()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for cl in clients.values():
            await cl.close()
    return res


#: what the systems act on per Job, by API group and resource (None: any resource of the group); the
#: bed's own traffic (leases, endpoints, openapi, ...) is on none of them
OWN_RESOURCES: dict[str, str | None] = {"batch": "jobs", "": "events", "events.k8s.io": "events",
                                        "kueue.x-k8s.io": None}
#: long-lived: not a per-Job cost
NOT_OWN_VERBS = ("LIST", "WATCH")
#: the benchmark's own Job creates
BENCH_OWN = ("POST", "batch", "jobs", "")


def own_calls(deltas: dict[tuple[str, ...], float], n: int) -> dict[str, float]:
    """The contender's own manager calls per Job, by ``verb resource [subresource]`` and in total.

    ``deltas``: ``apiserver_request_total`` growth by (verb, group, resource, subresource), so it
    counts every system alike, MultiKueue's Workloads too: requests on Jobs, Events and Kueue's
    objects, without the benchmark's own creates and list/watch.
    """
    out: dict[str, float] = {}
    total = 0.0
    for (verb, group, resource, sub), count in sorted(deltas.items()):
        if (verb, group, resource, sub) == BENCH_OWN or verb in NOT_OWN_VERBS or group not in OWN_RESOURCES \
                or OWN_RESOURCES[group] not in (None, resource):
            continue
        key = " ".join(p for p in (verb, resource, sub) if p)
        out[key] = round(out.get(key, 0.0) + count / n, 3)
        total += count
    out["total"] = round(total / n, 3)
    return out


def verbs(before: list[promtext.Sample], after: list[promtext.Sample], n: int) -> dict[str, float]:
    """``apiserver_request_total`` growth per Job by verb (WATCH excluded: long-lived)."""
    by = promtext.counter_delta(before, after, "apiserver_request_total", ("verb",))
    return {k[0]: round(v / n, 3) for k, v in sorted(by.items()) if k[0] not in ("WATCH",)}


async def run(opts: CompareOptions) -> dict[str, Any]:
    from bench.machine import git_info, machine_info, now_iso

    unknown = [k for k in opts.contenders if k not in CONTENDERS]
    if unknown:
        raise ValueError(f"--contenders: unknown {unknown}; known: {sorted(CONTENDERS)}")
    result: dict[str, Any] = {
        "benchmark": "compare",
        "date": now_iso(),
        "machine": machine_info(),
        "git": git_info(),
        "loadAverage": {"start": load()},
        "kueueVersion": versions.KUEUE_VERSION,
        "contenders": {k: asdict(CONTENDERS[k]) for k in opts.contenders},
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()},
        "notes": [
            "MultiKueue v0.19.2 connects to workers with client-go's default 5 QPS / burst 10; that release has no "
            "setting to raise it (later releases reuse the manager's client settings behind a gate).",
            "The machine is shared: absolute figures are noisy; compare contenders within one run.",
        ],
        "runs": [],
    }
    if opts.shared_bed:
        result["notes"].append("shared bed: every contender of a size ran on the same clusters, each in its own "
                               "namespace (a smoke test's shortcut): the figures are not comparable")
    rounds = [(n, rep) for n in opts.sizes for rep in range(max(1, opts.repeats))]
    for i, (n, rep) in enumerate(rounds):
        order = order_for(opts.contenders, i)
        row: dict[str, Any] = {"jobs": n, "repeat": rep + 1, "order": order, "results": {}}
        shared: tuple[ClusterBed, dict[str, LocalCluster]] | None = None
        try:
            for key in order:
                c = CONTENDERS[key]
                env.say(f"=== compare: {key} with {n} Jobs ===")
                own: tuple[ClusterBed, dict[str, LocalCluster]] | None = None
                try:
                    if opts.shared_bed:
                        shared = shared or await _bed(opts, result, "shared")
                        bed, clusters = shared
                    else:
                        bed, clusters = own = await _bed(opts, result, key)
                    r = await measure(c, n, opts, bed, clusters,
                                      namespace=f"{NAMESPACE}-{key}" if opts.shared_bed else NAMESPACE)
                except Exception as exc:  # keep the other contenders' results
                    env.say(f"{key} n={n} FAILED: {type(exc).__name__}: {exc}")
                    r = {"contender": key, "jobs": n, "error": f"{type(exc).__name__}: {exc}"[:4000]}
                finally:
                    if own is not None:
                        await asyncio.to_thread(own[0].down)
                row["results"][key] = r
                summary_line(r)
        finally:
            if shared is not None:
                await asyncio.to_thread(shared[0].down)
        row["ratios"] = ratios(row["results"])
        result["runs"].append(row)
    result["loadAverage"]["end"] = load()
    result["summary"] = over_repeats(result["runs"])
    return result


#: the headline figures summarised over repeats (a timed-out or failed run counts as missing)
SUMMARISED = ("dispatchesPerSecond", "cpuMsPerJob", "dispatchP99", "statusP99", "statusP99AfterSubmission",
              "managerOwnPerJob", "workersPerJob", "allCompleteSeconds", "longestStallSeconds")


def spread(values: list[float | None]) -> dict[str, float | int | None]:
    """Median, min and max of the known values, and how many runs gave one."""
    s = summarize(values, digits=3)
    return {"median": s["p50"], "min": s["min"], "max": s["max"], "runs": s["count"]}


def over_repeats(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per size: each contender's headline figures and each same-run ratio as median and spread."""
    out: dict[str, Any] = {}
    for n in dict.fromkeys(r["jobs"] for r in runs):
        rows = [r for r in runs if r["jobs"] == n]
        contenders: dict[str, dict[str, Any]] = {}
        for key in dict.fromkeys(k for r in rows for k in r["results"]):
            heads = [headline(r["results"][key]) for r in rows if key in r["results"]]
            good = [h for h in heads if "error" not in h and not h["timedOut"]]
            flat = [{**h, "dispatchP99": h["dispatch"]["p99"], "statusP99": h["status"]["p99"]} for h in good]
            contenders[key] = {m: spread([h[m] for h in flat]) for m in SUMMARISED}
            contenders[key]["failedOrTimedOut"] = len(heads) - len(good)
            by_part = [m for r in rows if key in r["results"]
                       if (m := cpuprofile.ms_per_job_by_part(r["results"][key].get("controller") or {}))]
            if by_part:
                parts = dict.fromkeys(p for m in by_part for p in m)
                contenders[key]["cpuMsPerJobByPart"] = {part: spread([m.get(part, 0.0) for m in by_part])
                                                        for part in parts}
        ratio_keys = dict.fromkeys(k for r in rows for k in r.get("ratios") or {})
        out[str(n)] = {"repeats": len(rows), "contenders": contenders,
                       "ratios": {k: spread([(r.get("ratios") or {}).get(k) for r in rows]) for k in ratio_keys}}
    return out


async def _bed(opts: CompareOptions, result: dict[str, Any], what: str) -> tuple[ClusterBed, dict[str, LocalCluster]]:
    """Fresh clusters (manager without nodes, the workers with kwok nodes); the first also names the server version."""
    bed = ClusterBed(scratch_dir(f"jobmirror-compare-{what}-"))
    try:
        specs = [ClusterSpec("manager", nodes=0)] + [ClusterSpec(w, nodes=opts.worker_nodes) for w in WORKERS]
        clusters = await env.bring_up(bed, specs)
        if "kubernetes" not in result:
            cl = await env.client_for(clusters["manager"])
            result["kubernetes"] = {"serverVersion": await env.server_version(cl)}
            await cl.close()
    except BaseException:
        await asyncio.to_thread(bed.down)
        raise
    return bed, clusters


def dispatch_rate(r: dict[str, Any]) -> tuple[float | None, bool]:
    """Dispatches per second and whether it is partial (a timed-out run: copies so far / their window)."""
    full = r["throughput"]["dispatchedPerSecond"]
    if full is not None:
        return full, False
    tl = r.get("timeline") or {}
    d, sub = tl.get("dispatched") or [], tl.get("submitted") or []
    if len(d) < 2 or not sub or max(d) <= min(sub):
        return None, True
    return round(len(d) / (max(d) - min(sub)), 3), True


def headline(r: dict[str, Any]) -> dict[str, Any]:
    """The figures of one contender's run that go in the table (``None`` when unknown)."""
    if "error" in r:
        return {"error": r["error"][:200]}
    th, lat = r["throughput"], r["latencySeconds"]
    api = r["apiRequests"]
    return {
        "allCompleteSeconds": th["allCompleteSeconds"],
        "completed": r["outcomes"].get("Complete", 0),
        "dispatchesPerSecond": dispatch_rate(r)[0],
        "dispatchesPartial": dispatch_rate(r)[1],
        "dispatch": {q: lat["dispatch"]["watch"][q] for q in ("p50", "p95", "p99")},
        "longestStallSeconds": (th.get("longestDispatchStall") or {}).get("seconds"),
        "status": {q: lat["statusPropagation"]["watch"][q] for q in ("p50", "p95", "p99")},
        # older results files have no split: unknown there
        "statusP99AfterSubmission": ((lat["statusPropagation"].get("bySubmission") or {}).get("afterSubmission")
                                     or {}).get("p99"),
        "managerPerJob": api["manager"]["perJobExcludingIdle"],
        "managerOwnPerJob": (api.get("managerOwnCalls") or {}).get("total"),
        "workersPerJob": api["workersCombined"]["perJobExcludingIdle"],
        "cpuSeconds": r["controller"]["cpuSecondsWorkload"],
        "cpuMsPerJob": round(1000 * r["controller"]["cpuSecondsPerJob"], 2),
        "peakRssMiB": r["controller"]["peakRssMiB"],
        "timedOut": r["timedOut"],
    }


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """Ratios from the same run: jobmirror's dispatch rate against the floor, the limit and MultiKueue."""
    def rate(k: str) -> float | None:
        r = results.get(k) or {}
        return None if "error" in r or not r else dispatch_rate(r)[0]

    def div(a: float | None, b: float | None) -> float | None:
        return None if a is None or not b else round(a / b, 2)

    return {
        "jobmirrorOverFloor": div(rate("jobmirror"), rate("floor")),
        "jobmirrorOverBare": div(rate("jobmirror"), rate("bare")),
        "floorOverBare": div(rate("floor"), rate("bare")),
        "jobmirrorOverMultikueue": div(rate("jobmirror"), rate("multikueue")),
        "jobmirror5qpsOverMultikueue": div(rate("jobmirror-5qps"), rate("multikueue")),
        "jobmirrorOverMultikueueEqual": div(rate("jobmirror"), rate("multikueue-equal")),
        "jobmirrorOverMultikueuePatched": div(rate("jobmirror"), rate("multikueue-patched")),
        "leastLoadedOverFloor": div(rate("jobmirror-leastloaded"), rate("floor")),
        "floorContractOverFloor": div(rate("jobmirror-floor-contract"), rate("floor")),
    }


def markdown_table(result: dict[str, Any]) -> str:
    """The README's side-by-side table of one compare run."""
    lines = ["| Jobs | contender | all Complete (s) | dispatches/s | dispatch p50/p95/p99 (s) | "
             "status p50/p95/p99 (s) | API/Job manager · workers | own manager calls/Job | CPU s (ms/Job) | "
             "peak RSS MiB |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def f(x: Any) -> str:
        return "-" if x is None else (f"{x:.2f}" if isinstance(x, float) else str(x))

    for row in result["runs"]:
        for key in result["contenders"]:
            r = row["results"].get(key)
            if r is None:
                continue
            h = headline(r)
            label = result["contenders"][key]["label"]
            if "error" in h:
                lines.append(f"| {row['jobs']} | {label} | failed: {h['error'][:80]} |||||||| ")
                continue
            if h["timedOut"]:
                # Latencies and per-Job costs of an unfinished run cover only the Jobs that got
                # through (the slowest never did): not comparable, so not shown.
                lines.append(
                    f"| {row['jobs']} | {label} | timed out ({h['completed']}/{row['jobs']} Complete) | "
                    f"{f(h['dispatchesPerSecond'])} (partial) | n/a | n/a | n/a | n/a | {f(h['cpuSeconds'])} (n/a) | "
                    f"{f(h['peakRssMiB'])} |")
                continue
            lines.append(
                f"| {row['jobs']} | {label} | {f(h['allCompleteSeconds'])} | {f(h['dispatchesPerSecond'])} | "
                f"{'/'.join(f(h['dispatch'][q]) for q in ('p50', 'p95', 'p99'))} | "
                f"{'/'.join(f(h['status'][q]) for q in ('p50', 'p95', 'p99'))} | "
                f"{f(h['managerPerJob'])} · {f(h['workersPerJob'])} | {f(h['managerOwnPerJob'])} | "
                f"{f(h['cpuSeconds'])} ({f(h['cpuMsPerJob'])}) | {f(h['peakRssMiB'])} |")
    if any(v["repeats"] > 1 for v in (result.get("summary") or {}).values()):
        lines += ["", *repeats_table(result)]
    shown = [(k, label) for k, label in RATIO_LABELS if any((r.get("ratios") or {}).get(k) is not None
                                                            for r in result["runs"])]
    if shown:
        lines += ["", "| Jobs | " + " | ".join(label for _, label in shown) + " |",
                  "|---|" + "---:|" * len(shown)]
        lines += [f"| {r['jobs']} | " + " | ".join(f((r.get("ratios") or {}).get(k)) for k, _ in shown) + " |"
                  for r in result["runs"]]
    return "\n".join(lines)


def repeats_table(result: dict[str, Any]) -> list[str]:
    """Median (min-max) over the repeats of each size, per contender, then the same-run ratios."""
    def m(s: dict[str, Any]) -> str:
        if s["median"] is None:
            return "-"
        return f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})"

    lines = ["| Jobs | contender | runs | dispatches/s | CPU ms/Job | dispatch p99 (s) | status p99 (s) | "
             "status p99 after submission (s) | own manager calls/Job |", "|---|---|---|---|---|---|---|---|---|"]
    for n, size in result["summary"].items():
        for key, c in size["contenders"].items():
            lines.append(f"| {n} | {result['contenders'][key]['label']} | {c['dispatchesPerSecond']['runs']}"
                         f"/{size['repeats']} | {m(c['dispatchesPerSecond'])} | {m(c['cpuMsPerJob'])} | "
                         f"{m(c['dispatchP99'])} | {m(c['statusP99'])} | {m(c['statusP99AfterSubmission'])} | "
                         f"{m(c['managerOwnPerJob'])} |")
    ratio_rows = [(n, k, s) for n, size in result["summary"].items() for k, s in size["ratios"].items()
                  if s["median"] is not None]
    if ratio_rows:
        labels = dict(RATIO_LABELS)
        lines += ["", "| Jobs | same-run ratio | median (min-max) over runs |", "|---|---|---|"]
        lines += [f"| {n} | {labels.get(k, k)} | {m(s)} |" for n, k, s in ratio_rows]
    return lines


#: the same-run ratios of copies created per second the table shows, when both sides ran
RATIO_LABELS = (("jobmirrorOverFloor", "jobmirror ÷ floor"), ("jobmirrorOverBare", "jobmirror ÷ bare"),
                ("floorOverBare", "floor ÷ bare"), ("jobmirrorOverMultikueue", "jobmirror ÷ MultiKueue"),
                ("jobmirror5qpsOverMultikueue", "jobmirror at 5/10 ÷ MultiKueue (both workers 5/10)"),
                ("jobmirrorOverMultikueuePatched", "jobmirror ÷ MultiKueue patched (all 200/400)"),
                ("leastLoadedOverFloor", "jobmirror LeastLoaded ÷ floor"),
                ("floorContractOverFloor", "jobmirror LeastLoaded, no counters ÷ floor"))


def summary_line(r: dict[str, Any]) -> None:
    h = headline(r)
    if "error" in h:
        return
    env.say(f"{r['contender']} n={r['jobs']}: all Complete {h['allCompleteSeconds']} s, {h['dispatchesPerSecond']} "
            f"dispatches/s, dispatch p99 {h['dispatch']['p99']} s, status p99 {h['status']['p99']} s, API/Job "
            f"manager {h['managerPerJob']} (own {h['managerOwnPerJob']}) workers {h['workersPerJob']}, "
            f"CPU {h['cpuSeconds']} s, peak RSS {h['peakRssMiB']} MiB")
