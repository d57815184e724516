"""kind clusters with the controller deployed from ``deploy/``, exactly as a user runs it.

``up`` does, with a timing line per phase:

1. **engine** — :func:`kindbed.engine.ensure_engine` (use the answering one, or start Debian's);
2. **images** — node, controller and workload images (:mod:`kindbed.images`, cached);
3. **clusters** — ``kind create cluster`` per cluster (one node each: the node image's static
   CNI is single-node), then wait for the ``default`` ServiceAccount and CoreDNS Ready
   (``--wait`` returns at node Ready), and ``kind load`` the controller and workload images;
   with ``no_jobs_cluster`` also ``<prefix>-no-jobs``, whose kube-controller-manager runs
   ``--controllers=*,-job-controller`` (nothing deployed: the kind differential runs the
   builtin Job controller against it and compares with a worker's kcm), made in a thread
   while the others settle and get deployed (~45 s that cost no wall time);
4. **deploy** — per worker cluster ``deploy/worker/`` and a least-privilege kubeconfig whose
   server is the one ``kind get kubeconfig --internal`` names (reachable from the manager's
   pods); an overlay of ``deploy/`` (or ``deploy/manager-as-worker/``, KEP-4368 Story 1) with
   the image, the worker kubeconfig Secret and e2e timings; server-side dry run, apply,
   rollout of 2 replicas, and a Lease holder.

With ``jobsets`` (the default) JobSet's controller (``images.jobset_image``: the bed's Go build
on scratch) is loaded and applied to every cluster from the module's own ``config/default`` in a
thread beside the other image loads, its CRD served before the deploy; the config mirrors
``kinds: [Job, JobSet]`` and ``deploy/jobset/`` grants them. Its controller's rollout (about a
minute here: the kubelet must see the webhook certificate it writes) is awaited at the end only
with ``await_jobset`` (``python -m kindbed up``); the e2e suite lets it come up while its first
tests run, and its JobSet test waits for the webhooks.

The result is written to ``<workdir>/deployment.json`` so the e2e suite (or a person) can
attach to kept clusters. ``down`` deletes every cluster this prefix made, even half-made ones.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from clusterbed import build, versions
from clusterbed.cluster import scratch_root
from kindbed import engine, images

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
JOBSET_NS = "jobset-system"
JOBSET_DEPLOYMENT = "jobset-controller-manager"
JOBSET_CRD = "jobsets.jobset.x-k8s.io"
#: the image names the module's config/default may carry (a release sets its registry's; the source has "controller")
JOBSET_UPSTREAM_IMAGES = ("us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset", "controller")
SYSTEM_NS = "jobmirror-system"
DEPLOYMENT = "jobmirror-controller"
LEASE = "jobmirror-controller"

#: Shorter periods than production so the e2e faults (a stopped worker) resolve in seconds.
#: the kind tier's controller config over deploy/'s: short periods, and one tenant with a quota of one
#: running Job (e2e namespaces e2e-quota-*: test_kind_a_tenant_quota_holds_its_second_job), and a
#: short containerStartTimeout (e2e/test_kind.py test_kind_a_copy_whose_*: a copy whose kubelet names a failure —
#: ErrImageNeverPull, FailedMount — moves after 20 s, not 300 s). Only a named failure counts as
#: stuck (an image pulling, ContainerCreating without a failure event, is progress), so the other
#: kind tests' copies are not judged by it; podsCreatedTimeout keeps its default (120 s).
E2E_CONFIG_OVERRIDES: dict[str, Any] = {
    "resyncPeriod": 10, "gcInterval": 15, "healthProbeInterval": 2, "workerLostTimeout": 30,
    "scheduling": {"tenants": [{"name": "e2e-quota", "namespaces": ["e2e-quota-*"], "quota": {"jobs": 1}}]},
    "progress": {"containerStartTimeout": 20}}

# Kubernetes >= 1.35's kubelet refuses cgroup v1 unless told otherwise; harmless on cgroup v2.
_KUBELET_PATCH = """- |
  kind: KubeletConfiguration
  apiVersion: kubelet.config.k8s.io/v1beta1
  failCgroupV1: false
