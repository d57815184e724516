"""``python -m bench fleet``: the real controller against a fleet larger than the bed — a simulation.

Issue 38 item 4. The workers and the manager are served by :mod:`bench.fleetsim` (fake API servers
over HTTP in a process of their own, with a fake Job controller and kubelet on each worker), so the
controller process — the one a Deployment runs, uvloop and all — is measured alone: its CPU, RSS,
passes and event-loop lag while it

1. *starts*: lists and watches every worker's nodes and pods (``workers`` times ``pods_per_worker``);
2. *fills*: takes ``running`` long Jobs from the manager and dispatches them;
3. holds them while new Jobs arrive at ``rate`` per second (*steady*) and ten times that (*burst*),
   each running ``job_seconds`` on its worker;
4. *fails over*: a second controller process starts against the same fleet and relists it all.

What the figures are not: API-server latencies, admission and etcd are the fake's (immediate), so
dispatch and status times are the controller's own cost, not a cluster's. The JSON says
``"simulation": true`` and names the fake's own CPU and RSS beside the controller's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from bench import env, procstat, promtext
from bench.fleetsim.jobsim import RUN_SECONDS
from bench.machine import git_info, load
from bench.mirror_bench import controller_argv, render_profile
from bench.workload import Submission, job_manifest, submit
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, NAMESPACES, Obj
from mirror.naming import ANNOTATION_CLUSTER, DEFAULT_CONTROLLER_NAME

NAMESPACE = "bench"
ORIGIN = "fleet"
#: the controller's event-loop lag histogram (kruntime.lifecycle.watch_loop_lag)
LOOP_LAG = "jobmirror_event_loop_lag_seconds"
PASSES = "jobmirror_runtime_queue_passes_total"
DISPATCHES = "jobmirror_dispatches_total"
STATUS_PROPAGATION = "jobmirror_status_propagation_seconds"


@dataclass
class FleetOptions:
    out: Path
    workers: int = 50
    pods_per_worker: int = 20_000
    nodes_per_worker: int = 100
    running: int = 20_000
    #: Jobs per second in the steady window (100,000 a day is 1.16/s); the burst window runs 10x
    rate: float = 1.16
    window: float = 120.0
    job_seconds: float = 60.0
    create_concurrency: int = 50
    #: seconds each phase may take before the run is called stuck (start, fill, failover)
    phase_timeout: float = 1800.0
    sample_interval: float = 2.0
    #: run the first controller under pyinstrument (its figures are then not the headline ones)
    profile: bool = False
    #: the controllers log where their loop was in every stall longer than this (None: their 1 s)
    report_stalls_over: float | None = None


# -- pure summaries ------------------------------------------------------------------------------


def stall_reports(log: Path, most: int = 200) -> list[dict[str, str]]:
    """The controller's stall reports (kruntime.stalls) in its JSON log: when, and the report."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        if '"kruntime.stalls"' not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        out.append({"log": log.name, "ts": str(rec.get("ts", "")), "msg": str(rec.get("msg", ""))[:1000]})
    return out[:most]


def lag_max_bound(before: Sequence[promtext.Sample], after: Sequence[promtext.Sample],
                  name: str = LOOP_LAG) -> float | None:
    """The smallest bucket bound that holds every lag observed between two scrapes: the longest lag
    was at most this (None: nothing observed; inf: past the highest bound)."""
    was = promtext.grouped(before, f"{name}_bucket", ("le",))
    bounds = sorted((float(le), n - was.get((le,), 0.0))
                    for (le,), n in promtext.grouped(after, f"{name}_bucket", ("le",)).items())
    if not bounds or bounds[-1][1] <= 0:
        return None
    return next(b for b, n in bounds if n >= bounds[-1][1])


