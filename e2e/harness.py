"""The e2e harness: a manager and its workers, deploy/ applied, the controller running as its ServiceAccount.

Two providers (``JOBMIRROR_E2E_PROVIDER``):

``local`` (default)
    Three local control planes from the cluster bed (manager without nodes, two workers
    with kube-controller-manager's Job controller and kwok nodes). ``deploy/`` is
    applied to the manager (server-side dry run first), ``deploy/worker/`` to each
    worker, and the controller runs as a local process ``jobmirror run --config ...``
    whose kubeconfigs carry ServiceAccount tokens from the TokenRequest API: the
    manager's ``jobmirror-system/jobmirror`` and each worker's
    ``jobmirror-system/jobmirror-worker``. Never an admin identity, so a missing RBAC
    rule fails the journeys.

``kind``
    Kind clusters with the controller deployed as a Deployment (``kindbed``: engine, locally
    built images, clusters, ``deploy/`` overlay). The session brings them up and deletes
    them afterwards, or attaches to a kept deployment when ``JOBMIRROR_E2E_KIND_WORKDIR``
    names a directory with a ``deployment.json`` (``python -m kindbed up``).
    ``JOBMIRROR_E2E_KIND_WORKERS=2`` gives a manager + two workers instead of the manager
    (also a worker, KEP-4368 Story 1) + one. ``JOBMIRROR_E2E_KIND_PREFIX=p`` makes a second,
    independent environment (clusters ``p-*``, its own workdir and controller image tag).
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import aiohttp
import yaml

from clusterbed import versions as clusterbed_versions
from kruntime.client import ClusterClient
from kruntime.resources import JOBS, LEASES, Obj, Resource
from testkit.jobs import make_job
from testkit.waiting import get_or_none, wait_for

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
MANAGER_BASE = DEPLOY / "manager"
WORKER_KUSTOMIZATION = DEPLOY / "worker"
STORY1_KUSTOMIZATION = DEPLOY / "manager-as-worker"
#: The JobSet opt-in (config kinds [Job, JobSet]): manager, worker and Story 1 kustomizations.
JOBSET_KUSTOMIZATIONS = DEPLOY / "jobset"

SYSTEM_NS = "jobmirror-system"
CONTROLLER_SA = "jobmirror"
WORKER_SA = "jobmirror-worker"
CONTROLLER_USER = f"system:serviceaccount:{SYSTEM_NS}:{CONTROLLER_SA}"
WORKER_USER = f"system:serviceaccount:{SYSTEM_NS}:{WORKER_SA}"
LEASE_NAME = "jobmirror-controller"
DEPLOYMENT = "jobmirror-controller"
POLICY = "jobmirror-own-jobs-only"

CONTROLLER_NAME = "jobmirror.dev/controller"
LABEL_ORIGIN = "jobmirror.dev/origin"
LABEL_ORIGIN_UID = "jobmirror.dev/origin-uid"
ANNOTATION_ORIGIN_JOB = "jobmirror.dev/origin-job"
ANNOTATION_CLUSTER = "jobmirror.dev/cluster"
ANNOTATION_PIN = "jobmirror.dev/pin-cluster"
FINALIZER = "jobmirror.dev/cleanup"

SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
SECRETS = Resource("", "v1", "secrets", "Secret")
POD_RES = Resource("", "v1", "pods", "Pod")
SAR = Resource("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False)
SSAR = Resource("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", namespaced=False)
SSRR = Resource("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", namespaced=False)


def log(msg: str) -> None:
    print(f"[e2e] {msg}", file=sys.stderr, flush=True)


# -- kubectl and kubeconfigs ----------------------------------------------------------------


@dataclass
class Kubectl:
    """kubectl against one cluster as its admin."""

    binary: str
    kubeconfig: Path

    def __call__(self, *args: str, check: bool = True, input: str | None = None,
                 timeout: float = 120) -> subprocess.CompletedProcess[str]:
        cmd = [self.binary, "--kubeconfig", str(self.kubeconfig), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, input=input, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"`kubectl {' '.join(args)}` failed ({proc.returncode}):\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc


def kubeconfig_cluster(path: Path) -> dict[str, Any]:
    """The current context's cluster entry (server + CA) of a kubeconfig."""
    data = yaml.safe_load(path.read_text())
    ctx_name = data.get("current-context")
    ctx = next((c["context"] for c in data.get("contexts", []) if c["name"] == ctx_name), None)
    cluster_name = ctx["cluster"] if ctx else data["clusters"][0]["name"]
    cluster: dict[str, Any] = next(c["cluster"] for c in data["clusters"] if c["name"] == cluster_name)
    ca = cluster.get("certificate-authority")
    if ca and not Path(ca).is_absolute():
        cluster = {**cluster, "certificate-authority": str((path.parent / ca).resolve())}
    return cluster