"""
# One ClusterConfiguration patch. No apiVersion: kind 0.33 merges map-form extraArgs into kubeadm
# v1beta4's name/value list (its template for Kubernetes >= 1.36, e.g. 1.37.2) and into v1beta3's
# map (< 1.36) alike. The node's etcd never fsyncs: the data is thrown away with the cluster, and
# its fsyncs went through the container's overlay to the host's disk.
_CLUSTER_PATCH = """- |
  kind: ClusterConfiguration
  etcd:
    local:
      extraArgs:
        unsafe-no-fsync: "true"
"""
# kube-controller-manager without its Job controller, for the builtin controller.
_NO_JOB_CONTROLLER = """  controllerManager:
    extraArgs:
      controllers: "*,-job-controller"
"""


def kind_config(*, job_controller: bool = True, etcd_host_dir: Path | None = None) -> str:
    """The one-node cluster config; ``job_controller=False`` disables kcm's Job controller (the
    builtin controller's shape, ``--controllers=*,-job-controller``). ``etcd_host_dir``: a host
    directory (on tmpfs) bound at the node's /var/lib/etcd, so etcd's writes never reach a disk."""
    cluster_patch = _CLUSTER_PATCH + ("" if job_controller else _NO_JOB_CONTROLLER)
    mounts = ("" if etcd_host_dir is None else
              f"  extraMounts:\n  - hostPath: {etcd_host_dir}\n    containerPath: /var/lib/etcd\n")
    return ("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nkubeadmConfigPatches:\n"
            f"{_KUBELET_PATCH}{cluster_patch}nodes:\n- role: control-plane\n{mounts}")


def etcd_host_dir(cluster: str) -> Path | None:
    """The tmpfs directory that holds ``cluster``'s etcd data (None: no tmpfs with room; then it
    stays inside the node container)."""
    root = scratch_root()
    return None if root is None else root / f"jobmirror-kind-etcd-{cluster}"


class KindError(RuntimeError):
    """A step of bringing the kind environment up failed; the message names the step."""


def _log(msg: str) -> None:
    print(f"[kind] {msg}", file=sys.stderr, flush=True)


@dataclass
class KindOptions:
    prefix: str = "jobmirror"
    workers: int = 1  # 1: manager (also a worker) + worker-1; 2: manager + worker-1 + worker-2
    #: Also ``<prefix>-no-jobs``: kcm without its Job controller, nothing deployed (the kind
    #: differential runs the builtin controller against it).
    no_jobs_cluster: bool = False
    image: str = "jobmirror:e2e"
    node_image: str | None = None
    python_image: str | None = None
    workdir: Path = field(default_factory=lambda: versions.cache_root() / "kind")
    config_overrides: dict[str, Any] = field(default_factory=lambda: dict(E2E_CONFIG_OVERRIDES))
    #: JobSet installed in every cluster and mirrored (kinds [Job, JobSet], deploy/jobset/ applied)
    jobsets: bool = True
    #: wait for JobSet's controller (and so its webhooks) in every cluster before returning
    await_jobset: bool = False

    def __post_init__(self) -> None:
        if self.workers not in (1, 2):
            raise KindError(f"workers must be 1 or 2, not {self.workers}")
        if ":" not in self.image.rsplit("/", 1)[-1]:
            raise KindError(f"image needs an explicit tag (e.g. jobmirror:e2e), got {self.image!r}")

    @property
    def manager_cluster(self) -> str:
        return f"{self.prefix}-manager"

    def worker_clusters(self) -> dict[str, str]:
        """Worker name in the controller's config → kind cluster name (separate clusters only)."""
        return {f"worker-{i}": f"{self.prefix}-worker-{i}" for i in range(1, self.workers + 1)}

    @property
    def no_jobs_cluster_name(self) -> str:
        return f"{self.prefix}-no-jobs"

    def all_clusters(self) -> list[str]:
        extra = [self.no_jobs_cluster_name] if self.no_jobs_cluster else []
        return [self.manager_cluster, *self.worker_clusters().values(), *extra]

    def deletable_clusters(self) -> list[str]:
        """What ``down`` deletes when present: these clusters and an optional one of this prefix
        (a kept ``no-jobs`` cluster goes too, whatever this run's options)."""
        return list(dict.fromkeys([*self.all_clusters(), self.no_jobs_cluster_name]))