def phase_summary(name: str, seconds: float, cpu_seconds: float, rss_mib: float | None,
                  before: Sequence[promtext.Sample], after: Sequence[promtext.Sample],
                  **extra: Any) -> dict[str, Any]:
    """One phase's figures from the controller's /proc samples and two scrapes of its metrics."""
    passes = sum(promtext.counter_delta(before, after, PASSES).values())
    dispatches = sum(promtext.counter_delta(before, after, DISPATCHES).values())
    p99 = promtext.quantile_from_histogram(before, after, LOOP_LAG, 0.99)
    status_p99 = promtext.quantile_from_histogram(before, after, STATUS_PROPAGATION, 0.99)
    per_second = seconds if seconds > 0 else float("nan")
    return {
        "phase": name,
        "seconds": round(seconds, 1),
        "cpuSeconds": round(cpu_seconds, 2),
        "cpuPercent": round(100 * cpu_seconds / per_second, 1) if seconds > 0 else None,
        "rssMiB": rss_mib,
        "passes": int(passes),
        "passesPerSecond": round(passes / per_second, 2) if seconds > 0 else None,
        "dispatches": int(dispatches),
        "dispatchesPerSecond": round(dispatches / per_second, 2) if seconds > 0 else None,
        "loopLagP99Seconds": None if p99 is None else round(p99, 4),
        "loopLagMaxAtMostSeconds": lag_max_bound(before, after),
        "statusPropagationP99Seconds": None if status_p99 is None else round(status_p99, 3),
        "passesByTrigger": {why: int(n) for (why,), n in
                            sorted(promtext.counter_delta(before, after, PASSES, ("why",)).items())},
        **extra,
    }


def workers_up(samples: Sequence[promtext.Sample], workers: Sequence[str]) -> bool:
    return all(promtext.total(samples, "jobmirror_worker_up", {"worker": w}) == 1 for w in workers)


def rooms_listed(samples: Sequence[promtext.Sample], workers: Sequence[str]) -> bool:
    """Every worker's room view has synced: its capacity gauges are exported only then."""
    have = {s.labels.get("worker") for s in samples if s.name == "jobmirror_worker_allocatable"}
    return all(w in have for w in workers)


def worker_names(n: int) -> list[str]:
    return [f"worker-{i}" for i in range(1, n + 1)]


# -- the processes -------------------------------------------------------------------------------


class FleetSim:
    """The ``python -m bench.fleetsim`` process this benchmark started: started, sampled and stopped
    by its PID as the controllers are (env.ControllerProcess), ready once it wrote ready.json."""

    def __init__(self, opts: FleetOptions, workdir: Path) -> None:
        self.dir = workdir
        argv = [sys.executable, "-m", "bench.fleetsim", "--workers", str(opts.workers),
                "--pods-per-worker", str(opts.pods_per_worker), "--nodes-per-worker", str(opts.nodes_per_worker),
                "--run-seconds", str(opts.job_seconds), "--dir", str(workdir)]
        self.proc = env.ControllerProcess("the fleet simulation", argv, workdir / "fleetsim.log", 0)
        self.ready: dict[str, Any] = {}

    @property
    def log_path(self) -> Path:
        return self.proc.log_path

    async def start(self, timeout: float) -> None:
        self.proc.start()
        ready = self.dir / "ready.json"
        deadline = time.monotonic() + timeout
        last = ""
        while not ready.exists():
            if not self.proc.alive():
                raise RuntimeError(f"the fleet simulation exited:\n{self.proc.log_tail(20)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the fleet simulation not ready after {timeout:.0f}s:\n{self.proc.log_tail(20)}")
            line = self.proc.log_tail(1)
            if line and line != last:
                env.say(f"fleetsim: {line}")
                last = line
            await asyncio.sleep(0.5)
        self.ready = json.loads(ready.read_text())

    def sample(self) -> procstat.ProcSample | None:
        return self.proc.sample()

    async def stop(self) -> None:
        await self.proc.stop()


def controller_config(sim_dir: Path, workers: Sequence[str], metrics_port: int) -> dict[str, Any]:
    return {
        "controllerName": DEFAULT_CONTROLLER_NAME,
        "origin": ORIGIN,
        "managerKubeconfig": str(sim_dir / "manager.kubeconfig"),
        "workers": [{"name": w, "kubeconfig": str(sim_dir / f"{w}.kubeconfig")} for w in workers],
        "metricsAddress": f"127.0.0.1:{metrics_port}",
    }


# -- the run -------------------------------------------------------------------------------------


