"""Chaos scenarios: N mixed Jobs in flight, one fault each, judged by testkit.invariants.

The controller runs as a subprocess (``python -m mirror.cli run``, as in production and as
the mirror benchmark runs it), so a kill is a real SIGKILL at a random moment. Every random
choice comes from one seeded ``random.Random`` (the seed is printed and recorded), so a run
that finds a defect can be repeated. ``python -m bench chaos`` runs every scenario at 200
Jobs; ``tests/chaos`` runs every scenario through this same code at 50.

Each scenario gets its own namespace (the controller's allow-list) and origin, so scenarios
share one bed: a previous scenario's leftovers are invisible to the next one's controller
and checker.

``job-controller-stopped`` stops only worker-1's kube-controller-manager (its API server answers): the
controller runs with short ``progress`` deadlines (:data:`PROGRESS`) and must move the copies that made
no pod, with no duplicate even during the fault (:func:`scenario_checks`).

``jobset-mix`` is ``worker-stopped`` with a fifth of the workload JobSets (``jobsets=`` mixes them
into any scenario): JobSet v0.12.0's controller then runs in the manager and in every worker for
the scenario (testkit/jobsets.py, built on first use under the build's lock), the controller
mirrors ``kinds: [Job, JobSet]`` and the checker judges the JobSets, their copies and the copies'
child Jobs too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench import env, promtext
from bench.mirror_bench import controller_argv
from bench.workload import BENCH_LABEL, job_manifest, submit
from clusterbed.cluster import ClusterSpec, LocalCluster
from clusterbed.jobset import JobSetController
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, LEASES, Obj, Resource
from mirror.naming import DEFAULT_CONTROLLER_NAME, LABEL_ORIGIN, LABEL_ORIGIN_UID
from testkit.invariants import JOB, JOBSET, ChaosVerdict, InvariantChecker
from testkit.jobsets import make_jobset, start_jobset_controllers, stop_jobset_controllers
from testkit.waiting import ensure_namespace

# The same shapes as tests/conftest.py, so a pytest session's bed serves both.
MANAGER = ClusterSpec("manager", nodes=0)
MANAGER_2 = ClusterSpec("manager-2", nodes=0)
WORKER_1 = ClusterSpec("worker-1", nodes=2)
WORKER_2 = ClusterSpec("worker-2", nodes=2)
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")

#: short intervals so a fault is noticed and repaired within seconds
TIMINGS = {"resyncPeriod": 2.0, "gcInterval": 2.0, "workerLostTimeout": 6.0, "healthProbeInterval": 0.5,
           "requestTimeout": 3.0}
WAVES, WAVE_GAP = 5, 2.5  # Jobs are created over the first ~10 s
#: short enough for quick takeovers, long enough that a 2-core machine at load 20 still renews
#: (leaseDuration - renewDeadline >= requestTimeout: a write sent before a lost renewal lands first)
LEADER_ELECTION = {"leaseDuration": 9, "renewDeadline": 6, "retryPeriod": 2}


@dataclass
class ChaosOptions:
    jobs: int = 200
    seed: int | None = None
    timeout: float | None = None  # per scenario; None = 150 s + 0.6 s per Job
    logs: Path | None = None
    create_concurrency: int = 20


def job_mix(n: int, rng: random.Random, prefix: str = "job") -> list[Obj]:
    """N Jobs, mixed: 40 % plain, 20 % Indexed (3 pods), 20 % failing, 20 % long-running."""
    jobs = []
    for i in range(n):
        kind = ("plain", "plain", "indexed", "failing", "long")[i % 5]
        name = f"{prefix}-{kind}-{i:04d}"
        if kind == "indexed":
            j = job_manifest(name, "chaos", completions=3, parallelism=3, indexed=True,
                             managed_by=DEFAULT_CONTROLLER_NAME, pod_duration=f"{rng.randint(1000, 3000)}ms")
        elif kind == "long":
            j = job_manifest(name, "chaos", managed_by=DEFAULT_CONTROLLER_NAME,
                             pod_duration=f"{rng.randint(10, 18)}s")
        else:
            j = job_manifest(name, "chaos", managed_by=DEFAULT_CONTROLLER_NAME,
                             pod_duration=f"{rng.randint(500, 3000)}ms")
        if kind == "failing":
            j["spec"]["backoffLimit"] = 1
            j["spec"]["template"]["metadata"]["labels"]["jobmirror.dev/kwok-outcome"] = "fail"
        jobs.append(j)
    return jobs


#: the JobSet kinds of :func:`jobset_mix`, in turn, and the outcome each must end with
JOBSET_KINDS = {"js-complete": "Completed", "js-long": "Completed", "js-failing": "Failed"}


def jobset_mix(n: int, rng: random.Random, prefix: str = "") -> list[Obj]:
    """N JobSets of two replicatedJobs (leader 1 x 1, workers 2 x 2 pods), in turn: completing (pods
    0.5-3 s), long-running and completing (pods 8-15 s: still running when a fault begins), and failing
    (every pod fails after 0.5-2 s; ``failurePolicy.maxRestarts: 1``, so one restart, then Failed with
    ReachedMaxRestarts). Each carries the chaos run's label like the Jobs."""
    out = []
    for i in range(n):
        kind = tuple(JOBSET_KINDS)[i % len(JOBSET_KINDS)]
        extra: dict[str, Any]
        if kind == "js-long":
            ms, extra, outcome = rng.randint(8000, 15000), {}, "succeed"
        elif kind == "js-failing":
            ms, extra, outcome = rng.randint(500, 2000), {"failurePolicy": {"maxRestarts": 1}}, "fail"
        else:
            ms, extra, outcome = rng.randint(500, 3000), {}, "succeed"
        js = make_jobset(f"{prefix}{kind}-{i:04d}", outcome=outcome, duration_ms=ms,
                         labels={BENCH_LABEL: "chaos"}, pod_labels={BENCH_LABEL: "chaos"}, **extra)
        for rjob in js["spec"]["replicatedJobs"]:
            rjob["template"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 0
        out.append(js)
    return out


def workload(n: int, rng: random.Random, jobset_share: float) -> list[Obj]:
    """N objects: :func:`job_mix` Jobs, then ``round(n * jobset_share)`` JobSets (:func:`jobset_mix`).
    With no share they are the Jobs of job_mix(n)."""
    k = round(n * jobset_share)
    return job_mix(n - k, rng) + jobset_mix(k, rng)


def waves(objs: list[Obj]) -> list[list[Obj]]:
    """The :data:`WAVES` waves the objects are created in: every WAVES-th Job and every WAVES-th JobSet,
    so each wave holds both kinds (and each kind's variants)."""
    by_kind = [[o for o in objs if o.get("kind") != JOBSET], [o for o in objs if o.get("kind") == JOBSET]]
    return [[o for group in by_kind for o in group[w::WAVES]] for w in range(WAVES)]


def expected_outcome(obj: Obj) -> str | None:
    """What a JobSet of :func:`jobset_mix` must end as (None for a Job: not judged by expectation)."""
    if obj.get("kind") != JOBSET:
        return None
    name = obj["metadata"]["name"]
    return next((o for k, o in JOBSET_KINDS.items() if name.startswith(f"{k}-")), None)


@dataclass
class Controller:
    """One controller replica; each (re)start is a new process, its metrics a new ledger instance."""

    name: str
    config: Path
    log_dir: Path
    port: int = field(default_factory=env.free_port)
    proc: env.ControllerProcess | None = None
    starts: int = 0

    def start(self) -> env.ControllerProcess:
        self.starts += 1
        argv = controller_argv(self.config, None)
        self.proc = env.ControllerProcess(f"{self.name}#{self.starts}", argv,
                                          self.log_dir / f"{self.name}-{self.starts}.log", self.port,
                                          env={"JOBMIRROR_METRICS_ADDRESS": f"127.0.0.1:{self.port}"})
        self.proc.start()
        return self.proc

    def kill(self) -> None:
        """A real SIGKILL: no shutdown path runs."""
        if self.proc is not None and self.proc.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.proc.wait()  # type: ignore[union-attr]


class Run:
    """One scenario's world: clusters, clients, namespace, controllers, the checker and the rng."""

    def __init__(self, name: str, n: int, rng: random.Random, cluster: Callable[[ClusterSpec], LocalCluster],
                 log_dir: Path, create_concurrency: int, jobset_share: float = 0.0) -> None:
        self.name = name
        self.n = n
        self.jobset_share = jobset_share
        #: JobSet's controllers this run started (in every manager and worker), stopped at its end
        self.jobset_controllers: list[JobSetController] = []
        self.rng = rng
        self.cluster = cluster
        self.log_dir = log_dir
        self.create_concurrency = create_concurrency
        tag = uuid.UUID(int=rng.getrandbits(128)).hex[:6]
        self.ns = f"chaos-{name}-{tag}"[:63]
        self.origin = f"chaos-{tag}"
        self.clusters: dict[str, LocalCluster] = {}
        self.clients: dict[str, ClusterClient] = {}
        self.managers: list[str] = ["manager"]
        self.controllers: list[Controller] = []
        self.checker: InvariantChecker | None = None
        self.events: list[str] = []
        #: controller processes that ended without being killed by the scenario
        self.exits: list[str] = []
        self.t0 = time.time()
        self.submitted = 0
        #: what the scenario itself found broken (failed in res["scenarioChecks"])
        self.problems: list[str] = []
        #: per controller process, its last scraped jobmirror_replacements_total by worker left
        self.replacements: dict[str, dict[str, float]] = {}

    def note(self, msg: str) -> None:
        line = f"t={time.time() - self.t0:6.1f}s {msg}"
        self.events.append(line)
        env.say(f"chaos {self.name}: {line}")

    async def client(self, spec: ClusterSpec) -> ClusterClient:
        if spec.name not in self.clients:
            c = self.clusters[spec.name] = await asyncio.to_thread(self.cluster, spec)
            self.clients[spec.name] = await env.client_for(c)
            await ensure_namespace(self.clients[spec.name], self.ns)
        return self.clients[spec.name]

    def write_config(self, name: str, manager: str, workers: list[str], origin: str, *, leader: bool = False) -> Path:
        cfg: dict[str, Any] = {
            "controllerName": DEFAULT_CONTROLLER_NAME, "origin": origin,
            "managerKubeconfig": str(self.clusters[manager].kubeconfig),
            "workers": [{"name": w, "kubeconfig": str(self.clusters[w].kubeconfig)} for w in workers],
            "namespaces": [self.ns], **TIMINGS,
        }
        if self.name in PROGRESS:
            cfg["progress"] = PROGRESS[self.name]
        if self.jobset_share:
            cfg["kinds"] = [JOB, JOBSET]
        if leader:
            cfg["leaderElection"] = {"enabled": True, "namespace": self.ns, "leaseName": f"jm-{origin}",
                                     **LEADER_ELECTION}
        path = self.log_dir / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(cfg))
        return path

    def workers_of(self) -> dict[str, ClusterClient]:
        return {w: self.clients[w] for w in ("worker-1", "worker-2")}

    async def start_controller(self, ctrl: Controller, wait: bool = True) -> None:
        p = ctrl.start()
        if wait:
            await p.wait_ready(120)

    async def scrape(self) -> None:
        """Fold every live controller's counters into the checker's ledger."""
        assert self.checker is not None
        for c in self.controllers:
            p = c.proc
            if p is None or not p.alive():
                continue
            m = await p.metrics()
            if m is None:
                continue
            rejected = promtext.total(m, "jobmirror_status_writes_total", {"result": "rejected"})
            errs = {k[0]: v for k, v in promtext.grouped(m, "jobmirror_reconcile_errors_total", ("reason",)).items()}
            self.checker.ledger.record(f"{c.name}#{c.starts}:{p.pid}", rejected, errs)
            self.replacements[f"{c.name}#{c.starts}:{p.pid}"] = {
                k[0]: v for k, v in promtext.grouped(m, "jobmirror_replacements_total", ("worker",)).items()}

    def moves_from(self) -> dict[str, int]:
        """Stuck copies moved off each worker (jobmirror_replacements_total), summed over every controller
        process of the run (a killed one keeps its last scrape)."""
        out: dict[str, int] = {}
        for per in self.replacements.values():
            for worker, n in per.items():
                out[worker] = out.get(worker, 0) + int(n)
        return {w: n for w, n in sorted(out.items()) if n}

    async def gauges(self, name: str, labels: dict[str, str]) -> list[float]:
        """``name{labels}`` as each live controller that answered reports it, in start order."""
        out = []
        for c in self.controllers:
            if c.proc is not None and c.proc.alive():
                m = await c.proc.metrics()
                if m is not None:
                    out.append(promtext.total(m, name, labels))
        return out

    async def wait_worker_up(self, worker: str, timeout: float = 90) -> None:
        """Until a live controller reports ``jobmirror_worker_up{worker} == 1``."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if 1 in await self.gauges("jobmirror_worker_up", {"worker": worker}):
                return
            await asyncio.sleep(0.25)
        raise RuntimeError(f"no controller reported {worker} up within {timeout:.0f}s of its return")

    async def wait_watching(self, cluster: str, timeout: float = 60) -> None:
        """Until the checker's watches on ``cluster`` have reconnected (relisted), so nothing it
        records after the fault window is a stale view of the outage."""
        assert self.checker is not None
        deadline = time.time() + timeout
        while not self.checker.watching(cluster):
            if time.time() > deadline:
                raise RuntimeError(f"the checker's watches on {cluster} did not reconnect within {timeout:.0f}s")
            await asyncio.sleep(0.1)

    async def at(self, seconds: float) -> None:
        """Sleep until ``seconds`` after the run started."""
        await asyncio.sleep(max(0.0, self.t0 + seconds - time.time()))

    def copies_now(self, kind: str = JOB) -> list[tuple[str, Obj]]:
        """Live copies of ``kind`` the checker's worker watches hold (worker, copy uid)."""
        assert self.checker is not None
        return [(c.worker, {"uid": c.uid, "name": c.name}) for c in self.checker.recorder.copies.values()
                if c.gone is None and c.kind == kind]