def write_token_kubeconfig(path: Path, *, name: str, cluster: dict[str, Any], token: str) -> Path:
    """A kubeconfig for ``cluster`` (server + CA of an admin kubeconfig) authenticating with ``token``."""
    entry = {k: v for k, v in cluster.items() if k in ("server", "certificate-authority", "certificate-authority-data")}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": entry}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


async def request_token(admin: ClusterClient, namespace: str, sa: str, seconds: int = 7200) -> str:
    """A bound ServiceAccount token from the TokenRequest API (POST serviceaccounts/<sa>/token)."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}}
    resp = await admin.request("POST", SERVICEACCOUNTS.path(namespace, sa, "token"), body=body)
    return str(resp["status"]["token"])


async def token_client(admin: ClusterClient, admin_kubeconfig: Path, dest: Path, *, cluster_name: str,
                       namespace: str, sa: str) -> tuple[ClusterClient, Path]:
    """A client (and its kubeconfig file) acting as ServiceAccount ``namespace/sa``."""
    token = await request_token(admin, namespace, sa)
    path = write_token_kubeconfig(dest, name=cluster_name, cluster=kubeconfig_cluster(admin_kubeconfig), token=token)
    return await ClusterClient.from_kubeconfig(f"{cluster_name}-as-{sa}", path, qps=0), path


# -- small API helpers ----------------------------------------------------------------------


def conditions(job: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in (job.get("status") or {}).get("conditions") or []}


def condition_true(job: Obj, ctype: str) -> bool:
    return conditions(job).get(ctype, {}).get("status") == "True"


# -- the environment ------------------------------------------------------------------------


@dataclass
class ControllerProcess:
    """``jobmirror run`` as a local subprocess (provider local)."""

    proc: subprocess.Popen[bytes]
    log_path: Path
    metrics_port: int

    def tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@dataclass
class E2EEnv:
    provider: str
    manager: ClusterClient  # admin
    manager_kubeconfig: Path  # admin
    workers: dict[str, ClusterClient]  # admin clients, by the worker names of the controller's config
    worker_kubeconfigs: dict[str, Path]  # admin
    kubectl: Kubectl  # manager admin
    kubectl_binary: str
    kustomization: Path  # what is applied to the manager
    manager_worker: str  # worker name that is the manager itself (KEP-4368 Story 1), "" if none
    pod_image: str
    workdir: Path
    #: Server-side dry runs done while bringing the environment up: (cluster, kustomization) → result.
    dry_runs: dict[tuple[str, str], subprocess.CompletedProcess[str]] = field(default_factory=dict)
    timings: list[tuple[str, float]] = field(default_factory=list)
    #: Figures the tests measured (takeover times, delays), printed in the session summary.
    notes: list[str] = field(default_factory=list)
    controller: ControllerProcess | None = None
    controller_config: Path | None = None
    bed: Any = None
    kind: Any = None  # kindbed.clusters.KindDeployment (provider kind)
    kind_owned: bool = False  # this session brought the kind clusters up (and takes them down)
    _clients: list[ClusterClient] = field(default_factory=list)

    def kubectl_for(self, worker: str) -> Kubectl:
        return Kubectl(self.kubectl_binary, self.worker_kubeconfigs[worker])

    def separate_workers(self) -> dict[str, ClusterClient]:
        """Workers that are separate clusters (deploy/worker/ applied, jobmirror-worker identity)."""
        return {n: c for n, c in self.workers.items() if n != self.manager_worker}

    async def controller_client(self) -> ClusterClient:
        """A manager client acting as the controller's ServiceAccount (fresh TokenRequest)."""
        c, _ = await token_client(self.manager, self.manager_kubeconfig, self.workdir / "probe-controller.kubeconfig",
                                  cluster_name="manager", namespace=SYSTEM_NS, sa=CONTROLLER_SA)
        self._clients.append(c)
        return c

    async def worker_sa_client(self, worker: str) -> ClusterClient:
        c, _ = await token_client(self.workers[worker], self.worker_kubeconfigs[worker],
                                  self.workdir / f"probe-{worker}.kubeconfig", cluster_name=worker,
                                  namespace=SYSTEM_NS, sa=WORKER_SA)
        self._clients.append(c)
        return c

    def kind_diagnostics(self) -> str:
        """The deployed controller's pods, events and logs (provider kind)."""
        from kindbed import clusters as kind_clusters

        return kind_clusters.diagnostics(self.kind.tool(), self.kind.manager_cluster)

    def controller_log_tail(self, lines: int = 80) -> str:
        if self.controller is not None:
            return self.controller.tail(lines)
        if self.provider == "kind":
            proc = self.kubectl("logs", "-n", SYSTEM_NS, "-l", "app.kubernetes.io/name=jobmirror", "--prefix",
                                f"--tail={lines}", "--all-containers", check=False)
            return proc.stdout + proc.stderr
        return "(controller not started)"

    def controller_log(self) -> str:
        if self.controller is not None:
            return self.controller.log_path.read_text(errors="replace")
        if self.provider == "kind":
            proc = self.kubectl("logs", "-n", SYSTEM_NS, "-l", "app.kubernetes.io/name=jobmirror", "--prefix",
                                "--tail=-1", "--all-containers", check=False)
            return proc.stdout
        return ""

    async def controller_metrics(self) -> dict[str, str]:
        """The /metrics text of each controller process (local: its port; kind: each Pod via the API proxy)."""
        if self.controller is not None:
            async with aiohttp.ClientSession() as s, s.get(
                    f"http://127.0.0.1:{self.controller.metrics_port}/metrics",
                    timeout=aiohttp.ClientTimeout(total=5)) as r:
                return {"local": await r.text()}
        out: dict[str, str] = {}
        pods, _ = await self.manager.list_all(POD_RES, SYSTEM_NS, label_selector="app.kubernetes.io/name=jobmirror")
        for pod in cast(list[Obj], pods):
            name = pod["metadata"]["name"]
            resp = await self.manager._send("GET", f"/api/v1/namespaces/{SYSTEM_NS}/pods/{name}:8080/proxy/metrics")
            try:
                out[name] = (await resp.read()).decode(errors="replace") if resp.status == 200 else ""
            finally:
                resp.release()
        return out

    async def close(self) -> None:
        for c in {id(c): c for c in [*self._clients, self.manager, *self.workers.values()]}.values():
            await c.close()