class Timeline(env.Periodic):
    """Every ``interval`` s: the controller's and the fake's CPU and RSS, the controller's passes,
    dispatches and longest loop lag since the previous sample (for the plot)."""

    def __init__(self, interval: float, sim: FleetSim) -> None:
        super().__init__(interval)
        self.sim = sim
        self.ctrl: env.ControllerProcess | None = None
        self.rows: list[dict[str, Any]] = []
        self._last: list[promtext.Sample] | None = None
        self.phase = ""

    def follow(self, ctrl: env.ControllerProcess) -> None:
        self.ctrl, self._last = ctrl, None

    async def tick(self) -> None:
        row: dict[str, Any] = {"t": self.since_start(), "phase": self.phase, "load1": load()[0]}
        s = self.sim.sample()
        if s is not None:
            row["fleetsim"] = {"cpu": round(s.cpu_seconds, 2), "rssMiB": env.mib(s.rss_kib)}
        if self.ctrl is not None and self.ctrl.alive():
            c = self.ctrl.sample()
            if c is not None:
                row["controller"] = {"cpu": round(c.cpu_seconds, 2), "rssMiB": env.mib(c.rss_kib)}
            m = await self.ctrl.metrics()
            if m is not None:
                row["passes"] = int(promtext.total(m, PASSES))
                row["dispatches"] = int(promtext.total(m, DISPATCHES))
                row["queueDepth"] = promtext.total(m, "jobmirror_runtime_queue_depth", {"queue": "mirror"})
                if self._last is not None:
                    row["loopLagMaxAtMostSeconds"] = lag_max_bound(self._last, m)
                self._last = m
        self.rows.append(row)


class Phase:
    """Measures one phase of one controller: /proc before and after, metrics before and after."""

    def __init__(self, name: str, ctrl: env.ControllerProcess, timeline: Timeline) -> None:
        self.name, self.ctrl, self.timeline = name, ctrl, timeline

    async def __aenter__(self) -> Phase:
        self.timeline.phase = self.name
        env.say(f"phase {self.name}")
        self.t0 = time.monotonic()
        s = self.ctrl.sample()
        self.cpu0 = s.cpu_seconds if s is not None else 0.0
        self.before = await self.ctrl.metrics() or []
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def done(self, **extra: Any) -> dict[str, Any]:
        seconds = time.monotonic() - self.t0
        s = self.ctrl.sample()
        after = await self.ctrl.metrics() or []
        out = phase_summary(self.name, seconds, (s.cpu_seconds if s is not None else self.cpu0) - self.cpu0,
                            env.mib(s.rss_kib) if s is not None else None, self.before, after, **extra)
        env.say(f"  {self.name}: {out['seconds']} s, CPU {out['cpuPercent']} %, RSS {out['rssMiB']} MiB, "
                f"{out['passesPerSecond']} passes/s, loop lag p99 {out['loopLagP99Seconds']} s "
                f"(max <= {out['loopLagMaxAtMostSeconds']} s)")
        return out


async def _until(pred: Any, what: str, timeout: float, ctrl: env.ControllerProcess, interval: float = 1.0,
                 progress: Any = None) -> float:
    """Poll ``await pred()`` until true; the seconds it took. Fails naming ``what`` and the log's end."""
    t0 = time.monotonic()
    next_say = t0 + 15
    while not await pred():
        if not ctrl.alive():
            raise RuntimeError(f"{ctrl.name} exited while waiting for {what}:\n{ctrl.log_tail()}")
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"{what}: not after {timeout:.0f}s:\n{ctrl.log_tail()}")
        if progress is not None and time.monotonic() > next_say:
            env.say(f"  waiting for {what}: {await progress()}")
            next_say = time.monotonic() + 15
        await asyncio.sleep(interval)
    return time.monotonic() - t0


def _jobs(prefix: str, n: int, run_id: str, run_seconds: float) -> list[Obj]:
    out = []
    for i in range(n):
        j = job_manifest(f"{prefix}-{i:06d}", run_id, managed_by=DEFAULT_CONTROLLER_NAME,
                         requests={"cpu": "100m", "memory": "64Mi"})
        j["metadata"].setdefault("annotations", {})[RUN_SECONDS] = str(run_seconds)
        out.append(j)
    return out