Scenario = Callable[[Run], Awaitable[None]]


async def create_until_accepted(run: Run, manager: str, jobs: list[Obj], timeout: float = 180) -> None:
    """Create Jobs as a user's client would while the manager may be restarting: retry until accepted."""
    deadline = time.time() + timeout
    todo = jobs
    while todo:
        sub = await submit(run.clients[manager], run.ns, todo, run.create_concurrency)
        run.submitted += len(sub.acked)
        todo = [j for j in todo if j["metadata"]["name"] not in sub.acked]
        if todo:
            if time.time() > deadline:
                raise RuntimeError(f"{len(todo)} Jobs not created in {timeout:.0f}s, e.g. {sub.errors[:1]}")
            await asyncio.sleep(1.0)


# --- the faults ---------------------------------------------------------------------------------

async def _api_server_down(run: Run, worker: str, how: str) -> None:
    assert run.checker is not None
    await run.at(run.rng.uniform(4, 8))
    cl = run.clusters[worker]
    hold = TIMINGS["workerLostTimeout"] + run.rng.uniform(4, 8)
    with run.checker.fault(f"{worker} {how}"):
        run.note(f"{how} {worker}'s API server for {hold:.1f}s (workerLostTimeout {TIMINGS['workerLostTimeout']}s)")
        if how == "stop":
            await asyncio.to_thread(cl.stop)
        else:
            cl.freeze()
        try:
            await asyncio.sleep(hold)
        finally:
            if how == "stop":
                await asyncio.to_thread(cl.start)
            else:
                cl.thaw()
        run.note(f"{worker}'s API server back")
        # The fault lasts until the controller has seen the worker again: until then nothing it
        # could do would stop the returned worker's Job controller running the stale copy.
        await run.wait_worker_up(worker)
        await run.wait_watching(worker)
        run.note(f"controller (and checker) see {worker} up again")


