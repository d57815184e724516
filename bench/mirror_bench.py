"""Benchmark 1: the mirror controller on a manager + 2 kwok workers.

For each size N: bring up fresh clusters, start the controller as a subprocess, create N
one-pod Jobs in the manager as fast as it accepts them, and time every Job from both
sides — by the objects' own timestamps (second granularity) and by watches on the
manager and the workers that record when this process *received* each change.
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

import yaml

from bench import env, kubetime, procstat, promtext, stats
from bench.machine import load
from bench.workload import Submission, job_manifest, submit
from clusterbed.cluster import ClusterBed, ClusterSpec, LocalCluster, scratch_dir
from kruntime.client import ClusterClient
from kruntime.informer import Informer
from kruntime.resources import JOBS, Obj
from mirror.naming import DEFAULT_CONTROLLER_NAME, FIELD_MANAGER, FINALIZER, LABEL_ORIGIN
from testkit.waiting import ensure_namespace

NAMESPACE = "bench"
ORIGIN = "bench"
#: where --unclaimed Jobs go: a namespace the controller watches (no allow-list) but claims nothing in
UNCLAIMED_NAMESPACE = "bench-unclaimed"
UNCLAIMED_MANAGED_BY = "example.com/not-jobmirror"
WORKERS = ("worker-1", "worker-2")


@dataclass
class MirrorOptions:
    sizes: list[int]
    out: Path
    worker_nodes: int = 4
    pod_duration: str = "1s"
    create_concurrency: int = 50
    timeout: float | None = None  # per size; None = 60 s + 0.3 s per Job
    cleanup_timeout: float = 120.0
    idle_window: float = 5.0
    qps: float | None = None  # controller client limits; None = the config defaults
    burst: int | None = None
    reconcile_workers: int | None = None
    #: Jobs in the manager that the controller must not claim (another managedBy): its memory
    #: must follow the claimed Jobs, not these (issue 11 item 10)
    unclaimed: int = 0
    profile: bool = False
    keep_logs: bool = True


@dataclass
class JobTimes:
    """Per-Job instants, POSIX seconds. ``*_seen``: local receive time of a watch event."""

    mgr_created: float | None = None  # manager Job creationTimestamp (1 s granularity)
    mgr_seen: float | None = None
    remote_created: float | None = None  # remote copy creationTimestamp (1 s granularity)
    remote_seen: float | None = None
    worker: str | None = None
    remote_done_seen: float | None = None
    remote_status_written: float | None = None  # worker managedFields status time (1 s)
    remote_status_manager: str | None = None
    remote_outcome: str | None = None
    mgr_done_seen: float | None = None
    mgr_status_written: float | None = None  # manager managedFields time, manager "jobmirror" (1 s)
    mgr_outcome: str | None = None
    mgr_released_seen: float | None = None  # our finalizer removed after finishing
    remote_deleted_seen: float | None = None
    remote_present: bool = False


@dataclass
class Tracker:
    jobs: dict[str, JobTimes] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {
        "seen": 0, "dispatched": 0, "workerDone": 0, "managerDone": 0, "released": 0, "remoteDeleted": 0})
    unexpected: list[str] = field(default_factory=list)
    premature_deletes: int = 0  # copies deleted while their manager Job had not finished
    recreated: int = 0  # copies created again after such a deletion
    #: whose status-subresource managedFields entry times the manager-side status write
    #: (``None``: any manager's; ``bench compare`` measures other controllers too)
    status_manager: str | None = FIELD_MANAGER

    def _job(self, name: str) -> JobTimes:
        jt = self.jobs.get(name)
        if jt is None:
            jt = self.jobs[name] = JobTimes()
        return jt

    def on_manager(self, etype: str, old: Obj | None, new: Obj) -> None:
        now = time.time()
        jt = self._job(new["metadata"]["name"])
        if jt.mgr_seen is None:
            jt.mgr_seen = now
            jt.mgr_created = kubetime.creation_time(new)
            self.counts["seen"] += 1
        if jt.mgr_done_seen is None:
            outcome = kubetime.terminal_condition(new)
            if outcome:
                jt.mgr_done_seen = now
                jt.mgr_outcome = outcome
                jt.mgr_status_written = kubetime.managed_fields_time(new, manager=self.status_manager)
                self.counts["managerDone"] += 1
        if (jt.mgr_done_seen is not None and jt.mgr_released_seen is None
                and FINALIZER not in (new["metadata"].get("finalizers") or [])):
            jt.mgr_released_seen = now
            self.counts["released"] += 1

    def worker_handler(self, worker: str) -> Any:
        def handle(etype: str, old: Obj | None, new: Obj) -> None:
            now = time.time()
            jt = self._job(new["metadata"]["name"])
            name = new["metadata"]["name"]
            if etype == "DELETED":
                if jt.mgr_done_seen is None and kubetime.terminal_condition(new) is None:
                    # Deleted while the manager Job still runs: not cleanup (a re-dispatch or a bug).
                    self.premature_deletes += 1
                    self.unexpected.append(f"{name}: unfinished copy deleted on {worker} "
                                           f"{now - (jt.remote_seen or now):.2f}s after it appeared")
                    jt.remote_present = False
                    return
                if jt.remote_deleted_seen is None:
                    jt.remote_deleted_seen = now
                    self.counts["remoteDeleted"] += 1
                return
            if etype == "ADDED" and jt.remote_seen is not None and not jt.remote_present:
                self.recreated += 1
                self.unexpected.append(f"{name}: copy created again on {worker} "
                                       f"{now - jt.remote_seen:.2f}s after the first one")
            jt.remote_present = True
            if jt.remote_seen is None:
                jt.remote_seen = now
                jt.remote_created = kubetime.creation_time(new)
                jt.worker = worker
                self.counts["dispatched"] += 1
            elif jt.worker != worker:
                self.unexpected.append(f"{name}: copies on {jt.worker} and {worker}")
            if jt.remote_done_seen is None:
                outcome = kubetime.terminal_condition(new)
                if outcome:
                    jt.remote_done_seen = now
                    jt.remote_outcome = outcome
                    jt.remote_status_written = kubetime.managed_fields_time(new)
                    entries = [m for m in new["metadata"].get("managedFields") or []
                               if m.get("subresource") == "status"]
                    jt.remote_status_manager = ",".join(sorted({str(m.get("manager")) for m in entries}))
                    self.counts["workerDone"] += 1

        return handle


def _wait(a: procstat.ProcSample | None, b: procstat.ProcSample | None) -> float | None:
    if a is None or b is None or a.runqueue_wait_seconds is None or b.runqueue_wait_seconds is None:
        return None
    return round(b.runqueue_wait_seconds - a.runqueue_wait_seconds, 2)


def status_by_submission(latencies: list[float | None], finished_seen: list[float | None],
                         submitting_until: float) -> dict[str, Any]:
    """Status propagation split by whether the worker's copy finished while Jobs were still being
    submitted: then the manager's API server also answers the submitter's burst of creates (see
    createCall), and every write of the controller's waits behind it."""
    while_submitting = [lat for lat, at in zip(latencies, finished_seen, strict=True)
                        if lat is not None and at is not None and at <= submitting_until]
    after = [lat for lat, at in zip(latencies, finished_seen, strict=True)
             if lat is not None and at is not None and at > submitting_until]
    return {"whileSubmitting": stats.summarize(while_submitting), "afterSubmission": stats.summarize(after),
            "note": "watch latencies of the Jobs whose worker copy was seen Complete before/after the last "
                    "manager create was acknowledged"}