async def _paced(mgr: ClusterClient, jobs: list[Obj], rate: float, sub: Submission) -> None:
    """Create ``jobs`` one every 1/``rate`` s (each on its own task: a slow answer does not slow the pace)."""
    t0 = time.monotonic()
    tasks = []
    for i, job in enumerate(jobs):
        await asyncio.sleep(max(0.0, t0 + i / rate - time.monotonic()))
        tasks.append(asyncio.create_task(submit(mgr, NAMESPACE, [job], 1, sub)))
    await asyncio.gather(*tasks)


async def _start(name: str, workdir: Path, logs: Path, workers: Sequence[str], opts: FleetOptions,
                 timeline: Timeline, session: Path | None = None) -> tuple[env.ControllerProcess, dict[str, Any]]:
    port = env.free_port()
    cfg_path = workdir / f"{name}.yaml"
    cfg_path.write_text(yaml.safe_dump(controller_config(workdir, workers, port)))
    ctrl = env.ControllerProcess(name, controller_argv(cfg_path, session, report_stalls_over=opts.report_stalls_over),
                                 logs / f"{name}.log", port)
    ctrl.start()
    timeline.follow(ctrl)
    async with Phase(name, ctrl, timeline) as ph:
        await ctrl.wait_ready(timeout=opts.phase_timeout)
        ready = time.monotonic() - ph.t0

        async def listed() -> bool:
            m = await ctrl.metrics()
            return m is not None and workers_up(m, workers) and rooms_listed(m, workers)

        async def how_far() -> str:
            m = await ctrl.metrics() or []
            up = sum(promtext.total(m, "jobmirror_worker_up", {"worker": w}) == 1 for w in workers)
            rooms = len({s.labels.get("worker") for s in m if s.name == "jobmirror_worker_allocatable"})
            return f"{up}/{len(workers)} workers up, {rooms} room views listed"

        synced = await _until(listed, "every worker up and its room listed", opts.phase_timeout, ctrl,
                              progress=how_far)
        return ctrl, await ph.done(readySeconds=round(ready, 1), syncedSeconds=round(ready + synced, 1))


async def run(opts: FleetOptions) -> dict[str, Any]:
    """The whole simulation; the result JSON's body."""
    workers = worker_names(opts.workers)
    run_id = uuid.uuid4().hex[:8]
    workdir = Path(tempfile.mkdtemp(prefix="jobmirror-fleet-"))
    logs = opts.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"benchmark": "fleet", "simulation": True, "runId": run_id, "git": git_info(),
                           "options": {k: v for k, v in asdict(opts).items() if k != "out"},
                           "loadAverage": {"start": load()}}
    sim = FleetSim(opts, workdir)
    timeline = Timeline(opts.sample_interval, sim)
    ctrls: list[env.ControllerProcess] = []
    mgr: ClusterClient | None = None
    try:
        t = time.monotonic()
        env.say(f"fleet simulation: 1 manager + {opts.workers} workers, {opts.pods_per_worker} pods each "
                f"on {opts.nodes_per_worker} nodes")
        await sim.start(opts.phase_timeout)
        res["fleetsim"] = {"upSeconds": round(time.monotonic() - t, 1), **sim.ready}
        timeline.start()
        mgr = await ClusterClient.from_kubeconfig("bench-manager", workdir / "manager.kubeconfig", qps=0,
                                                  burst=1000, timeout=60)
        await mgr.create(NAMESPACES, None, {"metadata": {"name": NAMESPACE}})
        phases: list[dict[str, Any]] = []
        res["phases"] = phases
        session = workdir / "fleet.pyisession" if opts.profile else None
        ctrl, start = await _start("start", workdir, logs, workers, opts, timeline, session)
        ctrls.append(ctrl)
        phases.append(start)

        async with Phase("fill", ctrl, timeline) as ph:
            sub = await submit(mgr, NAMESPACE, _jobs("run", opts.running, run_id, 10 * 86400),
                               opts.create_concurrency)
            if sub.errors:
                raise RuntimeError(f"{len(sub.errors)} Jobs not created, e.g. {sub.errors[0]}")

            async def all_dispatched() -> bool:
                m = await ctrl.metrics()
                return m is not None and promtext.total(m, DISPATCHES) >= opts.running

            async def dispatched() -> str:
                m = await ctrl.metrics() or []
                return f"{int(promtext.total(m, DISPATCHES))}/{opts.running} dispatched"

            await _until(all_dispatched, f"{opts.running} Jobs dispatched", opts.phase_timeout, ctrl,
                         progress=dispatched)
            phases.append(await ph.done(jobs=opts.running, submitSeconds=round(sub.finished - sub.started, 1)))

        for name, rate in (("steady", opts.rate), ("burst", 10 * opts.rate)):
            n = max(1, round(rate * opts.window))
            async with Phase(name, ctrl, timeline) as ph:
                sub = Submission()
                await _paced(mgr, _jobs(name, n, run_id, opts.job_seconds), rate, sub)
                rest = opts.window - (time.monotonic() - ph.t0)
                if rest > 0:
                    await asyncio.sleep(rest)
                phases.append(await ph.done(jobs=n, ratePerSecond=rate, createErrors=len(sub.errors)))

        res["outcome"] = await _outcome(mgr)
        # Failover: the first process goes (as a leader would at a node loss), a second one lists it all.
        await ctrl.stop()
        if session is not None:
            res["profile"] = render_profile(session, opts.out / "profile-fleet")
        failover, second = await _start("failover", workdir, logs, workers, opts, timeline)
        ctrls.append(failover)
        phases.append(second)
    except (RuntimeError, ApiError, OSError) as exc:
        res["error"] = str(exc)[:4000]
        env.say(f"fleet: FAILED: {res['error'][:400]}")
    finally:
        res.setdefault("fleetsim", {})["final"] = _proc(sim.sample())
        res["controller"] = {"peakRssMiB": max((r["controller"]["rssMiB"] for r in timeline.rows
                                                if "controller" in r and r["controller"]["rssMiB"]), default=None),
                             "logs": [c.log_summary() for c in ctrls],
                             "stallReports": [r for c in ctrls for r in stall_reports(c.log_path)]}
        await timeline.stop()
        for c in ctrls:
            await c.stop()
        if mgr is not None:
            await mgr.close()
        await sim.stop()
        with contextlib.suppress(OSError):  # its log kept beside the controllers', the rest removed
            shutil.copy(sim.log_path, logs / "fleetsim.log")
        shutil.rmtree(workdir, ignore_errors=True)
    res["timeline"] = timeline.rows
    res["loadAverage"]["end"] = load()
    return res