async def worker_stopped(run: Run) -> None:
    await _api_server_down(run, "worker-1", "stop")


async def worker_frozen(run: Run) -> None:
    await _api_server_down(run, "worker-1", "freeze")


def kcm_hold(n: int) -> tuple[float, float]:
    """How long job-controller-stopped keeps worker-1's kube-controller-manager stopped: scaled with the
    Job count, so the stop outlasts the whole workload's dispatch and most of its runtime (50 Jobs, the CI
    tier: 25-32.5 s; 200 Jobs: 100-130 s, about two of the issue's "a few minutes"; never above 156 s)."""
    base = min(120.0, max(25.0, 0.5 * n))
    return base, base * 1.3


async def job_controller_stopped(run: Run) -> None:
    """worker-1's kube-controller-manager (its Job controller, and its garbage collector) stopped for
    :func:`kcm_hold` seconds while its API server answers throughout (issue 36, item 5).

    Copies there that made no pod stay in phase created past ``progress.podsCreatedTimeout``
    (:data:`PROGRESS`): moved to worker-2, each deleted before anything of it ran, and worker-1 is marked
    stalled (placement avoids it). Copies whose pods had started stay: their pods run on (kwok is not
    kcm), and the copies finish once the Job controller returns. Pods of copies deleted meanwhile would
    go only after it returns (the orphan wait allows POD_GC_SLACK); moved copies have none.
    """
    assert run.checker is not None
    await run.at(run.rng.uniform(4, 8))
    cl, worker = run.clusters["worker-1"], "worker-1"
    hold = run.rng.uniform(*kcm_hold(run.n))
    stalled = {"worker": worker}
    pid = cl.pid("kube-controller-manager")
    if pid is None or not Path(f"/proc/{pid}").exists():
        raise RuntimeError(f"{worker}'s kube-controller-manager (pid {pid}) was not running before the fault; "
                           f"its log:\n{cl.logs('kube-controller-manager')}")
    with run.checker.fault(f"{worker} Job controller stopped"):
        live = sum(1 for w, _ in run.copies_now() if w == worker)
        run.note(f"stopping {worker}'s kube-controller-manager (Job controller, garbage collector) for "
                 f"{hold:.1f}s; {live} copies live there; podsCreatedTimeout "
                 f"{PROGRESS[run.name]['podsCreatedTimeout']}s")
        await asyncio.to_thread(cl.stop, "kube-controller-manager")
        marked = False
        try:
            end = time.time() + hold
            while (left := end - time.time()) > 0:
                if not marked and (await run.gauges("jobmirror_worker_stalled", stalled))[:1] == [1]:
                    marked = True
                    run.note(f"the controller marks {worker} stalled")
                await asyncio.sleep(min(0.5, left))
        finally:
            await asyncio.to_thread(cl.start, "kube-controller-manager")
        await run.scrape()
        stayed = sum(1 for w, _ in run.copies_now() if w == worker)
        run.note(f"{worker}'s kube-controller-manager back; {stayed} copies stayed there, "
                 f"{run.moves_from().get(worker, 0)} stuck copies moved off it")
        # The fault lasts until the controller sees worker-1's Job controller at work again (no longer
        # stalled): the copies that stayed finish, or change status, once it returns. Until then worker-1
        # is avoided. With no copy left there nothing can show it (placement sends none while another
        # worker has room): not required then.
        deadline = time.time() + 30
        while marked and time.time() < deadline:
            if (await run.gauges("jobmirror_worker_stalled", stalled))[:1] == [0]:
                run.note(f"the controller no longer counts {worker} stalled")
                break
            await asyncio.sleep(0.5)
        else:
            if marked:
                run.note(f"{worker} still counted stalled 30 s after its Job controller returned")
                if stayed:
                    run.problems.append(f"{worker} still counted stalled 30 s after its Job controller returned, "
                                        f"though {stayed} copies stayed there")