def _diffs(pairs: list[tuple[float | None, float | None]]) -> list[float | None]:
    return [None if a is None or b is None else b - a for a, b in pairs]


def _client_side(before: list[promtext.Sample] | None, after: list[promtext.Sample] | None,
                 jobs: int) -> dict[str, Any] | None:
    if before is None or after is None:
        return None
    by = promtext.counter_delta(before, after, "jobmirror_runtime_api_requests_total", ("cluster", "verb", "code"))
    out: dict[str, Any] = {}
    for (cluster, verb, code), v in sorted(by.items()):
        c = out.setdefault(cluster, {"total": 0, "perJob": 0.0, "byVerbCode": {}})
        c["total"] += int(v)
        c["byVerbCode"][f"{verb} {code}"] = int(v)
    for c in out.values():
        c["perJob"] = round(c["total"] / jobs, 2)
    workers_total = sum(c["total"] for k, c in out.items() if k != "manager")
    out["workersCombined"] = {"total": workers_total, "perJob": round(workers_total / jobs, 2)}
    return out


def _controller_counters(before: list[promtext.Sample] | None, after: list[promtext.Sample] | None) -> dict[str, Any]:
    if before is None or after is None:
        return {}

    def delta(name: str, by: tuple[str, ...]) -> dict[str, int]:
        return {"/".join(k) or "total": int(v) for k, v in promtext.counter_delta(before, after, name, by).items()}

    sync_count = promtext.total(after, "jobmirror_sync_duration_seconds_count") - promtext.total(
        before, "jobmirror_sync_duration_seconds_count")
    sync_sum = promtext.total(after, "jobmirror_sync_duration_seconds_sum") - promtext.total(
        before, "jobmirror_sync_duration_seconds_sum")
    return {
        "dispatches": delta("jobmirror_dispatches_total", ("worker",)),
        "statusWrites": delta("jobmirror_status_writes_total", ("result",)),
        "remoteDeletes": delta("jobmirror_remote_deletes_total", ("worker", "reason")),
        "reconcileErrors": delta("jobmirror_reconcile_errors_total", ("reason",)),
        "queueRetries": delta("jobmirror_runtime_queue_retries_total", ("queue",)),
        "watchRestarts": delta("jobmirror_runtime_watch_restarts_total", ("cluster", "reason")),
        "relists": delta("jobmirror_runtime_relists_total", ("cluster",)),
        "reconciles": int(sync_count),
        "reconcileSecondsMean": round(sync_sum / sync_count, 4) if sync_count else None,
        # what queued each pass first: manager-/copy- events by type, copy-batched, after (a timer a
        # pass left, the resync among them), retry, room, stuck
        "passesByTrigger": delta("jobmirror_runtime_queue_passes_total", ("why",)),
        # where a status change waits: in the work queue (urgent: a decided or finished copy), and from
        # the copy's change arriving in the worker watch to the manager write (the controller's own view)
        "queueWaitSeconds": {("urgent" if urgent == "true" else "normal"): _mean_and_p99(
            before, after, "jobmirror_runtime_queue_wait_seconds", {"urgent": urgent}) for urgent in ("true", "false")},
        "statusPropagationSeconds": _mean_and_p99(before, after, "jobmirror_status_propagation_seconds"),
    }