def _proc(s: procstat.ProcSample | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"cpuSeconds": round(s.cpu_seconds, 1), "rssMiB": env.mib(s.rss_kib), "peakRssMiB": env.mib(s.hwm_kib)}


async def _outcome(mgr: ClusterClient) -> dict[str, int]:
    """What the manager shows at the end of the arrival windows: placed, Complete, and not yet placed."""
    items, _ = await mgr.list_all(JOBS, NAMESPACE)
    placed = sum(1 for j in items if ANNOTATION_CLUSTER in (j["metadata"].get("annotations") or {}))
    done = sum(1 for j in items for c in (j.get("status") or {}).get("conditions") or []
               if c.get("type") == "Complete" and c.get("status") == "True")
    return {"jobs": len(items), "placed": placed, "complete": done, "notPlaced": len(items) - placed}


def markdown_table(result: dict[str, Any]) -> str:
    """The phases as a Markdown table (docs/performance.md quotes it with the file it came from)."""
    o = result["options"]
    head = (f"Simulation: {o['workers']} workers x {o['pods_per_worker']} pods on {o['nodes_per_worker']} nodes each, "
            f"{o['running']} running Jobs, arrivals {o['rate']}/s then {10 * o['rate']:.1f}/s "
            f"for {o['window']:.0f} s each "
            f"({result['git'].get('commit', '?')[:7]})")
    rows = ["| phase | seconds | controller CPU % | RSS MiB | passes/s | dispatches/s | loop lag p99 s "
            "| loop lag max <= s |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for p in result.get("phases") or []:
        rows.append(f"| {p['phase']} | {p['seconds']} | {p['cpuPercent']} | {p['rssMiB']} | {p['passesPerSecond']} "
                    f"| {p['dispatchesPerSecond']} | {p['loopLagP99Seconds']} | {p['loopLagMaxAtMostSeconds']} |")
    tail = [f"FAILED: {result['error'][:300]}"] if result.get("error") else []
    return "\n".join([head, "", *rows, *tail])