async def manager_restart(run: Run) -> None:
    assert run.checker is not None
    await run.at(run.rng.uniform(4, 8))
    cl = run.clusters["manager"]
    with run.checker.fault("manager restart"):
        run.note("stopping the manager's API server")
        await asyncio.to_thread(cl.stop)
        await asyncio.sleep(run.rng.uniform(3, 6))
        await asyncio.to_thread(cl.start)
        await run.wait_watching("manager")
        run.note("manager API server back")


async def controller_kills(run: Run) -> None:
    assert run.checker is not None
    ctrl = run.controllers[0]
    t = 0.0
    for i in range(5):
        t += run.rng.uniform(1.5, 4.0)
        await run.at(t)
        with run.checker.fault(f"kill {i}"):
            await run.scrape()
            run.note(f"SIGKILL controller pid {ctrl.proc.pid if ctrl.proc else '?'} ({i + 1}/5)")
            ctrl.kill()
            await run.start_controller(ctrl)
        t = time.time() - run.t0


async def _leader_pid(run: Run) -> int | None:
    lease_name = f"jm-{run.origin}"
    with contextlib.suppress(ApiError):
        lease = await run.clients["manager"].get(LEASES, run.ns, lease_name)
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        parts = holder.split("_")
        if len(parts) >= 3 and parts[-2].isdigit():
            return int(parts[-2])
    return None