def _mean_and_p99(before: list[promtext.Sample], after: list[promtext.Sample], histogram: str,
                  where: dict[str, str] | None = None) -> dict[str, float | None]:
    """A histogram's mean and 99th percentile between two scrapes (None where nothing was observed)."""
    return {"mean": stats.rounded(promtext.mean_from_histogram(before, after, histogram, where=where).get(()), 4),
            "p99": stats.rounded(promtext.quantile_from_histogram(before, after, histogram, 0.99, where), 4)}


class MetricsTimeline(env.Periodic):
    """Scrape the controller's /metrics every ``interval`` s: request counts, queue depth, reconciles."""

    def __init__(self, ctrl: env.ControllerProcess, interval: float = 2.0) -> None:
        super().__init__(interval)
        self.ctrl = ctrl
        self.rows: list[dict[str, Any]] = []

    async def tick(self) -> None:
        m = await self.ctrl.metrics()
        if m is not None:
            req = promtext.grouped(m, "jobmirror_runtime_api_requests_total", ("cluster",))
            self.rows.append({
                "t": self.since_start(),
                "requests": {k[0]: int(v) for k, v in req.items()},
                "queueDepth": promtext.total(m, "jobmirror_runtime_queue_depth", {"queue": "mirror"}),
                # a dispatch pause while Jobs wait for room is placement working, not a stall
                "waitingForRoom": promtext.total(m, "jobmirror_jobs_waiting_for_room"),
                "podsPending": promtext.total(m, "jobmirror_worker_pods_pending"),  # not bound yet, all workers
                "reconciles": int(promtext.total(m, "jobmirror_sync_duration_seconds_count")),
                "queueRetries": int(promtext.total(m, "jobmirror_runtime_queue_retries_total")),
                "statusWritesOk": int(promtext.total(m, "jobmirror_status_writes_total", {"result": "ok"})),
            })