@dataclass
class KindDeployment:
    """What ``up`` made: enough for the e2e suite to attach (also as deployment.json)."""

    prefix: str
    manager_cluster: str
    clusters: list[str]
    manager_kubeconfig: str
    worker_kubeconfigs: dict[str, str]  # admin kubeconfigs by worker name ("manager" in Story 1)
    worker_clusters: dict[str, str]  # worker name -> kind cluster name
    manager_worker: str
    kustomization: str
    kubectl: str
    kind: str
    controller_image: str
    workload_image: str
    node_image: str
    workdir: str
    engine_started_pid: int | None
    timings: list[tuple[str, float]] = field(default_factory=list)
    #: Admin kubeconfig of ``<prefix>-no-jobs`` (kcm without its Job controller); "" when not made.
    no_jobs_kubeconfig: str = ""
    #: JobSet runs in every cluster and is mirrored (deploy/jobset/ applied)
    jobsets: bool = False

    def save(self) -> Path:
        path = Path(self.workdir) / "deployment.json"
        path.write_text(json.dumps(asdict(self), indent=2))
        return path

    def tool(self) -> Kind:
        """The kind/kubectl commands of this deployment."""
        return Kind(Path(self.kind), Path(self.kubectl), Path(self.workdir))

    @classmethod
    def load(cls, workdir: Path) -> KindDeployment:
        data = json.loads((workdir / "deployment.json").read_text())
        data["timings"] = [tuple(t) for t in data.get("timings", [])]
        return cls(**data)


def kind_binary() -> Path:
    return build.build_go_tool("kind", "sigs.k8s.io/kind", versions.KIND_VERSION, "sigs.k8s.io/kind")


def kubectl_binary() -> Path:
    return build.build_kubernetes(versions.KUBE_VERSION) / "kubectl"