async def leader_kill(run: Run) -> None:
    assert run.checker is not None
    await run.at(run.rng.uniform(3, 6))
    for i in range(2):
        deadline = time.time() + 60
        pid = await _leader_pid(run)
        while pid is None or not any(c.proc and c.proc.alive() and c.proc.pid == pid for c in run.controllers):
            if time.time() > deadline:
                raise RuntimeError("no live replica holds the Lease")
            await asyncio.sleep(0.3)
            pid = await _leader_pid(run)
        leader = next(c for c in run.controllers if c.proc and c.proc.pid == pid)
        with run.checker.fault(f"leader kill {i}"):
            await run.scrape()
            run.note(f"SIGKILL leader {leader.name} pid {pid} ({i + 1}/2)")
            leader.kill()
            await run.start_controller(leader, wait=False)  # its Deployment would restart it
            while (new := await _leader_pid(run)) in (None, pid):
                if time.time() > deadline + 60:
                    raise RuntimeError("no replica took the Lease over")
                await asyncio.sleep(0.2)
            run.note(f"new leader pid {new}")
        await asyncio.sleep(run.rng.uniform(2, 5))


async def hand_edits(run: Run) -> None:
    """Delete 10 % of the copies by hand and edit another 10 % (parallelism, origin labels, suspend)."""
    assert run.checker is not None
    await run.at(run.rng.uniform(11, 13))  # after the last wave: 10 % of N is there to pick from
    # Copies still running, long-running ones first: a copy that finishes meanwhile escapes the edit.
    live = [(w, c) for w, c in run.copies_now() if not run.checker.recorder.copies[c["uid"]].decided_at]
    run.rng.shuffle(live)
    live.sort(key=lambda wc: "-long-" not in wc[1]["name"])
    k = max(1, run.n // 10)
    deletes, edits = live[:k], live[k:2 * k]
    with run.checker.fault("hand edits"):
        run.note(f"deleting {len(deletes)} copies and editing {len(edits)} by hand")
        async def delete(worker: str, c: Obj) -> bool:
            ns, name = c["name"].split("/", 1)
            try:
                await run.clients[worker].delete(JOBS, ns, name, propagation="Background", uid=c["uid"])
            except ApiError:
                return False
            return True

        async def edit(i: int, worker: str, c: Obj) -> bool:
            ns, name = c["name"].split("/", 1)
            patch: Obj = ({"spec": {"parallelism": 2}}, {"metadata": {"labels": {LABEL_ORIGIN: None,
                                                                                   LABEL_ORIGIN_UID: None}}},
                          {"spec": {"suspend": True}})[i % 3]
            try:
                await run.clients[worker].patch(JOBS, ns, name, patch)
            except ApiError:
                return False
            return True

        # All at once, as a script would: done one by one on a loaded machine, copies finish first.
        done = await asyncio.gather(*(delete(w, c) for w, c in deletes),
                                    *(edit(i, w, c) for i, (w, c) in enumerate(edits)))
        run.note(f"hand edits done ({done.count(False)} missed: the copy had gone)")
        # A deleted copy's pods run on until the worker's garbage collector removes them: the
        # fault lasts until they are gone (a replacement started meanwhile overlaps them).
        rec = run.checker.recorder
        gone_uids = {c["uid"] for _, c in deletes}
        deadline = time.time() + 60
        while time.time() < deadline and any(
                p.gone is None for p in rec.pods.values() if p.copy_uid in gone_uids):
            await asyncio.sleep(0.1)
        run.note("the deleted copies' pods are gone")


async def second_writer(run: Run) -> None:
    """A competing client writes counters into unfinished manager Jobs' status for ~10 s."""
    assert run.checker is not None
    await run.at(run.rng.uniform(4, 6))
    mgr = run.clients["manager"]
    writes = refused = 0
    with run.checker.fault("second status writer"):
        end = time.time() + 10
        while time.time() < end:
            running = [m for m in run.checker.recorder.managers.values() if m.terminal is None and m.kind == JOB]
            if not running:
                break
            m = run.rng.choice(running)
            ns, name = m.key.split("/", 1)
            body = {"status": {"active": run.rng.randint(0, 5), "ready": run.rng.randint(0, 3),
                               "terminating": run.rng.randint(0, 2)}}
            try:
                await mgr.patch(JOBS, ns, name, body, subresource="status")
                writes += 1
            except ApiError:
                refused += 1
            await asyncio.sleep(0.05)
        run.note(f"second writer: {writes} status writes accepted, {refused} refused")


async def quota(run: Run) -> None:
    """worker-1's namespace gets a ResourceQuota admitting no new Job, lifted 12 s later."""
    assert run.checker is not None
    await run.at(run.rng.uniform(3, 6))
    w1 = run.clients["worker-1"]
    rq = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-more-jobs"},
          "spec": {"hard": {"count/jobs.batch": "0"}}}
    with run.checker.fault("quota"):
        await w1.create(RESOURCE_QUOTAS, run.ns, rq)
        run.note("ResourceQuota count/jobs.batch=0 on worker-1")
        await asyncio.sleep(12)
        await w1.delete(RESOURCE_QUOTAS, run.ns, "no-more-jobs")
        run.note("ResourceQuota removed")