async def _worker_up(ctrl: env.ControllerProcess, workers: tuple[str, ...] = WORKERS, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = await ctrl.metrics()
        if m is not None and all(promtext.total(m, "jobmirror_worker_up", {"worker": w}) == 1 for w in workers):
            return True
        await asyncio.sleep(0.3)
    return False


def controller_argv(config: Path, profile_session: Path | None, *,
                    report_stalls_over: float | None = None) -> list[str]:
    """The controller's command line: JSON logs, under pyinstrument with ``profile_session``, and
    stalls of the loop logged from ``report_stalls_over`` seconds (the controller's default: 1 s)."""
    flags = ["--log-format", "json", *(("--report-stalls-over", str(report_stalls_over)) if report_stalls_over else ())]
    command = ["-m", "mirror.cli", *flags, "run", "--config", str(config)]
    if profile_session is None:
        return [sys.executable, *command]
    return [sys.executable, "-m", "pyinstrument", "-r", "pyisession", "-o", str(profile_session), *command]


async def _submit_unclaimed(mgr: ClusterClient, run_id: str, opts: MirrorOptions) -> dict[str, Any]:
    """Fill the manager with Jobs of another controller before ours starts (its list sees them all).

    They carry a foreign ``managedBy``, so no Job controller runs them: only the mirror's
    memory and its informer's decoding are measured, not pods.
    """
    await ensure_namespace(mgr, UNCLAIMED_NAMESPACE)
    jobs = [job_manifest(f"other-{i:06d}", run_id, managed_by=UNCLAIMED_MANAGED_BY, pod_duration=opts.pod_duration)
            for i in range(opts.unclaimed)]
    env.say(f"creating {len(jobs)} unclaimed Jobs in {UNCLAIMED_NAMESPACE}")
    t = time.time()
    sub = await submit(mgr, UNCLAIMED_NAMESPACE, jobs, opts.create_concurrency)
    if sub.errors:
        raise RuntimeError(f"{len(sub.errors)} unclaimed Jobs not created, e.g. {sub.errors[0]}")
    return {"jobs": len(sub.acked), "namespace": UNCLAIMED_NAMESPACE, "managedBy": UNCLAIMED_MANAGED_BY,
            "createSeconds": round(time.time() - t, 1)}


async def run_size(n: int, opts: MirrorOptions, bed: ClusterBed, clusters: dict[str, LocalCluster]) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:8]
    timeout = opts.timeout or 60 + 0.3 * n
    from bench.machine import git_info

    # The tree changes while benchmarks run: record the revision this controller started from.
    res: dict[str, Any] = {"jobs": n, "runId": run_id, "loadAverage": {"start": load()}, "git": git_info()}
    mgr = await env.client_for(clusters["manager"])
    wcl = {w: await env.client_for(clusters[w]) for w in WORKERS}
    clients: list[ClusterClient] = [mgr, *wcl.values()]
    for c in clients:
        await ensure_namespace(c, NAMESPACE)

    port = env.free_port()
    cfg: dict[str, Any] = {
        "controllerName": DEFAULT_CONTROLLER_NAME,
        "origin": ORIGIN,
        "managerKubeconfig": str(clusters["manager"].kubeconfig),
        "workers": [{"name": w, "kubeconfig": str(clusters[w].kubeconfig)} for w in WORKERS],
        "metricsAddress": f"127.0.0.1:{port}",
    }
    if opts.qps is not None:
        cfg["qps"] = opts.qps
        for w in cfg["workers"]:
            w["qps"] = opts.qps
    if opts.burst is not None:
        cfg["burst"] = opts.burst
        for w in cfg["workers"]:
            w["burst"] = opts.burst
    if opts.reconcile_workers is not None:
        cfg["workersConcurrency"] = opts.reconcile_workers
    cfg_path = bed.workdir / f"jobmirror-{n}.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    res["controllerConfig"] = {k: v for k, v in cfg.items() if k not in ("managerKubeconfig", "workers")}
    from mirror.config import load_config

    eff = load_config(cfg_path)
    res["controllerConfig"].update({"qps": eff.qps, "burst": eff.burst, "workerQps": eff.workers[0].qps,
                                    "workerBurst": eff.workers[0].burst, "workersConcurrency": eff.workers_concurrency,
                                    "resyncPeriod": eff.resync_period, "placement": eff.placement.value})
    logs = opts.out / "logs"
    session = Path(tempfile.mkdtemp(prefix="jobmirror-prof-")) / f"mirror-{n}.pyisession" if opts.profile else None
    ctrl = env.ControllerProcess(f"mirror-{n}", controller_argv(cfg_path, session), logs / f"mirror-{n}.log", port)

    if opts.unclaimed:
        res["unclaimed"] = await _submit_unclaimed(mgr, run_id, opts)

    tracker = Tracker()
    informers = [Informer(mgr, JOBS, namespace=NAMESPACE)]
    informers[0].add_handler(tracker.on_manager)
    for w, c in wcl.items():
        inf = Informer(c, JOBS, namespace=NAMESPACE, label_selector=f"{LABEL_ORIGIN}={ORIGIN}")
        inf.add_handler(tracker.worker_handler(w))
        informers.append(inf)
    tasks = [asyncio.create_task(i.run()) for i in informers]
    sampler: env.Sampler | None = None
    try:
        t_start = time.time()
        ctrl.start()
        await ctrl.wait_ready()
        if not await _worker_up(ctrl):
            raise RuntimeError(f"controller never saw both workers healthy:\n{ctrl.log_tail()}")
        startup = ctrl.sample()
        res["controllerStartupSeconds"] = round(time.time() - t_start, 2)
        await asyncio.gather(*(i.wait_synced(30) for i in informers))

        # Idle window: how many requests each API server gets with nothing to do.
        idle0 = {name: await env.apiserver_metrics(c) for name, c in (("manager", mgr), *wcl.items())}
        t_idle = time.time()
        await asyncio.sleep(opts.idle_window)
        before = {name: await env.apiserver_metrics(c) for name, c in (("manager", mgr), *wcl.items())}
        idle_secs = time.time() - t_idle
        idle_rate = {name: promtext.total(before[name], "apiserver_request_total")
                     - promtext.total(idle0[name], "apiserver_request_total") for name in before}
        idle_rate = {k: max(0.0, v) / idle_secs for k, v in idle_rate.items()}
        ctrl_before = await ctrl.metrics()
        cpu_before = ctrl.sample()

        sampler = env.Sampler({"controller": ctrl.pid})
        jobs = [job_manifest(f"job-{i:05d}", run_id, managed_by=DEFAULT_CONTROLLER_NAME,
                             pod_duration=opts.pod_duration) for i in range(n)]
        sub = Submission()
        t0 = time.time()
        sampler.start(t0)
        scraper = MetricsTimeline(ctrl)
        scraper.start(t0)

        def progress() -> str:
            c = tracker.counts
            row = sampler.rows[-1] if sampler and sampler.rows else {}
            cpu = sampler.cpu_percent("controller") if sampler else None
            return (f"mirror n={n} t={time.time() - t0:5.1f}s submitted {len(sub.acked)}/{n} · dispatched "
                    f"{c['dispatched']} · worker-complete {c['workerDone']} · manager-complete {c['managerDone']} · "
                    f"cleaned {c['remoteDeleted']} · ctrl {cpu or 0:.0f}% CPU "
                    f"{(row.get('controller') or {}).get('rssMiB', '?')} MiB · load {row.get('load1', '?')}")

        with env.Progress(progress):
            await submit(mgr, NAMESPACE, jobs, opts.create_concurrency, sub)
            env.say(f"mirror n={n}: {len(sub.acked)} Jobs accepted in {sub.finished - sub.started:.1f}s")
            done = await env.wait_until(lambda: tracker.counts["managerDone"] >= len(sub.acked),
                                        timeout - (time.time() - t0), 0.05)
            t_done = time.time()
            cleaned = await env.wait_until(
                lambda: tracker.counts["remoteDeleted"] >= len(sub.acked) and tracker.counts["released"] >= len(
                    sub.acked), opts.cleanup_timeout, 0.1) if done else False
            t_clean = time.time()
        await asyncio.sleep(1.0)  # let trailing event writes land
        after = {name: await env.apiserver_metrics(c) for name, c in (("manager", mgr), *wcl.items())}
        ctrl_after = await ctrl.metrics()
        cpu_after = ctrl.sample()
        t_after = time.time()
        await sampler.stop()
        await scraper.stop()
        res["controllerMetricsTimeline"] = scraper.rows
        res["queueDepthMax"] = max((row["queueDepth"] for row in scraper.rows), default=None)
        res["loadAverage"]["end"] = load()
        res["loadAverage"]["max1mDuringRun"] = sampler.max_load()
        res["timedOut"] = not done
        res["cleanupTimedOut"] = done and not cleaned
        res["submission"] = sub.summary(opts.create_concurrency)
        res.update(_results(n, tracker, sub, t0, t_done, t_clean))
        measured = t_after - t0
        res["apiRequests"] = {
            "window": "first create → all manager Jobs Complete and every remote copy deleted (+1 s)",
            "windowSeconds": round(measured, 2),
            "manager": promtext.apiserver_requests(before["manager"], after["manager"], idle_rate["manager"],
                                                   measured, n, "Job"),
            "managerNote": f"includes this benchmark's own {n} POST jobs and its watches",
            **{w: promtext.apiserver_requests(before[w], after[w], idle_rate[w], measured, n, "Job") for w in WORKERS},
            "controllerClientSide": _client_side(ctrl_before, ctrl_after, n),
        }
        wsum = sum(res["apiRequests"][w]["total"] for w in WORKERS)
        wnet = sum(res["apiRequests"][w]["perJobExcludingIdle"] for w in WORKERS)
        res["apiRequests"]["workersCombined"] = {"total": wsum, "perJob": round(wsum / n, 2),
                                                 "perJobExcludingIdle": round(wnet, 2)}
        assert cpu_before is not None and cpu_after is not None and startup is not None
        res["controller"] = {
            "pid": ctrl.pid,
            "cpuSecondsStartup": round(startup.cpu_seconds, 2),
            "cpuSecondsWorkload": round(cpu_after.cpu_seconds - cpu_before.cpu_seconds, 2),
            "cpuSecondsPerJob": round((cpu_after.cpu_seconds - cpu_before.cpu_seconds) / n, 4),
            "cpuPercentMeanDuringRun": round(100 * (cpu_after.cpu_seconds - cpu_before.cpu_seconds) / measured, 1),
            "rssAfterStartupMiB": env.mib(startup.rss_kib),
            "peakRssMiB": env.mib(cpu_after.hwm_kib),
            "rssAtEndMiB": env.mib(cpu_after.rss_kib),
            "runqueueWaitSeconds": _wait(cpu_before, cpu_after),
            "runqueueWaitNote": "time the controller's threads were runnable but waiting for a CPU "
                                "(/proc/<pid>/schedstat): the cost of sharing 2 cores with the cluster bed",
            "profiled": opts.profile,
            **_controller_counters(ctrl_before, ctrl_after),
        }
        res["samplesTimeline"] = sampler.rows
    finally:
        if sampler is not None:
            with contextlib.suppress(Exception):
                await sampler.stop()
        rc = await ctrl.stop()
        res.setdefault("controller", {})["exitCode"] = rc
        res["controller"]["log"] = ctrl.log_summary()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in clients:
            await c.close()
    if session is not None and session.exists():
        res["controller"]["profile"] = render_profile(session, opts.out / f"profile-mirror-{n}")
    return res


