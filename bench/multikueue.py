"""MultiKueue (Kueue v0.19.2) on the local bed: a manager and its workers, one Kueue process each.

Used by ``bench compare`` and the behaviour catalogue to run Kueue's MultiKueue beside
jobmirror on the same kwokctl clusters. The objects and the per-process configuration are
built by pure functions (table-tested); :class:`MultiKueue` does the I/O: certificates,
CRDs (server-side apply: the Workload CRD is too large for client-side apply), the
processes (stopped by their own PID only) and the wait for ``Active``.

Kueue is built from its Go module by :func:`clusterbed.build.build_kueue`; nothing of it is
committed. Without Kueue's webhook registered, :func:`queued_job` sets by hand what its Job
webhook would (queue label, suspended, ``managedBy``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench import env
from clusterbed import versions
from clusterbed.cluster import LocalCluster
from kruntime.resources import Obj

KUEUE_NAMESPACE = "kueue-system"
MANAGED_BY = "kueue.x-k8s.io/multikueue"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: label MultiKueue puts on the remote copies (value: the manager's origin, default "multikueue")
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
ORIGIN = "multikueue"
FLAVOR = "default-flavor"
CLUSTER_QUEUE = "cluster-queue"
LOCAL_QUEUE = "user-queue"
ADMISSION_CHECK = "multikueue"
MK_CONFIG = "multikueue"
#: Kueue reads the metrics serving certificate from this fixed path when its internal cert
#: management is off (v0.19.2 cmd/kueue); there is no flag or config field for it.
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
API = "kueue.x-k8s.io/v1beta2"


class MultiKueueError(RuntimeError):
    """MultiKueue did not come up; the message names the object or process and its state."""


@dataclass(frozen=True)
class KueueSettings:
    """Per-process knobs. Defaults are v0.19.2's shipped ``controller_manager_config.yaml``.

    Worker connections of the MultiKueue manager use client-go's 5 QPS / burst 10 in
    v0.19.2 whatever is set here: there is no setting for them in that release.
    ``worker_limits`` runs a locally patched build instead, whose worker clients take
    that QPS/burst (:func:`clusterbed.build.patch_kueue_worker_limits`: kueue#15280's effect).
    """

    qps: float = 300.0
    burst: int = 500
    job_concurrency: int = 5
    workload_concurrency: int = 10
    worker_limits: tuple[float, int] | None = None

    def label(self) -> str:
        workers = ("5/10 (fixed in v0.19.2)" if self.worker_limits is None
                   else f"{self.worker_limits[0]:g}/{self.worker_limits[1]} (local patch, kueue#15280's effect)")
        return (f"manager client {self.qps:g}/{self.burst}, Job/Workload reconcilers "
                f"{self.job_concurrency}/{self.workload_concurrency}, worker clients {workers}")

    def manager_env(self) -> dict[str, str]:
        """What the patched build reads for its worker clients (nothing for the released one)."""
        from clusterbed.build import KUEUE_WORKER_BURST_ENV, KUEUE_WORKER_QPS_ENV

        if self.worker_limits is None:
            return {}
        return {KUEUE_WORKER_QPS_ENV: f"{self.worker_limits[0]:g}", KUEUE_WORKER_BURST_ENV: str(self.worker_limits[1])}


def kueue_config(settings: KueueSettings, *, manager: bool, health_port: int, webhook_port: int,
                 cert_dir: Path) -> dict[str, Any]:
    """One Kueue process's Configuration: the shipped file's values, local ports, no leader election."""
    cfg: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "controller": {"groupKindConcurrency": {
            "Job.batch": settings.job_concurrency,
            "Workload.kueue.x-k8s.io": settings.workload_concurrency,
            "LocalQueue.kueue.x-k8s.io": 5,
            "ClusterQueue.kueue.x-k8s.io": 5,
            "ResourceFlavor.kueue.x-k8s.io": 1,
        }},
        "clientConnection": {"qps": settings.qps, "burst": settings.burst},
        "integrations": {"frameworks": ["batch/job"]},
        # the on-demand visibility server wants certificates under a fixed /visibility
        "featureGates": {"VisibilityOnDemand": False},
    }
    if manager:
        cfg["multiKueue"] = {"gcInterval": "1m", "origin": ORIGIN, "workerLostTimeout": "15m"}
    return cfg


def _cluster_queue(quota: str, admission_check: str | None) -> Obj:
    spec: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{
            "name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": quota},
                                          {"name": "memory", "nominalQuota": f"{quota}Gi"}]}]}],
    }
    if admission_check:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check}]}
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE}, "spec": spec}


def queue_objects(namespaces: list[str], quota: str, admission_check: str | None) -> list[Obj]:
    """ResourceFlavor, ClusterQueue and a LocalQueue per namespace (same names on every cluster)."""
    return [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        _cluster_queue(quota, admission_check),
        *({"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": LOCAL_QUEUE, "namespace": ns},
           "spec": {"clusterQueue": CLUSTER_QUEUE}} for ns in namespaces),
    ]


def manager_objects(workers: dict[str, str]) -> list[Obj]:
    """Secrets (flattened kubeconfigs by worker name), MultiKueueClusters, MultiKueueConfig, AdmissionCheck."""
    out: list[Obj] = []
    for name, kubeconfig in workers.items():
        out.append({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": f"{name}-secret", "namespace": KUEUE_NAMESPACE},
                    "stringData": {"kubeconfig": kubeconfig}})
        out.append({"apiVersion": API, "kind": "MultiKueueCluster", "metadata": {"name": name},
                    "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                              "location": f"{name}-secret"}}}})
    out.append({"apiVersion": API, "kind": "MultiKueueConfig", "metadata": {"name": MK_CONFIG},
                "spec": {"clusters": list(workers)}})
    out.append({"apiVersion": API, "kind": "AdmissionCheck", "metadata": {"name": ADMISSION_CHECK},
                "spec": {"controllerName": MANAGED_BY, "parameters": {
                    "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": MK_CONFIG}}})
    return out


def queued_job(job: Obj) -> Obj:
    """What Kueue's Job webhook would make of ``job`` on the manager (no webhook is registered here)."""
    out = copy.deepcopy(job)
    out["metadata"].setdefault("labels", {})[QUEUE_LABEL] = LOCAL_QUEUE
    out["spec"]["suspend"] = True
    out["spec"]["managedBy"] = MANAGED_BY
    return out


def condition_true(obj: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def _self_signed(dir_: Path) -> None:
    dir_.mkdir(parents=True, exist_ok=True)
    if (dir_ / "tls.crt").is_file() and (dir_ / "tls.key").is_file():
        return
    proc = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(dir_ / "tls.key"), "-out", str(dir_ / "tls.crt")],
        capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise MultiKueueError(f"openssl could not make a certificate in {dir_}: {proc.stderr[-500:]}")


def _apply(cluster: LocalCluster, objs: list[Obj] | None = None, path: Path | None = None) -> None:
    args = ["apply", "--server-side", "--force-conflicts", "--field-manager", "bench-multikueue"]
    if path is not None:
        proc = cluster.kubectl(*args, "-f", str(path), check=False)
    else:
        text = "\n---\n".join(yaml.safe_dump(o) for o in objs or [])
        proc = cluster.kubectl(*args, "-f", "-", check=False, input=text)
    if proc.returncode != 0:
        raise MultiKueueError(f"{cluster.name}: kubectl apply failed: {proc.stderr[-2000:]}")


def _get(cluster: LocalCluster, kind: str, name: str) -> Obj | None:
    proc = cluster.kubectl("get", kind, name, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def flattened_kubeconfig(cluster: LocalCluster) -> str:
    """Kueue refuses CA file paths, token files and exec plugins: inline everything."""
    proc = cluster.kubectl("config", "view", "--raw", "--minify", "--flatten", check=False)
    if proc.returncode != 0:
        raise MultiKueueError(f"{cluster.name}: kubectl config view failed: {proc.stderr[-500:]}")
    return proc.stdout


class MultiKueue:
    """Kueue in the manager and in every worker, set up for MultiKueue over ``namespaces``."""

    def __init__(self, workdir: Path, manager: LocalCluster, workers: dict[str, LocalCluster],
                 namespaces: list[str], settings: KueueSettings, *, quota: str = "100000",
                 log_dir: Path | None = None) -> None:
        self.workdir = workdir
        self.manager = manager
        self.workers = workers
        self.namespaces = namespaces
        self.settings = settings
        self.quota = quota
        self.log_dir = log_dir or workdir / "logs"
        self.procs: dict[str, env.ControllerProcess] = {}

    @property
    def clusters(self) -> dict[str, LocalCluster]:
        return {self.manager.name: self.manager, **self.workers}

    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.procs.items() if p.proc is not None}

    def _prepare(self, binary: Path, src: Path) -> None:
        """CRDs, namespaces and queues everywhere; the MultiKueue objects on the manager."""
        _self_signed(METRICS_CERT_DIR)
        crds = src / "config" / "components" / "crd" / "bases"
        for c in self.clusters.values():
            _apply(c, path=crds)
            for _ in range(20):  # a CRD just applied may have no status yet: kubectl wait then errors out
                proc = c.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=120s",
                                 check=False)
                if proc.returncode == 0:
                    break
                time.sleep(0.5)
            if proc.returncode != 0:
                raise MultiKueueError(f"{c.name}: Kueue CRDs not Established: {proc.stderr[-500:]}")
            _apply(c, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                       for ns in [KUEUE_NAMESPACE, *self.namespaces]])
        _apply(self.manager, manager_objects({w: flattened_kubeconfig(c) for w, c in self.workers.items()}))
        for c in self.workers.values():
            _apply(c, queue_objects(self.namespaces, self.quota, None))
        _apply(self.manager, queue_objects(self.namespaces, self.quota, ADMISSION_CHECK))

    def _start(self, binary: Path, name: str, cluster: LocalCluster, manager: bool) -> env.ControllerProcess:
        cert_dir = self.workdir / f"kueue-{name}-certs"
        _self_signed(cert_dir)
        health = env.free_port()
        cfg = kueue_config(self.settings, manager=manager, health_port=health, webhook_port=env.free_port(),
                           cert_dir=cert_dir)
        cfg_path = self.workdir / f"kueue-{name}.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg))
        proc = env.ControllerProcess(
            f"kueue-{name}", [str(binary), "--config", str(cfg_path), "--kubeconfig", str(cluster.kubeconfig),
                              f"--zap-log-level={os.environ.get('JOBMIRROR_KUEUE_LOG_LEVEL', 'error')}"],
            self.log_dir / f"kueue-{name}.log", health, env=self.settings.manager_env() if manager else None)
        proc.start()
        self.procs[name] = proc
        return proc

    async def start(self, timeout: float = 180) -> float:
        """Set everything up and wait until the clusters, the check and the queue are Active (returns seconds)."""
        from clusterbed.build import build_kueue, kueue_source

        t0 = time.monotonic()
        binary = await asyncio.to_thread(build_kueue, versions.KUEUE_VERSION,
                                         worker_limits_patch=self.settings.worker_limits is not None)
        src = await asyncio.to_thread(kueue_source, versions.KUEUE_VERSION)
        await asyncio.to_thread(self._prepare, binary, src)
        for name, c in self.workers.items():
            self._start(binary, name, c, manager=False)
        self._start(binary, self.manager.name, self.manager, manager=True)
        for p in self.procs.values():
            await p.wait_ready(timeout)
        await self.wait_active(timeout - (time.monotonic() - t0))
        return time.monotonic() - t0

    def _inactive(self) -> list[str]:
        pending = []
        for kind, name in ([("multikueuecluster", w) for w in self.workers]
                           + [("admissioncheck", ADMISSION_CHECK), ("clusterqueue", CLUSTER_QUEUE)]):
            obj = _get(self.manager, kind, name)
            if obj is None or not condition_true(obj, "Active"):
                conds = (obj or {}).get("status", {}).get("conditions") or []
                pending.append(f"{kind}/{name} {[(c.get('type'), c.get('status'), c.get('message')) for c in conds]}")
        for w, c in self.workers.items():
            obj = _get(c, "clusterqueue", CLUSTER_QUEUE)
            if obj is None or not condition_true(obj, "Active"):
                pending.append(f"{w}: clusterqueue/{CLUSTER_QUEUE}")
        return pending

    async def wait_active(self, timeout: float) -> None:
        deadline = time.monotonic() + max(timeout, 10)
        while True:
            pending = await asyncio.to_thread(self._inactive)
            if not pending:
                return
            for p in self.procs.values():
                if not p.alive():
                    raise MultiKueueError(f"{p.name} exited with {p.proc.returncode if p.proc else None}:\n"
                                          f"{p.log_tail()}")
            if time.monotonic() > deadline:
                raise MultiKueueError("MultiKueue not Active: " + "; ".join(pending))
            await asyncio.sleep(1)

    async def stop(self) -> None:
        for p in self.procs.values():
            await p.stop()