async def no_fault(run: Run) -> None:
    """Two managers share worker-1 (same namespace, same Job names); the load is the fault."""


SCENARIOS: dict[str, Scenario] = {
    "worker-stopped": worker_stopped,
    "worker-frozen": worker_frozen,
    "manager-restart": manager_restart,
    "controller-kill": controller_kills,
    "leader-kill": leader_kill,
    "hand-edits": hand_edits,
    "second-writer": second_writer,
    "shared-worker": no_fault,
    "worker-quota": quota,
    "job-controller-stopped": job_controller_stopped,
    # worker-stopped with JobSets (JOBSET_SHARE): a lost worker is where a JobSet's copy is replaced by a
    # second one on another worker while the first (and its child Jobs) lives on in the returned worker
    # until deleted. Last: JobSet runs in the bed's clusters only while it does.
    "jobset-mix": worker_stopped,
}


#: the share of each scenario's workload that are JobSets (the others: none, unless asked for)
JOBSET_SHARE = {"jobset-mix": 0.2}

#: the controller's ``progress`` config per scenario (the others keep the defaults: 120 s before a copy with
#: no pod counts as stuck, so none of them moves a copy for that). job-controller-stopped: copies stuck on
#: worker-1 are noticed within seconds. 8 s: a healthy Job controller makes a copy's first pod in ~1 s
#: (the bed's canary Job completes in 1.2 s), a few seconds at load 10-20 with a wave of 40 Jobs in its
#: queue; 8 s leaves worker-2 that margin (a false "stuck" there would move a copy to the stopped worker)
#: and is still well inside the shortest stop (25 s). stalledCopies 3 (the default, said here): worker-1
#: is avoided once 3 copies sit silent there.
PROGRESS: dict[str, dict[str, Any]] = {"job-controller-stopped": {"podsCreatedTimeout": 8, "stalledCopies": 3}}

#: scenarios where even a fault window must see no duplicate: worker-1's API server answers throughout
#: job-controller-stopped, so the controller never acts on a stale view; a copy moves only when none of
#: its containers ever started, deleted (resourceVersion precondition) before its Job is placed again.
NO_DUPLICATES_EVEN_DURING_FAULT = frozenset({"job-controller-stopped"})
#: scenarios that must move stuck copies off a worker (jobmirror_replacements_total{worker} > 0), so that
#: a run whose copies all happened to have started cannot pass without exercising a move
MOVES_OFF = {"job-controller-stopped": "worker-1"}


def scenario_checks(name: str, v: ChaosVerdict, moves: dict[str, int], problems: list[str]) -> list[str]:
    """What a scenario promises beyond :attr:`ChaosVerdict.ok` and did not keep (empty: kept); ``problems``:
    what the scenario found itself (:attr:`Run.problems`)."""
    out = list(problems)
    if name in NO_DUPLICATES_EVEN_DURING_FAULT and v.duplicates_during_fault:
        out.append(f"{len(v.duplicates_during_fault)} duplicates during the fault (none allowed here), e.g. "
                   f"{v.duplicates_during_fault[:3]}")
    if (worker := MOVES_OFF.get(name)) is not None and not moves.get(worker):
        out.append(f"no stuck copy was moved off {worker} (jobmirror_replacements_total: {moves})")
    return out


# --- one scenario, end to end -------------------------------------------------------------------