def _timed(env_timings: list[tuple[str, float]], what: str, start: float) -> None:
    env_timings.append((what, time.monotonic() - start))
    log(f"{what}: {time.monotonic() - start:.1f}s")


def apply_with_server_dry_run(kubectl: Kubectl, cluster: str, kustomization: Path, namespace_file: Path,
                              dry_runs: dict[tuple[str, str], subprocess.CompletedProcess[str]],
                              *, apply: bool = True) -> None:
    """Namespace first (a server dry run cannot create into a namespace that does not exist yet),
    then ``kubectl apply -k --dry-run=server`` (recorded), then the real apply."""
    kubectl("apply", "-f", str(namespace_file))
    rel = str(kustomization.relative_to(ROOT))
    dry = kubectl("apply", "-k", str(kustomization), "--dry-run=server", check=False)
    dry_runs[(cluster, rel)] = dry
    log(f"{cluster}: kubectl apply -k {rel} --dry-run=server → rc={dry.returncode}")
    if dry.returncode != 0:
        raise AssertionError(f"{cluster}: `kubectl apply -k {rel} --dry-run=server` failed:\n"
                             f"{dry.stdout}\n{dry.stderr}")
    if apply:
        kubectl("apply", "-k", str(kustomization))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_controller_config(dest: Path, manager_kubeconfig: Path, workers: dict[str, Path], metrics_port: int) -> Path:
    """The shipped deploy/manager/files/config.yaml with local paths and shorter periods."""
    cfg = yaml.safe_load((MANAGER_BASE / "files" / "config.yaml").read_text())
    shipped = [w["name"] for w in cfg["workers"]]
    if sorted(shipped) != sorted(workers):
        raise AssertionError(f"deploy config lists workers {shipped}, the e2e bed has {sorted(workers)}")
    cfg["managerKubeconfig"] = str(manager_kubeconfig)
    cfg["workers"] = [{**w, "kubeconfig": str(workers[w["name"]])} for w in cfg["workers"]]
    cfg["metricsAddress"] = f"127.0.0.1:{metrics_port}"
    cfg["resyncPeriod"] = 10
    cfg["gcInterval"] = 15
    cfg["healthProbeInterval"] = 2
    dest.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return dest