def render_profile(session: Path, stem: Path) -> dict[str, str]:
    """Render a pyinstrument session next to the results, then delete it (it is ~100 MB).

    ``<stem>.txt``: the call tree of our code (library frames folded in);
    ``<stem>-flat.txt``: the top functions by self time, library code included.
    Both are wall-clock samples of the main thread: on a busy machine that includes time
    the process was runnable but not running.
    """
    import io
    import pstats
    import subprocess

    out: dict[str, str] = {}
    tree = stem.with_suffix(".txt")
    subprocess.run([sys.executable, "-m", "pyinstrument", "--load", str(session), "-r", "text", "-o", str(tree),
                    "--show", "*/kruntime/*", "-p", "processor_options.filter_threshold=0.005", "--no-color"],
                   check=False, capture_output=True)
    if tree.exists():
        out["tree"] = str(tree)
    raw = session.with_suffix(".pstats")
    subprocess.run([sys.executable, "-m", "pyinstrument", "--load", str(session), "-r", "pstats", "-o", str(raw)],
                   check=False, capture_output=True)
    if raw.exists():
        buf = io.StringIO()
        buf.write(f"Top functions by self time (wall-clock seconds of the main thread) from {session.name}\n"
                  "(ncalls are not meaningful in a sampling profile)\n")
        pstats.Stats(str(raw), stream=buf).sort_stats("tottime").print_stats(40)
        flat = stem.parent / f"{stem.name}-flat.txt"
        flat.write_text(buf.getvalue())
        out["flat"] = str(flat)
        raw.unlink()
    session.unlink(missing_ok=True)
    return out