async def run_scenario(name: str, n: int, seed: int, cluster: Callable[[ClusterSpec], LocalCluster], log_dir: Path,
                       *, timeout: float | None = None, create_concurrency: int = 20,
                       jobsets: float | None = None) -> dict[str, Any]:
    """Run one scenario and return its figures and the checker's verdict (``result["verdict"]``).

    ``jobsets``: the share of the N that are JobSets (default: :data:`JOBSET_SHARE`, else none)."""
    share = JOBSET_SHARE.get(name, 0.0) if jobsets is None else jobsets
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"jobsets: a share between 0 and 1, not {share}")
    rng = random.Random(f"{seed}/{name}")
    run = Run(name, n, rng, cluster, log_dir / name, create_concurrency, share)
    timeout = timeout or 150 + 0.6 * n + (kcm_hold(n)[1] if name == "job-controller-stopped" else 0.0)
    k = round(n * share)
    env.say(f"chaos {name}: {n} Jobs{f' ({k} of them JobSets)' if k else ''}, seed {seed}, namespace {run.ns}")
    for spec in (MANAGER, WORKER_1, WORKER_2):
        await run.client(spec)
    shared = name == "shared-worker"
    if shared:
        await run.client(MANAGER_2)
        run.managers.append("manager-2")
    if share:
        # JobSet in every manager (it must leave the claimed JobSets alone) and every worker (it runs
        # the copies). Built first if not cached, under the build's lock (never a second build).
        t_js = time.time()
        run.jobset_controllers = await asyncio.to_thread(
            start_jobset_controllers, [run.clusters[c] for c in (*run.managers, "worker-1", "worker-2")],
            run.log_dir / "jobset")
        env.say(f"chaos {name}: JobSet v{run.jobset_controllers[0].version} running in "
                f"{', '.join(c.cluster.name for c in run.jobset_controllers)} ({time.time() - t_js:.1f}s)")
    origins = {run.origin} | ({f"{run.origin}-b"} if shared else set())
    try:
        checker = run.checker = InvariantChecker({m: run.clients[m] for m in run.managers}, run.workers_of(),
                                                 [run.ns], managed_by=DEFAULT_CONTROLLER_NAME, origins=origins,
                                                 kinds=(JOB, JOBSET) if share else (JOB,))
        await checker.start()
    except BaseException:
        await asyncio.to_thread(stop_jobset_controllers, run.jobset_controllers)
        raise
    leader = name == "leader-kill"
    cfg = run.write_config("controller", "manager", ["worker-1", "worker-2"], run.origin, leader=leader)
    run.controllers = [Controller(f"replica-{i}", cfg, run.log_dir) for i in range(2 if leader else 1)]
    if shared:
        cfg2 = run.write_config("controller-b", "manager-2", ["worker-1"], f"{run.origin}-b")
        run.controllers.append(Controller("manager-2-controller", cfg2, run.log_dir))
    res: dict[str, Any] = {"scenario": name, "jobs": n * len(run.managers), "seed": seed, "namespace": run.ns,
                           "jobsetShare": share}
    scrape_task: asyncio.Task[None] | None = None
    supervise_task: asyncio.Task[None] | None = None
    try:
        await asyncio.gather(*(run.start_controller(c) for c in run.controllers))
        run.t0 = time.time()

        async def scraper() -> None:
            while True:
                with contextlib.suppress(Exception):
                    await run.scrape()
                await asyncio.sleep(1.0)

        async def supervisor() -> None:
            """Restart a replica that exited on its own, as its Deployment would (a lost Lease
            ends the process by design); every exit is recorded."""
            while True:
                for c in run.controllers:
                    p = c.proc
                    if p is not None and p.proc is not None and p.proc.poll() is not None:
                        text = p.log_path.read_text(errors="replace")
                        why = "lost leadership" if "lost leadership" in text else p.log_tail(3).strip()[-300:]
                        run.exits.append(f"{c.name}#{c.starts} exited {p.proc.returncode}: {why}")
                        run.note(f"{c.name} exited with {p.proc.returncode}; restarting it")
                        c.start()
                await asyncio.sleep(0.5)

        scrape_task = asyncio.create_task(scraper())
        supervise_task = asyncio.create_task(supervisor())
        rec = checker.recorder

        def progress() -> str:
            done = sum(1 for m in rec.managers.values() if m.terminal)
            live = sum(1 for c in rec.copies.values() if c.gone is None)
            return (f"chaos {name} t={time.time() - run.t0:5.1f}s submitted {run.submitted}/{res['jobs']} · "
                    f"finished {done} · copies seen {len(rec.copies)} live {live} · lagging {rec.lagging()} · "
                    f"faults {len(checker.faults)}")

        async def submit_all() -> None:
            # In WAVES waves WAVE_GAP s apart, so faults also meet dispatches, not only running copies.
            mixes = {m: workload(n, rng, share) for m in run.managers}
            for objs in mixes.values():
                for o in objs:
                    if (want := expected_outcome(o)) is not None:
                        rec.expect(o["kind"], f"{run.ns}/{o['metadata']['name']}", want)
            for w in range(WAVES):
                await asyncio.gather(*(create_until_accepted(run, m, waves(objs)[w]) for m, objs in mixes.items()))
                if w < WAVES - 1:
                    await asyncio.sleep(WAVE_GAP)
            run.note(f"{run.submitted} Jobs created")

        with env.Progress(progress, interval=5.0):
            # Both run to their end even when one fails: a fault is always undone (its finally).
            outcomes = await asyncio.gather(submit_all(), SCENARIOS[name](run), return_exceptions=True)
            for o in outcomes:
                if isinstance(o, BaseException):
                    raise o
            fault_end = max((e for _, e in checker.faults), default=time.time())
            # Recovery: the first instant after the last fault when every manager Job is in line with its copies.
            recovered: float | None = None
            all_done = False
            deadline = run.t0 + timeout
            while time.time() < deadline:
                if recovered is None and rec.lagging() == 0:
                    recovered = time.time()
                if len(rec.managers) >= run.submitted and all(m.terminal for m in rec.managers.values()):
                    all_done = True
                    recovered = recovered or time.time()
                    break
                await asyncio.sleep(0.25)
            t_done = time.time()
            res["allFinished"] = all_done
            res["secondsToFinish"] = round(t_done - run.t0, 1)
            res["recoverSeconds"] = round(recovered - fault_end, 1) if recovered and checker.faults else None
            # Orphans: whatever is left one GC period (plus slack for a busy machine) after the end.
            # Slack: a worker's kube-controller-manager deletes a removed copy's pods (background
            # propagation), and its garbage collector resyncs slowly after its API server restarted.
            # Copies are ours to delete: one GC period (x2) plus 20 s. Pods of a deleted copy are the
            # worker's garbage collector's: after its API server came back, its informers can take
            # ~30 s (client-go backoff; measured on the bed, more under load) before it acts, so
            # they get up to POD_GC_SLACK — spent only while such pods remain.
            now = time.time()
            copy_deadline = now + TIMINGS["gcInterval"] * 2 + 20
            pod_deadline = max(copy_deadline, now + POD_GC_SLACK)
            # A copy a user disowned by hand (our labels stripped) is no longer ours to delete, by
            # design: waiting for it would only wait out the deadline (the checker does not count
            # it as an orphan either).
            # Clean only counts once it has held for ORPHAN_QUIET seconds (JOBSET_ORPHAN_QUIET with JobSets):
            # a watch that just relisted may still be delivering, and a returned worker's JobSet controller,
            # its cache behind, made child Jobs (and their pods) of copies already deleted 1-8 s after a clean
            # instant (CI runs of bac1f6e and e1288b1, the latter at load 30); the worker's garbage collector
            # deletes them later, within the slack.
            quiet = JOBSET_ORPHAN_QUIET if share else ORPHAN_QUIET
            clean_since: float | None = None
            seen: tuple[int, ...] = ()
            while True:
                ours = {u for u, c in rec.copies.items() if c.disowned_at is None}
                copies_left = any(rec.copies[u].gone is None for u in ours)
                # A JobSet copy's child Jobs, like pods, are the worker's garbage collector's to delete.
                pods_left = any(p.gone is None and p.copy_uid in ours for p in rec.pods.values()) or any(
                    ch.gone is None and ch.copy_uid in ours for ch in rec.children.values())
                at = time.time()
                # anything newly recorded restarts the quiet period
                now_seen = (len(rec.copies), len(rec.children), len(rec.pods))
                if now_seen != seen:
                    seen, clean_since = now_seen, None
                if not (copies_left or pods_left):
                    clean_since = clean_since or at
                    if at - clean_since >= quiet:
                        break
                else:
                    clean_since = None
                    if not (copies_left and at < copy_deadline) and not (pods_left and at < pod_deadline):
                        break
                await asyncio.sleep(0.25)
            await run.scrape()
    finally:
        for t in (scrape_task, supervise_task):
            if t is not None:
                t.cancel()
                await asyncio.gather(t, return_exceptions=True)
        for c in run.controllers:
            if c.proc is not None:
                await c.proc.stop()
        await checker.stop()
        await asyncio.to_thread(stop_jobset_controllers, run.jobset_controllers)
    v: ChaosVerdict = checker.verdict()
    res.update(v.summary())
    res["jobs"] = v.jobs
    res["faults"] = [[round(s - run.t0, 1), round(e - run.t0, 1)] for s, e in checker.faults]
    res["controllerStarts"] = sum(c.starts for c in run.controllers)
    res["events"] = run.events
    res["controllerExits"] = run.exits
    res["movesOff"] = run.moves_from()
    res["scenarioChecks"] = scenario_checks(name, v, res["movesOff"], run.problems)
    res["ok"] = v.ok and res["allFinished"] and not res["scenarioChecks"]
    res["verdict"] = v
    env.say(f"chaos {name}: {'OK' if res['ok'] else 'VIOLATIONS'} in {res['secondsToFinish']}s — {v.explain()}"
            + "".join(f"\n  {c}" for c in res["scenarioChecks"]))
    for client in run.clients.values():
        await client.close()
    return res