async def bring_up_local(keep: bool = False) -> E2EEnv:
    from clusterbed.cluster import ClusterBed
    from tests.conftest import MANAGER, WORKER_1, WORKER_2

    workdir = Path(tempfile.mkdtemp(prefix="jobmirror-e2e-"))
    timings: list[tuple[str, float]] = []
    bed = ClusterBed()
    t0 = time.monotonic()
    try:
        for spec in (MANAGER, WORKER_1, WORKER_2):
            await asyncio.to_thread(bed.create, spec)
    except BaseException:
        if not keep:
            bed.down()
        raise
    _timed(timings, "3 clusters up (manager, worker-1, worker-2)", t0)
    mgr = bed.clusters[MANAGER.name]
    kubectl_bin = str(bed.binaries.kubectl)
    env = E2EEnv(
        provider="local",
        manager=await ClusterClient.from_kubeconfig("manager", mgr.kubeconfig, qps=0),
        manager_kubeconfig=mgr.kubeconfig,
        workers={},
        worker_kubeconfigs={},
        kubectl=Kubectl(kubectl_bin, mgr.kubeconfig),
        kubectl_binary=kubectl_bin,
        kustomization=DEPLOY,
        manager_worker="",
        pod_image=os.environ.get("JOBMIRROR_E2E_POD_IMAGE", "jobmirror:e2e"),
        workdir=workdir,
        timings=timings,
        bed=bed,
    )
    for spec in (WORKER_1, WORKER_2):
        c = bed.clusters[spec.name]
        env.workers[spec.name] = await ClusterClient.from_kubeconfig(spec.name, c.kubeconfig, qps=0)
        env.worker_kubeconfigs[spec.name] = c.kubeconfig

    t0 = time.monotonic()

    def apply_all() -> None:
        apply_with_server_dry_run(env.kubectl, "manager", DEPLOY, MANAGER_BASE / "namespace.yaml", env.dry_runs)
        # Story 1 overlay and the JobSet opt-in: validated by the server too, not applied (the bed
        # manager has no nodes; test_deploy applies the JobSet RBAC for its own check, then removes it).
        for kust in (STORY1_KUSTOMIZATION, JOBSET_KUSTOMIZATIONS / "manager",
                     JOBSET_KUSTOMIZATIONS / "manager-as-worker"):
            dry = env.kubectl("apply", "-k", str(kust), "--dry-run=server", check=False)
            env.dry_runs[("manager", str(kust.relative_to(ROOT)))] = dry
        for name in env.workers:
            apply_with_server_dry_run(env.kubectl_for(name), name, WORKER_KUSTOMIZATION,
                                      WORKER_KUSTOMIZATION / "namespace.yaml", env.dry_runs)
            dry = env.kubectl_for(name)("apply", "-k", str(JOBSET_KUSTOMIZATIONS / "worker"), "--dry-run=server",
                                        check=False)
            env.dry_runs[(name, str((JOBSET_KUSTOMIZATIONS / "worker").relative_to(ROOT)))] = dry

    await asyncio.to_thread(apply_all)
    _timed(timings, "deploy/ on the manager, deploy/worker/ on the workers (dry run + apply)", t0)
    return env