def _results(n: int, tr: Tracker, sub: Submission, t0: float, t_done: float, t_clean: float) -> dict[str, Any]:
    names = sorted(tr.jobs)
    js = [tr.jobs[name] for name in names]
    # Dispatch starts when the manager Job's create was sent: the copy cannot exist before that, so
    # the difference cannot go negative (the manager stream's ADDED could arrive after the copy's).
    disp_watch = _diffs([(sub.sent.get(name), j.remote_seen) for name, j in zip(names, js, strict=True)])
    disp_ts = _diffs([(j.mgr_created, j.remote_created) for j in js])
    stat_watch, stat_raised = stats.not_below_zero(_diffs([(j.remote_done_seen, j.mgr_done_seen) for j in js]))
    stat_mf = _diffs([(j.remote_status_written, j.mgr_status_written) for j in js])
    e2e = _diffs([(j.mgr_seen, j.mgr_done_seen) for j in js])
    remote_run = _diffs([(j.remote_seen, j.remote_done_seen) for j in js])
    created_acked = [sub.acked[k] - sub.sent[k] for k in sub.acked]
    submitting_until = max(sub.acked.values(), default=t0)
    last_dispatched = max((j.remote_seen or 0.0) for j in js) if js else 0.0
    last_done = max((j.mgr_done_seen or 0.0) for j in js) if js else 0.0
    first_seen = min((j.mgr_seen for j in js if j.mgr_seen), default=None)
    done_n = sum(1 for j in js if j.mgr_done_seen)
    dispatched_n = sum(1 for j in js if j.remote_seen)
    all_done = done_n >= n
    all_secs = (last_done - t0) if all_done and last_done else None
    disp_secs = (last_dispatched - t0) if dispatched_n >= n and last_dispatched else None
    disp_window = (last_dispatched - first_seen) if disp_secs and first_seen else None
    outcomes: dict[str, int] = {}
    for j in js:
        outcomes[j.mgr_outcome or "unfinished"] = outcomes.get(j.mgr_outcome or "unfinished", 0) + 1
    placements: dict[str, int] = {}
    for j in js:
        placements[j.worker or "none"] = placements.get(j.worker or "none", 0) + 1
    status_managers = sorted({j.remote_status_manager for j in js if j.remote_status_manager})
    stall = stats.longest_wait_without_progress(list(sub.acked.values()), [j.remote_seen for j in js if j.remote_seen],
                                                end=None if dispatched_n >= n else t_done)

    def ms(v: list[float | None]) -> list[float | None]:
        return [None if x is None else round(x * 1000, 1) for x in v]

    return {
        "outcomes": outcomes,
        "placement": placements,
        "throughput": {
            "allCompleteSeconds": stats.rounded(all_secs, 3),
            "jobsPerSecondEndToEnd": stats.rounded(stats.rate(n, all_secs), 3),
            "allDispatchedSeconds": stats.rounded(disp_secs, 3),
            "dispatchedPerSecond": stats.rounded(stats.rate(n, disp_window), 3),
            "dispatchedPerSecondNote": "remote copies created per second, first manager Job seen → last copy "
                                       "seen (the figure comparable to MultiKueue's workloads/s)",
            "cleanupSeconds": stats.rounded(t_clean - t_done, 3),
            "longestDispatchStall": {
                "seconds": stats.rounded(stall[0], 3) if stall else None,
                "startsAtSeconds": stats.rounded(stall[1] - t0, 3) if stall else None,
                "note": "the longest stretch in which some manager Job had been created and no copy was made "
                        "for any Job (the k-th copy seen matched with the k-th create acknowledged)",
            },
        },
        "latencySeconds": {
            "dispatch": {
                "watch": stats.summarize(disp_watch),
                "objectTimestamps": stats.summarize(disp_ts),
                "note": "watch = local receive time of the remote copy's ADDED event minus the local time the "
                        "manager Job's create was sent (ms resolution, one clock; includes the create call itself, "
                        "see createCall, and the copy's watch delivery; cannot be negative: the copy cannot exist "
                        "before its manager Job's create was sent); objectTimestamps = remote creationTimestamp "
                        "minus manager creationTimestamp (1 s granularity: ±1 s per sample)",
            },
            "statusPropagation": {
                "watch": stats.summarize(stat_watch),
                "managedFields": stats.summarize(stat_mf),
                "watchRaisedToZero": stat_raised,
                "note": "watch = local receive time of Complete on the manager Job minus that on the worker Job, "
                        "raised to 0 where negative (watchRaisedToZero: the worker stream delivered later than the "
                        "whole propagation path did, so the true value lies between 0 and that skew); "
                        "managedFields = manager's status entry time (manager 'jobmirror') minus the worker's "
                        "status entry time (its Job controller) at the write that made each Complete "
                        "(1 s granularity: ±1 s per sample)",
                "workerStatusManagers": status_managers,
                "bySubmission": status_by_submission(stat_watch, [j.remote_done_seen for j in js], submitting_until),
            },
            "endToEnd": {"watch": stats.summarize(e2e),
                         "note": "manager Job seen → manager Job Complete seen (includes the ~1 s pod run)"},
            "workerRun": {"watch": stats.summarize(remote_run),
                          "note": "remote copy seen → remote copy Complete seen: the worker's own Job controller, "
                                  "scheduler and kwok pod (not jobmirror)"},
            "createCall": stats.summarize(created_acked),
        },
        "samples": {
            "unit": "ms",
            "dispatchWatch": ms(disp_watch),
            "dispatchTimestamps": ms(disp_ts),
            "statusWatch": ms(stat_watch),
            "statusManagedFields": ms(stat_mf),
            "endToEnd": ms(e2e),
        },
        "timeline": {
            "t0": t0,
            "submitted": sorted(round(v - t0, 3) for v in sub.acked.values()),
            "dispatched": sorted(round(j.remote_seen - t0, 3) for j in js if j.remote_seen),
            "workerComplete": sorted(round(j.remote_done_seen - t0, 3) for j in js if j.remote_done_seen),
            "managerComplete": sorted(round(j.mgr_done_seen - t0, 3) for j in js if j.mgr_done_seen),
            "remoteDeleted": sorted(round(j.remote_deleted_seen - t0, 3) for j in js if j.remote_deleted_seen),
        },
        "anomalies": {
            "unfinishedCopiesDeleted": tr.premature_deletes,
            "copiesRecreated": tr.recreated,
            "examples": tr.unexpected[:50],
        },
    }