class Kind:
    """The kind and kubectl commands, with our binaries first on PATH (never ~/.kube/config)."""

    def __init__(self, kind: Path, kubectl: Path, workdir: Path) -> None:
        self.kind = kind
        self.kubectl_bin = kubectl
        self.workdir = workdir
        self.env = {**os.environ, "PATH": f"{kubectl.parent}{os.pathsep}{kind.parent}{os.pathsep}{os.environ['PATH']}",
                    "KUBECONFIG": str(workdir / "unused.kubeconfig")}

    def run(self, *args: str, what: str, timeout: float = 600, input: str | None = None,
            quiet: bool = False) -> str:
        if not quiet:
            _log(f"+ {' '.join(args)}")
        proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=self.env, input=input)
        if proc.returncode != 0:
            raise KindError(f"{what}: `{' '.join(args)}` failed (exit {proc.returncode}):\n"
                            f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
        return proc.stdout

    def kubeconfig(self, cluster: str) -> Path:
        return self.workdir / f"{cluster}.kubeconfig"

    def kubectl(self, cluster: str, *args: str, what: str = "kubectl", timeout: float = 300,
                input: str | None = None, quiet: bool = False) -> str:
        return self.run(str(self.kubectl_bin), "--kubeconfig", str(self.kubeconfig(cluster)), *args, what=what,
                        timeout=timeout, input=input, quiet=quiet)

    def clusters(self) -> list[str]:
        return self.run(str(self.kind), "get", "clusters", what="kind get clusters", quiet=True).split()

    def create(self, cluster: str, node_image: str, *, job_controller: bool = True) -> None:
        etcd_dir = etcd_host_dir(cluster)
        exists = cluster in self.clusters()
        if exists and etcd_dir is not None and not etcd_dir.is_dir():
            # its etcd data lived on tmpfs and is gone (a reboot, an interrupted run's cleanup)
            _log(f"{cluster} exists without its etcd data ({etcd_dir}): deleting it to make it anew")
            self.delete(cluster)
            exists = False
        if exists:
            _log(f"{cluster} exists: reusing it")
        else:
            config = self.workdir / f"kind-{cluster}.yaml"
            if etcd_dir is not None:  # a new cluster's etcd starts empty (kubeadm refuses old data)
                shutil.rmtree(etcd_dir, ignore_errors=True)
                etcd_dir.mkdir(parents=True)
            config.write_text(kind_config(job_controller=job_controller, etcd_host_dir=etcd_dir))
            self.run(str(self.kind), "create", "cluster", "--name", cluster, "--image", node_image, "--config",
                     str(config), "--wait", "180s", "--kubeconfig", str(self.kubeconfig(cluster)),
                     what=f"kind create cluster {cluster}", timeout=400)
        self.kubeconfig(cluster).write_text(self.run(str(self.kind), "get", "kubeconfig", "--name", cluster,
                                                     what="kind get kubeconfig", quiet=True))

    def internal_server(self, cluster: str) -> str:
        """The API server as other containers on the kind network reach it (``--internal``)."""
        text = self.run(str(self.kind), "get", "kubeconfig", "--internal", "--name", cluster,
                        what="kind get kubeconfig --internal", quiet=True)
        return str(yaml.safe_load(text)["clusters"][0]["cluster"]["server"])

    def wait_usable(self, cluster: str, timeout: float = 180) -> None:
        """``kind create --wait`` returns at node Ready; pods also need the default SA and DNS."""
        deadline = time.monotonic() + timeout
        while not self._names(cluster, "get", "serviceaccount", "default"):
            if time.monotonic() > deadline:
                raise KindError(f"{cluster}: no default ServiceAccount after {timeout:.0f}s")
            time.sleep(1)
        # `kubectl wait -l` fails at once while no pod matches yet: first wait for CoreDNS pods to exist.
        while not self._names(cluster, "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-dns"):
            if time.monotonic() > deadline:
                raise KindError(f"{cluster}: no CoreDNS pod after {timeout:.0f}s\n"
                                + self.kubectl(cluster, "get", "pods", "-A", "-o", "wide", quiet=True))
            time.sleep(1)
        left = max(10, int(deadline - time.monotonic()))
        try:
            self.kubectl(cluster, "-n", "kube-system", "wait", "--for=condition=Ready", "pod", "-l",
                         "k8s-app=kube-dns", f"--timeout={left}s", what=f"{cluster}: CoreDNS Ready", timeout=left + 30)
        except KindError as exc:
            pods = self.kubectl(cluster, "get", "pods", "-A", "-o", "wide", quiet=True)
            raise KindError(f"{exc}\n{pods}") from None

    def _names(self, cluster: str, *args: str) -> list[str]:
        """``kubectl ... -o name``; an API server still starting answers as "nothing yet"."""
        try:
            return self.kubectl(cluster, *args, "-o", "name", quiet=True).split()
        except KindError:
            return []

    def load(self, image: str, clusters: Sequence[str]) -> None:
        for c in clusters:
            self.run(str(self.kind), "load", "docker-image", image, "--name", c, what=f"kind load {image} into {c}")

    def delete(self, cluster: str) -> None:
        self.run(str(self.kind), "delete", "cluster", "--name", cluster, what=f"kind delete cluster {cluster}",
                 timeout=180)
        if (etcd_dir := etcd_host_dir(cluster)) is not None:
            shutil.rmtree(etcd_dir, ignore_errors=True)


def _no_jobs_cluster(k: Kind, opts: KindOptions, node_image: str, workload_image: str) -> float:
    """``<prefix>-no-jobs``: made, usable, the workload image loaded; returns the seconds it took."""
    t0 = time.monotonic()
    name = opts.no_jobs_cluster_name
    k.create(name, node_image, job_controller=False)
    k.wait_usable(name)
    k.load(workload_image, [name])
    return time.monotonic() - t0


def _phase(timings: list[tuple[str, float]], what: str, t0: float) -> None:
    secs = time.monotonic() - t0
    timings.append((what, secs))
    _log(f"phase {what}: {secs:.1f}s")


def _overlay(opts: KindOptions, worker_files: list[str], story1: bool) -> Path:
    """deploy/ (or deploy/manager-as-worker/) + this image + the worker Secret + e2e periods."""
    overlay = opts.workdir / "overlay"
    overlay.mkdir(parents=True, exist_ok=True)
    base = DEPLOY / "manager-as-worker" if story1 else DEPLOY
    base_config = (base if story1 else DEPLOY / "manager" / "files") / "config.yaml"
    cfg = yaml.safe_load(base_config.read_text())
    cfg.update(opts.config_overrides)
    if opts.jobsets:
        cfg["kinds"] = ["Job", "JobSet"]
    (overlay / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    config_files = ["config.yaml"]
    if story1:
        shutil.copy(base / "in-cluster.kubeconfig", overlay / "in-cluster.kubeconfig")
        config_files.append("in-cluster.kubeconfig")
    name, _, tag = opts.image.rpartition(":")
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(base, overlay)] + (
            [os.path.relpath(DEPLOY / "jobset" / ("manager-as-worker" if story1 else "manager"), overlay)]
            if opts.jobsets else []),
        "images": [{"name": "jobmirror", "newName": name, "newTag": tag}],
        "configMapGenerator": [{"name": "jobmirror-config", "namespace": SYSTEM_NS, "behavior": "replace",
                                "files": config_files}],
        "secretGenerator": [{"name": "jobmirror-worker-kubeconfigs", "namespace": SYSTEM_NS, "behavior": "replace",
                             "files": worker_files}],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return overlay


def _deploy(k: Kind, opts: KindOptions) -> tuple[Path, dict[str, str], str]:
    """Worker identities, the overlay, apply to the manager, rollout and a leader."""
    mgr = opts.manager_cluster
    worker_files: list[str] = []
    admin_kcs: dict[str, str] = {}
    overlay_dir = opts.workdir / "overlay"
    overlay_dir.mkdir(parents=True, exist_ok=True)
    for name, cluster in opts.worker_clusters().items():
        k.kubectl(cluster, "apply", "-k", str(DEPLOY / "worker"), what=f"{cluster}: apply deploy/worker")
        if opts.jobsets:
            k.kubectl(cluster, "apply", "-k", str(DEPLOY / "jobset" / "worker"),
                      what=f"{cluster}: apply deploy/jobset/worker")
        server = k.internal_server(cluster)
        kc = k.run(str(DEPLOY / "worker" / "make-kubeconfig.sh"), "--name", name, "--kubeconfig",
                   str(k.kubeconfig(cluster)), "--server", server, "--duration", "24h",
                   what=f"{cluster}: worker kubeconfig")
        (overlay_dir / f"{name}.kubeconfig").write_text(kc)
        (overlay_dir / f"{name}.kubeconfig").chmod(0o600)
        worker_files.append(f"{name}.kubeconfig")
        admin_kcs[name] = str(k.kubeconfig(cluster))
    story1 = opts.workers == 1
    manager_worker = "manager" if story1 else ""
    if story1:
        admin_kcs["manager"] = str(k.kubeconfig(mgr))
    overlay = _overlay(opts, worker_files, story1)
    k.kubectl(mgr, "apply", "-f", str(DEPLOY / "manager" / "namespace.yaml"), what="manager: namespace")
    k.kubectl(mgr, "apply", "-k", str(overlay), "--dry-run=server", what="manager: server-side dry run")
    k.kubectl(mgr, "apply", "-k", str(overlay), what="manager: apply the overlay")
    try:
        k.kubectl(mgr, "rollout", "status", f"deployment/{DEPLOYMENT}", "-n", SYSTEM_NS, "--timeout=240s",
                  what="manager: rollout", timeout=300)
    except KindError as exc:
        raise KindError(f"{exc}\n{diagnostics(k, mgr)}") from None
    deadline = time.monotonic() + 90
    while not (holder := k.kubectl(mgr, "get", "lease", LEASE, "-n", SYSTEM_NS, "-o",
                                   "jsonpath={.spec.holderIdentity}", quiet=True).strip()):
        if time.monotonic() > deadline:
            raise KindError(f"no replica acquired Lease {SYSTEM_NS}/{LEASE}\n{diagnostics(k, mgr)}")
        time.sleep(1)
    _log(f"leader: {holder}")
    return overlay, admin_kcs, manager_worker


def _jobset_overlay(opts: KindOptions, image: str) -> Path:
    """JobSet's own ``config/default`` (CRD, RBAC, controller, webhooks with its internal certificate
    management) with our image, and a smaller CPU request than its 500m (one-node clusters)."""
    overlay = opts.workdir / "jobset"
    overlay.mkdir(parents=True, exist_ok=True)
    name, _, tag = image.rpartition(":")
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(build.jobset_source() / "config" / "default", overlay)],
        "images": [{"name": n, "newName": name, "newTag": tag} for n in JOBSET_UPSTREAM_IMAGES],
        "patches": [{"target": {"kind": "Deployment", "name": JOBSET_DEPLOYMENT},
                     "patch": yaml.safe_dump([{"op": "replace",
                                               "path": "/spec/template/spec/containers/0/resources/requests/cpu",
                                               "value": "50m"}])}],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return overlay