async def start_local_controller(env: E2EEnv) -> ControllerProcess:
    """Run ``jobmirror run`` with ServiceAccount-token kubeconfigs only; wait for /readyz and the Lease."""
    t0 = time.monotonic()
    exe = shutil.which("jobmirror", path=str(Path(sys.executable).parent)) or shutil.which("jobmirror")
    if exe is None:
        raise AssertionError("no `jobmirror` console script in the venv (pip install -e . after mirror/cli.py exists)")
    _, mgr_kc = await token_client(env.manager, env.manager_kubeconfig, env.workdir / "manager-sa.kubeconfig",
                                   cluster_name="manager", namespace=SYSTEM_NS, sa=CONTROLLER_SA)
    worker_kcs: dict[str, Path] = {}
    for name in env.workers:
        _, worker_kcs[name] = await token_client(env.workers[name], env.worker_kubeconfigs[name],
                                                 env.workdir / f"{name}.kubeconfig", cluster_name=name,
                                                 namespace=SYSTEM_NS, sa=WORKER_SA)
    port = free_port()
    cfg = local_controller_config(env.workdir / "config.yaml", mgr_kc, worker_kcs, port)
    env.controller_config = cfg
    # The controller reads JOBMIRROR_* overrides: give it none but its config file.
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("JOBMIRROR_")}
    child_env["PYTHONUNBUFFERED"] = "1"
    check = subprocess.run([exe, "check-config", str(cfg)], capture_output=True, text=True, env=child_env, timeout=60)
    if check.returncode != 0:
        raise AssertionError(f"`jobmirror check-config` rejected the e2e config ({check.returncode}):\n"
                             f"{check.stdout}\n{check.stderr}")
    log_path = env.workdir / "controller.log"
    logf = log_path.open("wb")
    proc = subprocess.Popen([exe, "run", "--config", str(cfg)], stdout=logf, stderr=subprocess.STDOUT,
                            env=child_env, cwd=env.workdir)
    logf.close()
    ctl = ControllerProcess(proc, log_path, port)
    env.controller = ctl
    log(f"controller pid {proc.pid}, log {log_path}, metrics 127.0.0.1:{port}")

    async def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"jobmirror run exited with {proc.returncode}:\n{ctl.tail()}")
        try:
            async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/readyz",
                                                            timeout=aiohttp.ClientTimeout(total=2)) as r:
                return r.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    try:
        await wait_for(ready, timeout=60, interval=0.3, what="controller /readyz")
        await wait_for_leader(env)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- controller log ---\n{ctl.tail()}") from None
    _timed(env.timings, "controller running as its ServiceAccount (ready + Lease held)", t0)
    return ctl


async def wait_for_leader(env: E2EEnv, timeout: float = 60) -> str:
    async def holder() -> str | None:
        lease = await get_or_none(env.manager, LEASES, SYSTEM_NS, LEASE_NAME)
        return (lease or {}).get("spec", {}).get("holderIdentity") or None

    return str(await wait_for(holder, timeout=timeout, what=f"Lease {SYSTEM_NS}/{LEASE_NAME} to have a holder"))


async def bring_up_kind(keep: bool = False, *, no_jobs_cluster: bool = False) -> E2EEnv:
    """Provider kind: attach to a deployment (``JOBMIRROR_E2E_KIND_WORKDIR`` with a deployment.json,
    e.g. from ``python -m kindbed up``), or bring one up here with kindbed and own it.
    ``no_jobs_cluster``: also a cluster without kcm's Job controller (the kind differential's)."""
    from kindbed import clusters as kind_clusters

    attach = os.environ.get("JOBMIRROR_E2E_KIND_WORKDIR", "")
    if attach:
        dep = kind_clusters.KindDeployment.load(Path(attach))
        owned = False
        log(f"attached to the kind deployment in {attach} (left running afterwards)")
    else:
        # A second prefix gives a second, independent environment (own clusters, workdir and
        # controller image tag), e.g. two checkouts testing on one engine at once.
        prefix = os.environ.get("JOBMIRROR_E2E_KIND_PREFIX") or "jobmirror"
        extra: dict[str, Any] = {} if prefix == "jobmirror" else {
            "workdir": clusterbed_versions.cache_root() / f"kind-{prefix}", "image": f"jobmirror:e2e-{prefix}"}
        opts = kind_clusters.KindOptions(prefix=prefix,
                                         workers=int(os.environ.get("JOBMIRROR_E2E_KIND_WORKERS", "1")),
                                         node_image=os.environ.get("JOBMIRROR_KIND_NODE_IMAGE") or None,
                                         python_image=os.environ.get("JOBMIRROR_KIND_PYTHON_IMAGE") or None,
                                         no_jobs_cluster=no_jobs_cluster, **extra)
        dep = await asyncio.to_thread(kind_clusters.up, opts, fresh=True, stop_engine_on_failure=not keep)
        owned = True
    mgr_kc = Path(dep.manager_kubeconfig)
    workdir = Path(tempfile.mkdtemp(prefix="jobmirror-e2e-"))
    env = E2EEnv(
        provider="kind",
        manager=await ClusterClient.from_kubeconfig("manager", mgr_kc, qps=0),
        manager_kubeconfig=mgr_kc,
        workers={},
        worker_kubeconfigs={},
        kubectl=Kubectl(dep.kubectl, mgr_kc),
        kubectl_binary=dep.kubectl,
        kustomization=Path(dep.kustomization),
        manager_worker=dep.manager_worker,
        pod_image=dep.workload_image,
        workdir=workdir,
        timings=list(dep.timings),
        kind=dep,
        kind_owned=owned,
    )
    for name, path in dep.worker_kubeconfigs.items():
        env.worker_kubeconfigs[name] = Path(path)
        env.workers[name] = (env.manager if name == env.manager_worker
                             else await ClusterClient.from_kubeconfig(name, Path(path), qps=0))
    t0 = time.monotonic()

    def dry_run_all() -> None:
        dry = env.kubectl("apply", "-k", str(env.kustomization), "--dry-run=server", check=False)
        env.dry_runs[("manager", str(env.kustomization))] = dry
        for name in env.separate_workers():
            dry = env.kubectl_for(name)("apply", "-k", str(WORKER_KUSTOMIZATION), "--dry-run=server", check=False)
            env.dry_runs[(name, str(WORKER_KUSTOMIZATION.relative_to(ROOT)))] = dry

    await asyncio.to_thread(dry_run_all)
    _timed(env.timings, "server-side dry runs of the deployed kustomizations", t0)
    return env