async def run(opts: MirrorOptions) -> dict[str, Any]:
    from bench.machine import git_info, machine_info, now_iso

    result: dict[str, Any] = {
        "benchmark": "mirror",
        "date": now_iso(),
        "machine": machine_info(),
        "git": git_info(),
        "loadAverage": {"start": load()},
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()},
        "runs": [],
    }
    for n in opts.sizes:
        env.say(f"=== mirror benchmark: {n} Jobs ===")
        bed = ClusterBed(scratch_dir("jobmirror-bench-"))
        try:
            specs = [ClusterSpec("manager", nodes=0)] + [ClusterSpec(w, nodes=opts.worker_nodes) for w in WORKERS]
            t = time.time()
            clusters = await env.bring_up(bed, specs)
            bring_up_secs = time.time() - t
            if "kubernetes" not in result:
                c = await env.client_for(clusters["manager"])
                result["kubernetes"] = {"serverVersion": await env.server_version(c),
                                        "clusters": "manager (kcm, no nodes) + 2 workers (kcm Job controller, "
                                                    f"{opts.worker_nodes} kwok nodes each), kwokctl binary runtime"}
                await c.close()
            r = await run_size(n, opts, bed, clusters)
            r["clusterBringUpSeconds"] = round(bring_up_secs, 1)
        except Exception as exc:  # keep the other sizes' results
            env.say(f"mirror n={n} FAILED: {type(exc).__name__}: {exc}")
            r = {"jobs": n, "error": f"{type(exc).__name__}: {exc}"[:4000]}
        finally:
            await asyncio.to_thread(bed.down)
        result["runs"].append(r)
        summary_line(r)
    result["loadAverage"]["end"] = load()
    return result