def _install_jobset(k: Kind, clusters: Sequence[str], overlay: Path, image: str) -> None:
    """Load JobSet's image into ``clusters`` and apply JobSet there (server-side: its CRD is too large
    for the last-applied annotation), then wait for the CRD to be served; its controller's rollout
    is awaited apart (_await_jobset)."""
    k.load(image, clusters)
    for c in clusters:
        k.kubectl(c, "apply", "--server-side", "--force-conflicts", "-k", str(overlay), what=f"{c}: apply JobSet")
    for c in clusters:
        k.kubectl(c, "wait", "--for=condition=established", f"crd/{JOBSET_CRD}", "--timeout=60s",
                  what=f"{c}: JobSet CRD established", timeout=90)


def _await_jobset(k: Kind, clusters: Sequence[str]) -> None:
    for c in clusters:
        try:
            k.kubectl(c, "rollout", "status", f"deployment/{JOBSET_DEPLOYMENT}", "-n", JOBSET_NS, "--timeout=180s",
                      what=f"{c}: JobSet rollout", timeout=210)
        except KindError as exc:
            try:
                logs = k.kubectl(c, "logs", "-n", JOBSET_NS, f"deployment/{JOBSET_DEPLOYMENT}", "--tail=60", quiet=True)
            except KindError as more:
                logs = str(more)[:800]
            raise KindError(f"{exc}\n{logs}") from None