def take_down_kind(env: E2EEnv) -> None:
    """Delete the kind clusters this session made and stop the engine if it is ours."""
    from kindbed import clusters as kind_clusters

    dep = env.kind
    if dep is None or not env.kind_owned:
        return
    opts = kind_clusters.KindOptions(prefix=dep.prefix, workers=len(dep.worker_clusters), workdir=Path(dep.workdir))
    kind_clusters.down(opts, stop_engine=dep.engine_started_pid is not None)


async def check_kind_controller(env: E2EEnv) -> None:
    """Provider kind: the Deployment is rolled out (2 ready replicas) and one replica holds the Lease."""
    t0 = time.monotonic()

    async def rolled_out() -> Obj | None:
        d = await env.manager.get(DEPLOYMENTS, SYSTEM_NS, DEPLOYMENT)
        st = d.get("status", {})
        want = d["spec"].get("replicas", 1)
        ok = st.get("readyReplicas") == want and st.get("updatedReplicas") == want
        return d if ok else None

    await wait_for(rolled_out, timeout=180, interval=1, what=f"Deployment {SYSTEM_NS}/{DEPLOYMENT} ready")
    await wait_for_leader(env)
    _timed(env.timings, "deployed controller ready (2 replicas, Lease held)", t0)


# -- Jobs for the journeys ------------------------------------------------------------------

#: Shell for the workload image (busybox on kind); kwok ignores the command and reads the label.
_SCRIPTS = {
    "succeed": "sleep {s}",
    "fail": "sleep {s}; exit {code}",
    "hang": "sleep 3600",
}


def job_manifest(name: str, *, image: str, outcome: str = "succeed", seconds: float = 1, completions: int = 1,
                 parallelism: int = 1,
                 backoff_limit: int = 6, suspend: bool = False, indexed: bool = False,
                 success_policy: Obj | None = None, managed_by: str | None = CONTROLLER_NAME,
                 pin: str | None = None, exit_code: int = 1, pod_failure_policy: Obj | None = None) -> Obj:
    """A Job whose pods succeed, fail or hang: kwok stages read the label, real containers run the script."""
    script = _SCRIPTS[outcome].format(s=max(1, math.ceil(seconds)), code=exit_code)
    return make_job(name, managed_by=managed_by, annotations={ANNOTATION_PIN: pin} if pin else None,
                    completions=completions, parallelism=parallelism, backoff_limit=backoff_limit, suspend=suspend,
                    indexed=indexed, success_policy=success_policy, pod_failure_policy=pod_failure_policy,
                    outcome=outcome, duration_ms=int(seconds * 1000), exit_code=exit_code, image=image,
                    command=["sh", "-c", script], container={"imagePullPolicy": "IfNotPresent"},
                    pod_spec={"terminationGracePeriodSeconds": 1})


async def remote_copies(env: E2EEnv, namespace: str, uid: str) -> list[tuple[str, Obj]]:
    """Every copy of manager Job ``uid`` in every worker (by the origin-uid label)."""
    found: list[tuple[str, Obj]] = []
    for name, client in env.workers.items():
        items, _ = await client.list_all(JOBS, namespace, label_selector=f"{LABEL_ORIGIN_UID}={uid}")
        found.extend((name, j) for j in cast(list[Obj], items))
    return found