def summary_line(r: dict[str, Any]) -> None:
    if "error" in r:
        return
    lat = r["latencySeconds"]
    th = r["throughput"]

    def f(x: Any, unit: str = "s") -> str:
        return "n/a" if x is None else f"{x:.3f}{unit}"

    env.say(
        f"mirror n={r['jobs']}: all Complete in {f(th['allCompleteSeconds'])} "
        f"({th['jobsPerSecondEndToEnd'] or 0:.1f} Jobs/s end to end, "
        f"{th['dispatchedPerSecond'] or 0:.1f} dispatches/s); "
        f"dispatch p50/p99 {f(lat['dispatch']['watch']['p50'])}/{f(lat['dispatch']['watch']['p99'])} (watch); "
        f"longest dispatch stall {f(th['longestDispatchStall']['seconds'])}, queue depth max {r.get('queueDepthMax')}; "
        f"status p50/p99 {f(lat['statusPropagation']['watch']['p50'])}/{f(lat['statusPropagation']['watch']['p99'])}"
        f" (watch); API/Job manager {r['apiRequests']['manager']['perJob']} workers "
        f"{r['apiRequests']['workersCombined']['perJob']}; controller CPU {r['controller']['cpuSecondsWorkload']}s, "
        f"peak RSS {r['controller']['peakRssMiB']} MiB")