def diagnostics(k: Kind, cluster: str) -> str:
    """The controller's pods, events and log tails: what a failed rollout needs explained."""
    out = []
    for args in (("get", "pods,deploy,lease", "-n", SYSTEM_NS, "-o", "wide"),
                 ("get", "events", "-n", SYSTEM_NS, "--sort-by=.lastTimestamp"),
                 ("logs", "-n", SYSTEM_NS, "-l", "app.kubernetes.io/name=jobmirror", "--all-containers", "--prefix",
                  "--tail=100")):
        try:
            out.append(k.kubectl(cluster, *args, quiet=True))
        except KindError as exc:
            out.append(str(exc)[:800])
    return "\n".join(out)


def up(opts: KindOptions, *, fresh: bool = False, stop_engine_on_failure: bool = False) -> KindDeployment:
    """Engine, images, clusters, deploy — each a timed phase.

    ``fresh`` deletes clusters of this prefix left by an earlier run first (otherwise they are
    reused, which is quicker when iterating). On failure, what was made is deleted, and the
    engine is stopped too if we started it and ``stop_engine_on_failure``.
    """
    opts.workdir.mkdir(parents=True, exist_ok=True)
    timings: list[tuple[str, float]] = []
    t0 = time.monotonic()
    eng = engine.ensure_engine()
    try:
        engine.ensure_host_packages()
        _phase(timings, "engine", t0)

        t0 = time.monotonic()
        imgs = images.ensure_images(opts.image, node=opts.node_image, python_image=opts.python_image,
                                    jobset=opts.jobsets)
        k = Kind(kind_binary(), kubectl_binary(), opts.workdir)
        _phase(timings, "images", t0)

        t0 = time.monotonic()
        if fresh:
            down(opts, stop_engine=False)
        main = [c for c in opts.all_clusters() if c != opts.no_jobs_cluster_name]
        for c in main:
            k.create(c, imgs.node)
        # The no-jobs cluster is made while the others settle and get deployed: after their
        # `kind create`s, since concurrent ones may pick the same free host port.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kind-no-jobs") as pool, \
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="kind-jobset") as jobset_pool:
            no_jobs = pool.submit(_no_jobs_cluster, k, opts, imgs.node, imgs.workload) if opts.no_jobs_cluster else None
            for c in main:
                k.wait_usable(c)
            jobset = jobset_pool.submit(_install_jobset, k, main, _jobset_overlay(opts, imgs.jobset),
                                        imgs.jobset) if opts.jobsets else None
            k.load(imgs.controller, [opts.manager_cluster])
            k.load(imgs.workload, main)
            _phase(timings, f"clusters ({', '.join(main)})", t0)
            if jobset is not None:
                t0 = time.monotonic()
                jobset.result()
                _phase(timings, "JobSet loaded and applied to every cluster, beside the loads above (CRD served)", t0)
            t0 = time.monotonic()
            overlay, admin_kcs, manager_worker = _deploy(k, opts)
            _phase(timings, "deploy (overlay applied, 2 replicas rolled out, Lease held)", t0)
            if opts.jobsets and opts.await_jobset:
                t0 = time.monotonic()
                _await_jobset(k, main)
                _phase(timings, "JobSet's controller ready in every cluster", t0)
            if no_jobs is not None:
                t0 = time.monotonic()
                made_in = no_jobs.result()
                _phase(timings, f"waiting for {opts.no_jobs_cluster_name} (kcm without its Job controller), made "
                                f"in {made_in:.0f}s beside the two phases above", t0)
    except BaseException:
        _log("bringing the kind environment up failed: deleting its clusters")
        down(opts, stop_engine=stop_engine_on_failure and eng.started_pid is not None)
        raise
    dep = KindDeployment(
        prefix=opts.prefix, manager_cluster=opts.manager_cluster, clusters=opts.all_clusters(),
        manager_kubeconfig=str(k.kubeconfig(opts.manager_cluster)), worker_kubeconfigs=admin_kcs,
        worker_clusters=opts.worker_clusters(), manager_worker=manager_worker, kustomization=str(overlay),
        kubectl=str(k.kubectl_bin), kind=str(k.kind), controller_image=imgs.controller, workload_image=imgs.workload,
        node_image=imgs.node, workdir=str(opts.workdir), engine_started_pid=eng.started_pid, timings=timings,
        no_jobs_kubeconfig=str(k.kubeconfig(opts.no_jobs_cluster_name)) if opts.no_jobs_cluster else "",
        jobsets=opts.jobsets)
    _log(f"ready; attach with {dep.save()}")
    return dep


def down(opts: KindOptions, *, stop_engine: bool) -> None:
    """Delete every kind cluster of this prefix (also ones a failed ``up`` half made); optionally
    stop the engine if we started it."""
    if engine.server_version() is not None:
        k = Kind(kind_binary(), kubectl_binary(), opts.workdir)
        existing = set(k.clusters())
        for c in opts.deletable_clusters():
            if c in existing:
                try:
                    k.delete(c)
                except KindError as exc:
                    _log(f"could not delete {c}: {exc}")
    if stop_engine:
        engine.stop_engine()