async def run_all(scenarios: list[str], n: int, seed: int, cluster: Callable[[ClusterSpec], LocalCluster],
                  log_dir: Path, timeout: float | None = None, jobsets: float | None = None) -> list[dict[str, Any]]:
    out = []
    for s in scenarios:
        try:
            out.append(await run_scenario(s, n, seed, cluster, log_dir, timeout=timeout, jobsets=jobsets))
        except Exception as exc:  # keep the other scenarios' figures
            env.say(f"chaos {s} FAILED: {type(exc).__name__}: {exc}")
            out.append({"scenario": s, "seed": seed, "error": f"{type(exc).__name__}: {exc}"[:2000], "ok": False})
    return out


def serializable(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "verdict"} for r in results]


#: how long a removed copy's pods may wait for the worker's own garbage collector (seconds)
POD_GC_SLACK = 90.0
#: how long "nothing left" must hold before the orphan check believes it (seconds); with JobSets
ORPHAN_QUIET = 3.0
JOBSET_ORPHAN_QUIET = 12.0

TABLE_HEADER = ("| scenario | Jobs | lost | duplicates during fault | duplicates after recovery | orphans "
                "| wrong outcomes | rejected writes | time to recover (s) | all finished (s) |\n"
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def table_row(r: dict[str, Any]) -> str:
    """One Markdown table row of a scenario's figures (README "Reliability")."""
    if "error" in r:
        return f"| {r['scenario']} | error: {r['error'][:80]} |"
    cols = [r["scenario"], r["jobs"], r["lost"], r["duplicatesDuringFault"], r["duplicatesAfterRecovery"],
            r["orphans"], r["wrongOutcomes"], r["rejectedWrites"], r.get("recoverSeconds"), r.get("secondsToFinish")]
    return "| " + " | ".join("-" if c is None else str(c) for c in cols) + " |"
