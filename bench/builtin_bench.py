"""Benchmark 2: the builtin Job controller against kube-controller-manager's Job controller.

Each (workload, controller) pair gets a fresh one-cluster bed with kwok nodes: either
kube-controller-manager with its Job controller on (``ClusterSpec(job_controller=True)``)
or with it off plus ``python -m builtin_controller.cli`` as a subprocess. Both controllers
get the same client QPS/burst and the same number of concurrent Job syncs. The pairs
run one at a time, alternating which controller goes first (ABBA) so a change in the
machine's background load does not always favour the same side.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import env, kubetime, procstat, promtext, stats
from bench.machine import load
from bench.mirror_bench import render_profile
from bench.workload import Submission, job_manifest, submit
from clusterbed.cluster import ClusterBed, ClusterSpec, scratch_dir
from kruntime.client import ApiError
from kruntime.informer import Informer
from kruntime.resources import EVENTS, JOBS, Obj
from testkit.waiting import ensure_namespace

NAMESPACE = "bench"
CONTROLLERS = ("kcm", "builtin")


@dataclass
class BuiltinOptions:
    out: Path
    jobs: int = 200
    pods_per_job: int = 10
    indexed_completions: int = 1000
    indexed_parallelism: int = 100
    qps: float = 100.0
    burst: int = 200
    syncs: int = 5
    nodes: int = 20
    pod_duration: str = "1s"
    create_concurrency: int = 50
    timeout: float = 600.0
    idle_window: float = 3.0
    profile: bool = False


@dataclass
class Workload:
    name: str
    description: str
    manifests: list[Obj]
    pods: int


def workloads(opts: BuiltinOptions, run_id: str) -> list[Workload]:
    out = []
    if opts.jobs > 0 and opts.pods_per_job > 0:
        out.append(Workload(
            "many-jobs", f"{opts.jobs} Jobs x {opts.pods_per_job} pods (completions = parallelism = "
                         f"{opts.pods_per_job}, NonIndexed)",
            [job_manifest(f"job-{i:04d}", run_id, completions=opts.pods_per_job, parallelism=opts.pods_per_job,
                          pod_duration=opts.pod_duration) for i in range(opts.jobs)],
            opts.jobs * opts.pods_per_job))
    if opts.indexed_completions > 0:
        out.append(Workload(
            "indexed", f"1 Indexed Job, completions {opts.indexed_completions}, parallelism "
                       f"{opts.indexed_parallelism}",
            [job_manifest("indexed", run_id, completions=opts.indexed_completions,
                          parallelism=opts.indexed_parallelism, indexed=True, pod_duration=opts.pod_duration)],
            opts.indexed_completions))
    return out


@dataclass
class JobTrack:
    seen: dict[str, float] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)
    outcome: dict[str, str] = field(default_factory=dict)
    succeeded: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    progress: list[tuple[float, int]] = field(default_factory=list)  # (time, total succeeded pods)
    total_succeeded: int = 0

    def on_job(self, etype: str, old: Obj | None, new: Obj) -> None:
        if etype == "DELETED":
            return
        now = time.time()
        name = new["metadata"]["name"]
        self.seen.setdefault(name, now)
        st = new.get("status") or {}
        s = int(st.get("succeeded") or 0)
        prev = self.succeeded.get(name, 0)
        if s != prev:
            self.total_succeeded += s - prev
            self.succeeded[name] = s
            self.progress.append((now, self.total_succeeded))
        self.failed[name] = int(st.get("failed") or 0)
        if name not in self.done:
            oc = kubetime.terminal_condition(new)
            if oc:
                self.done[name] = now
                self.outcome[name] = oc


def _client(before: list[promtext.Sample] | None, after: list[promtext.Sample] | None, name: str, by: tuple[str, ...],
            pods: int) -> dict[str, Any] | None:
    if before is None or after is None:
        return None
    d = promtext.counter_delta(before, after, name, by)
    total = sum(d.values())
    return {"metric": name, "total": int(total), "perPod": round(total / pods, 3),
            "by": {"/".join(k): int(v) for k, v in sorted(d.items())}}


async def run_one(wl: Workload, kind: str, opts: BuiltinOptions, run_id: str) -> dict[str, Any]:
    from bench.machine import git_info

    # The tree changes while benchmarks run: record the revision this controller started from.
    res: dict[str, Any] = {"controller": kind, "loadAverage": {"start": load()}, "git": git_info()}
    extra: tuple[str, ...] = ()
    if kind == "kcm":
        extra = (f"kube-controller-manager=kube-api-qps={opts.qps:g}",
                 f"kube-controller-manager=kube-api-burst={opts.burst}",
                 f"kube-controller-manager=concurrent-job-syncs={opts.syncs}")
    spec = ClusterSpec(f"{kind}-jobs", job_controller=(kind == "kcm"), nodes=opts.nodes, extra_args=extra)
    bed = ClusterBed(scratch_dir("jobmirror-bench-"))
    ctrl: env.ControllerProcess | None = None
    tasks: list[asyncio.Task[None]] = []
    client = None
    session: Path | None = None
    try:
        t = time.time()
        cluster = (await env.bring_up(bed, [spec]))[spec.name]
        res["clusterBringUpSeconds"] = round(time.time() - t, 1)
        kcm_pid = cluster.pid("kube-controller-manager")
        assert kcm_pid is not None
        kcm_argv = procstat.cmdline(kcm_pid)
        res["kcmFlags"] = {f: procstat.flag_value(kcm_argv, f) for f in
                           ("kube-api-qps", "kube-api-burst", "concurrent-job-syncs", "controllers")}
        client = await env.client_for(cluster)
        res["serverVersion"] = await env.server_version(client)
        await ensure_namespace(client, NAMESPACE)
        if kind == "builtin":
            port = env.free_port()
            logs = opts.out / "logs"
            args = ["--kubeconfig", str(cluster.kubeconfig), "--metrics-address", f"127.0.0.1:{port}",
                    "--qps", f"{opts.qps:g}", "--burst", str(opts.burst), "--workers", str(opts.syncs),
                    "--log-level", "INFO"]
            if opts.profile:
                session = Path(tempfile.mkdtemp(prefix="jobmirror-prof-")) / f"builtin-{wl.name}.pyisession"
                argv = [sys.executable, "-m", "pyinstrument", "-r", "pyisession", "-o", str(session),
                        "-m", "builtin_controller.cli", *args]
            else:
                argv = [sys.executable, "-m", "builtin_controller.cli", *args]
            ctrl = env.ControllerProcess(f"builtin-{wl.name}", argv, logs / f"builtin-{wl.name}.log", port)
            ctrl.start()
            await ctrl.wait_ready(90)
            res["controllerFlags"] = {"qps": opts.qps, "burst": opts.burst, "workers": opts.syncs}
        pid = ctrl.pid if ctrl else kcm_pid
        res["measuredProcess"] = ("python -m builtin_controller.cli" if ctrl else
                                  "the whole kube-controller-manager process (all its controllers, not only Jobs)")

        track = JobTrack()
        inf = Informer(client, JOBS, namespace=NAMESPACE)
        inf.add_handler(track.on_job)
        tasks.append(asyncio.create_task(inf.run()))
        await inf.wait_synced(30)

        kcm_url = env.kcm_metrics_url(cluster)
        idle0 = await env.apiserver_metrics(client)
        t_idle = time.time()
        await asyncio.sleep(opts.idle_window)
        before = await env.apiserver_metrics(client)
        idle_rate = max(0.0, promtext.total(before, "apiserver_request_total")
                        - promtext.total(idle0, "apiserver_request_total")) / (time.time() - t_idle)
        kcm_before = await env.http_metrics(kcm_url) if kcm_url else None
        ctrl_before = await ctrl.metrics() if ctrl else None
        cpu_before = procstat.sample(pid)

        sampler = env.Sampler({"controller": pid})
        sub = Submission()
        rates = (env.RequestRateTimeline(f"http://127.0.0.1:{ctrl.metrics_port}/metrics",
                                         "jobmirror_runtime_api_requests_total") if ctrl else
                 env.RequestRateTimeline(kcm_url, "rest_client_requests_total") if kcm_url else None)
        t0 = time.time()
        sampler.start(t0)
        if rates is not None:
            rates.start(t0)
        n_jobs = len(wl.manifests)

        def progress() -> str:
            row = sampler.rows[-1] if sampler.rows else {}
            return (f"{wl.name}/{kind} t={time.time() - t0:5.1f}s Jobs created {len(sub.acked)}/{n_jobs} · "
                    f"complete {len(track.done)}/{n_jobs} · pods succeeded {track.total_succeeded}/{wl.pods} · "
                    f"controller {sampler.cpu_percent('controller') or 0:.0f}% CPU "
                    f"{(row.get('controller') or {}).get('rssMiB', '?')} MiB · load {row.get('load1', '?')}")

        with env.Progress(progress):
            await submit(client, NAMESPACE, wl.manifests, opts.create_concurrency, sub)
            done = await env.wait_until(lambda: len(track.done) >= len(sub.acked), opts.timeout - (time.time() - t0),
                                        0.05)
        await asyncio.sleep(2.0)  # trailing finalizer removals and events
        after = await env.apiserver_metrics(client)
        kcm_after = await env.http_metrics(kcm_url) if kcm_url else None
        ctrl_after = await ctrl.metrics() if ctrl else None
        cpu_after = procstat.sample(pid)
        t_after = time.time()
        await sampler.stop()
        if rates is not None:
            await rates.stop()
            res["controllerRequestsTimeline"] = rates.rows
        try:
            evs, _ = await client.list_all(EVENTS, NAMESPACE)
            reasons: dict[str, int] = {}
            for ev in evs:
                who = (ev.get("source") or {}).get("component") or ev.get("reportingComponent") or "?"
                r = f"{who}/{ev.get('reason')}"
                reasons[r] = reasons.get(r, 0) + 1
            res["eventsInNamespaceAtEnd"] = dict(sorted(reasons.items(), key=lambda kv: -kv[1]))
        except ApiError as exc:
            res["eventsInNamespaceAtEnd"] = {"error": str(exc)}
        if ctrl is not None and not ctrl.alive():
            res["controllerDied"] = True

        secs = max(track.done.values()) - t0 if done and track.done else None
        pods_ok = sum(track.succeeded.values())
        res.update({
            "timedOut": not done,
            "submission": sub.summary(opts.create_concurrency),
            "completionSeconds": None if secs is None else round(secs, 3),
            "podsPerSecond": None if secs is None else round(wl.pods / secs, 1),
            "outcomes": {oc: sum(1 for v in track.outcome.values() if v == oc) for oc in set(track.outcome.values())},
            "podsSucceeded": pods_ok,
            "podsFailed": sum(track.failed.values()),
            "jobLatencySeconds": stats.summarize([v - track.seen[k] for k, v in track.done.items() if k in track.seen]),
            "apiRequests": {
                "window": "first create → last Job Complete + 2 s",
                "windowSeconds": round(t_after - t0, 2),
                "server": promtext.apiserver_requests(before, after, idle_rate, t_after - t0, wl.pods, "Pod"),
                "note": "all clients of the API server: the Job controller, kube-scheduler, kwok (pod status), the "
                        "garbage collector and this benchmark (its creates and watch) — the same set on both sides",
                "kcmClientSide": _client(kcm_before, kcm_after, "rest_client_requests_total", ("method", "code"),
                                         wl.pods),
                "builtinClientSide": _client(ctrl_before, ctrl_after, "jobmirror_runtime_api_requests_total",
                                             ("verb", "code"), wl.pods),
            },
            "progress": [(round(tp - t0, 3), v) for tp, v in track.progress],
            "samplesTimeline": sampler.rows,
            "loadAverage": {**res["loadAverage"], "end": load(), "max1mDuringRun": sampler.max_load()},
        })
        if cpu_before and cpu_after:
            used = cpu_after.cpu_seconds - cpu_before.cpu_seconds
            res["process"] = {
                "cpuSeconds": round(used, 2),
                "cpuSecondsPerPod": round(used / wl.pods, 5),
                "cpuPercentMean": round(100 * used / (t_after - t0), 1),
                "peakRssMiB": env.mib(cpu_after.hwm_kib),
                "rssAtEndMiB": env.mib(cpu_after.rss_kib),
                "runqueueWaitSeconds": None if cpu_after.runqueue_wait_seconds is None
                or cpu_before.runqueue_wait_seconds is None
                else round(cpu_after.runqueue_wait_seconds - cpu_before.runqueue_wait_seconds, 2),
                "profiled": bool(ctrl and opts.profile),
            }
    finally:
        if ctrl is not None:
            res["exitCode"] = await ctrl.stop()
            res["log"] = ctrl.log_summary()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if client is not None:
            await client.close()
        await asyncio.to_thread(bed.down)
    if session is not None and session.exists():
        res["profile"] = render_profile(session, opts.out / f"profile-builtin-{wl.name}")
    return res


def builtin_usable() -> str | None:
    """``None`` when ``python -m builtin_controller.cli --help`` works, else why not."""
    import subprocess

    from bench.machine import REPO

    p = subprocess.run([sys.executable, "-m", "builtin_controller.cli", "--help"], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0 or "--qps" not in p.stdout:
        return f"builtin_controller.cli --help exited {p.returncode}: {(p.stderr or p.stdout)[-800:]}"
    return None


async def run(opts: BuiltinOptions) -> dict[str, Any]:
    from bench.machine import git_info, machine_info, now_iso

    run_id = uuid.uuid4().hex[:8]
    result: dict[str, Any] = {
        "benchmark": "builtin-vs-kcm",
        "date": now_iso(),
        "machine": machine_info(),
        "git": git_info(),
        "loadAverage": {"start": load()},
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()},
        "workloads": {},
    }
    problem = builtin_usable()
    if problem:
        result["builtinUnavailable"] = problem
        env.say(f"builtin controller not usable: {problem}")
    for i, wl in enumerate(workloads(opts, run_id)):
        order = CONTROLLERS if i % 2 == 0 else tuple(reversed(CONTROLLERS))
        entry: dict[str, Any] = {"description": wl.description, "pods": wl.pods, "order": list(order)}
        for kind in order:
            if kind == "builtin" and problem:
                entry[kind] = {"error": problem}
                continue
            env.say(f"=== builtin-vs-kcm: {wl.name} on {kind} ===")
            try:
                entry[kind] = await run_one(wl, kind, opts, run_id)
            except Exception as exc:
                env.say(f"{wl.name}/{kind} FAILED: {type(exc).__name__}: {exc}")
                entry[kind] = {"error": f"{type(exc).__name__}: {exc}"[:4000]}
            if "kubernetes" not in result and entry[kind].get("serverVersion"):
                result["kubernetes"] = {"serverVersion": entry[kind]["serverVersion"]}
        entry["ratios"] = ratios(entry)
        result["workloads"][wl.name] = entry
        summary_line(wl.name, entry)
    result["loadAverage"]["end"] = load()
    return result


def ratios(entry: dict[str, Any]) -> dict[str, Any]:
    k, b = entry.get("kcm") or {}, entry.get("builtin") or {}

    def get(d: dict[str, Any], *path: str) -> Any:
        for p in path:
            if not isinstance(d, dict):
                return None
            d = d.get(p)  # type: ignore[assignment]
        return d

    def r(*path: str) -> float | None:
        v = stats.ratio(get(b, *path), get(k, *path))
        return None if v is None else round(v, 3)

    return {
        "meaning": "builtin / kube-controller-manager (> 1: the builtin controller is slower / makes more calls)",
        "completionTime": r("completionSeconds"),
        "apiCallsPerPod": r("apiRequests", "server", "perPod"),
        "apiCallsPerPodExcludingIdle": r("apiRequests", "server", "perPodExcludingIdle"),
        "controllerClientCallsPerPod": stats.ratio(get(b, "apiRequests", "builtinClientSide", "perPod"),
                                                   get(k, "apiRequests", "kcmClientSide", "perPod")),
        "controllerClientCallsNote": "builtin's own client vs the whole kube-controller-manager's client",
    }


def summary_line(name: str, entry: dict[str, Any]) -> None:
    parts = []
    for kind in CONTROLLERS:
        d = entry.get(kind) or {}
        if "error" in d:
            parts.append(f"{kind}: ERROR")
            continue
        proc = d.get("process") or {}
        parts.append(f"{kind}: {d.get('completionSeconds')}s, {get_api(d)} API calls/pod, CPU {proc.get('cpuSeconds')}s"
                     f", peak RSS {proc.get('peakRssMiB')} MiB")
    rt = entry.get("ratios") or {}
    env.say(f"{name}: " + " | ".join(parts)
            + f" | builtin/kcm: time x{rt.get('completionTime')}, API calls x{rt.get('apiCallsPerPod')}")


def get_api(d: dict[str, Any]) -> Any:
    with contextlib.suppress(KeyError, TypeError):
        return d["apiRequests"]["server"]["perPod"]
    return None
