"""Run real local Kubernetes clusters with kwokctl's binary runtime.

Each :class:`ClusterBed` owns a private kwok work directory, so several beds (and
parallel test sessions) never see each other's clusters. kwokctl starts etcd,
kube-apiserver, optionally kube-controller-manager, kube-scheduler and the kwok
controller (fake nodes) as local processes, from the binaries built by
:mod:`clusterbed.build`; nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterbed import versions
from clusterbed.build import KUBE_COMMANDS, Binaries, ensure_binaries

STAGES_FILE = Path(__file__).resolve().parent.parent / "config" / "kwok-stages.yaml"


#: tmpfs for the beds' etcd data and logs: etcd's writes then cost no disk I/O (a warm make test on
#: 2 cores went from 1815 s to 1760 s). Used when it has room; JOBMIRROR_SCRATCH names another
#: directory ("" for the system's temporary directory).
_TMPFS = Path("/dev/shm")
_TMPFS_MIN_FREE = 4 << 30


def scratch_root() -> Path | None:
    """Where beds keep throwaway cluster data: JOBMIRROR_SCRATCH, else tmpfs with room, else None
    (the system's temporary directory)."""
    chosen = os.environ.get("JOBMIRROR_SCRATCH")
    if chosen is not None:
        return Path(chosen) if chosen else None
    if _TMPFS.is_dir() and os.access(_TMPFS, os.W_OK):
        with contextlib.suppress(OSError):
            if shutil.disk_usage(_TMPFS).free >= _TMPFS_MIN_FREE:
                return _TMPFS
    return None


def scratch_dir(prefix: str) -> Path:
    """A new private directory for one bed's clusters (etcd data, component logs, kubeconfigs)."""
    root = scratch_root()
    return Path(tempfile.mkdtemp(prefix=prefix, dir=str(root) if root else None))


class BedError(RuntimeError):
    """A cluster failed to start or stop; the message carries the component logs."""


@dataclass(frozen=True)
class ClusterSpec:
    """What one local cluster runs.

    ``controller_manager``: run kube-controller-manager at all.
    ``job_controller``: keep its Job controller on (off = our builtin controller's shape).
    ``nodes``: kwok fake nodes (with scheduler + kwok controller) so pods run and finish;
    0 = no pods run unless a test drives them as a kubelet would.
    """

    name: str
    kube_version: str = versions.KUBE_VERSION
    controller_manager: bool = True
    job_controller: bool = True
    nodes: int = 2
    feature_gates: str = ""
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kube_commands(self) -> tuple[str, ...]:
        """The control-plane commands of this release the cluster starts: only these are built."""
        return ("kube-apiserver",
                *(("kube-controller-manager",) if self.controller_manager else ()),
                *(("kube-scheduler",) if self.nodes > 0 else ()))


def _log(msg: str) -> None:
    print(f"[clusterbed] {msg}", file=sys.stderr, flush=True)


@dataclass
class LocalCluster:
    spec: ClusterSpec
    bed: ClusterBed
    _stopped: dict[str, tuple[list[bytes], str]] = field(default_factory=dict)
    _frozen: set[str] = field(default_factory=set)
    #: A component was stopped or frozen since the last :meth:`settle`: the next user of this
    #: shared cluster should not have to find out the hard way whether it fully recovered.
    disturbed: bool = False
    _canaries: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dir(self) -> Path:
        return self.bed.workdir / "clusters" / self.spec.name

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig.yaml"

    def logs(self, component: str, lines: int = 40) -> str:
        path = self.dir / "logs" / f"{component}.log"
        if not path.exists():
            return f"(no {path})"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def pid(self, component: str) -> int | None:
        p = self.dir / "pids" / f"{component}.pid"
        try:
            return int(p.read_text().strip())
        except (OSError, ValueError):
            return None

    def stop(self, component: str = "kube-apiserver") -> None:
        """Stop one component (default: the API server goes away; etcd keeps the data).

        kwokctl's own ``start cluster`` regenerates certificates in the binary runtime,
        so we remember the exact command line and restart that process ourselves.
        """
        pid = self.pid(component)
        if pid is None:
            raise BedError(f"{self.name}: no pid for {component}")
        self._stopped[component] = (
            Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1],
            os.readlink(f"/proc/{pid}/cwd"),
        )
        self.disturbed = True
        _kill_if_alive(pid)

    def start(self, component: str = "kube-apiserver", timeout: float = 60) -> None:
        """Restart a component stopped by :meth:`stop`, with the same flags, certs and ports."""
        argv, cwd = self._stopped.pop(component)
        if component == "kwok-controller":
            # The node Leases still name the stopped kwok as holder; a new kwok that finds them
            # "already exists" was seen to run no pod for 90 s. Its predecessor is gone: free them.
            self.kubectl("delete", "leases", "-n", "kube-node-lease", "--all", "--request-timeout=5s",
                         check=False)
        log = open(self.dir / "logs" / f"{component}.log", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen([a.decode() for a in argv], cwd=cwd, stdout=log, stderr=log,
                                start_new_session=True)
        (self.dir / "pids" / f"{component}.pid").write_text(str(proc.pid))
        if component == "kube-apiserver":
            deadline = time.monotonic() + timeout
            while self.kubectl("get", "--raw", "/readyz", check=False).returncode != 0:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise BedError(f"{self.name}: kube-apiserver did not come back:\n{self.logs(component)}")
                time.sleep(0.3)
            self._restart_dependents()

    def _restart_dependents(self) -> None:
        """Restart kcm, the scheduler and kwok, as a control-plane node's restart would.

        After an API server outage their informers back off (client-go, up to ~30 s measured
        here), during which the worker creates no pods and collects no garbage; the next test on
        this shared bed would inherit that. The mirror under test does not see these processes.
        """
        for dep in ("kube-controller-manager", "kube-scheduler", "kwok-controller"):
            pid = self.pid(dep)
            if pid is not None and Path(f"/proc/{pid}").exists():
                self.stop(dep)
                self.start(dep)

    def freeze(self, component: str = "kube-apiserver") -> None:
        """SIGSTOP a component: it keeps accepting TCP and never answers (a black hole)."""
        pid = self.pid(component)
        if pid is None:
            raise BedError(f"{self.name}: no pid for {component}")
        self.disturbed = True
        self._frozen.add(component)
        os.kill(pid, signal.SIGSTOP)

    def thaw(self, component: str = "kube-apiserver") -> None:
        pid = self.pid(component)
        self._frozen.discard(component)
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
            if component == "kube-apiserver":
                self._restart_dependents()

    def settle(self, timeout: float = 30) -> None:
        """Between tests: bring a disturbed cluster back to a working state, or fail naming why.

        Components a test left stopped or frozen are restarted, then (where pods can run) a
        canary Job must complete; if it does not, kcm/scheduler/kwok are restarted and it gets
        one more chance. A quiet bed costs nothing: only a disturbed cluster is checked.
        """
        if not self.disturbed:
            return
        for component in list(self._frozen):
            _log(f"{self.name}: {component} was left frozen; thawing it")
            self.thaw(component)
        if "kube-apiserver" in self._stopped:
            _log(f"{self.name}: kube-apiserver was left stopped; starting it")
            self.start("kube-apiserver")
        for component in list(self._stopped):
            _log(f"{self.name}: {component} was left stopped; starting it")
            self.start(component)
        if self.spec.controller_manager and self.spec.job_controller and self.spec.nodes > 0:
            started = time.monotonic()
            if not self._canary(timeout):
                _log(f"{self.name}: canary Job not Complete in {timeout:.0f}s; restarting kcm, scheduler, kwok")
                self._restart_dependents()
                if not self._canary(2 * timeout):
                    raise BedError(f"{self.name}: a canary Job does not complete after restarting kcm, scheduler "
                                   f"and kwok\n--- kcm ---\n{self.logs('kube-controller-manager')}\n"
                                   f"--- kwok ---\n{self.logs('kwok-controller')}")
            _log(f"{self.name}: settled (canary Job Complete in {time.monotonic() - started:.1f}s)")
        self.disturbed = False

    def _canary(self, timeout: float) -> bool:
        self._canaries += 1
        name = f"bed-canary-{self._canaries}"
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
               "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 30, "template": {
                   "metadata": {"annotations": {"jobmirror.dev/kwok-duration": "10ms"}},
                   "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}}}
        if self.kubectl("create", "-f", "-", check=False, input=json.dumps(job)).returncode != 0:
            return False
        done = self.kubectl("wait", "-n", "default", f"job/{name}", "--for=condition=Complete",
                            f"--timeout={int(timeout)}s", check=False).returncode == 0
        self.kubectl("delete", "-n", "default", f"job/{name}", "--wait=false", "--cascade=background",
                     check=False)
        return done

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bed.binaries.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
            check=check, capture_output=True, text=True, input=input,
        )

    def server_url(self) -> str:
        import yaml

        data = yaml.safe_load(self.kubeconfig.read_text())
        return str(data["clusters"][0]["cluster"]["server"])


#: how long a new cluster's kwok nodes may take to be Ready and lose the not-ready taint
NODES_READY_TIMEOUT = 180.0
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _unschedulable_nodes(nodes: list[dict[str, Any]]) -> list[str]:
    """Names of the nodes a pod could not be scheduled on yet: not Ready, or still carrying the
    not-ready/unreachable taints the node lifecycle controller puts on a node until it is."""
    out = []
    for n in nodes:
        conditions = (n.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        taints = (n.get("spec") or {}).get("taints") or []
        if not ready or any(str(t.get("key", "")).startswith(NOT_READY_TAINTS) for t in taints):
            out.append(str((n.get("metadata") or {}).get("name")))
    return out


def _wait_nodes_schedulable(cluster: LocalCluster, want: int, timeout: float = NODES_READY_TIMEOUT) -> None:
    """Return once ``want`` nodes are Ready and untainted: a cluster is up when pods can land on it (a
    test that starts at once on a loaded machine otherwise meets the not-ready taint)."""
    deadline = time.monotonic() + timeout
    last = "no node listed yet"
    while time.monotonic() < deadline:
        got = cluster.kubectl("get", "nodes", "-o", "json", check=False)
        if got.returncode == 0:
            nodes = json.loads(got.stdout).get("items") or []
            waiting = _unschedulable_nodes(nodes)
            if len(nodes) >= want and not waiting:
                return
            last = f"{len(nodes)}/{want} nodes, not schedulable yet: {', '.join(waiting) or '-'}"
        time.sleep(1)
    raise BedError(f"kwok nodes not Ready and schedulable after {timeout:.0f}s ({last})")


class ClusterBed:
    """A set of named local clusters sharing one kwok work directory."""

    def __init__(self, workdir: Path | None = None, *, binaries: dict[str, Binaries] | None = None) -> None:
        self.workdir = Path(workdir or scratch_dir("jobmirror-bed-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._binaries = binaries or {}
        self.clusters: dict[str, LocalCluster] = {}

    @property
    def binaries(self) -> Binaries:
        return self.binaries_for(versions.KUBE_VERSION)

    def binaries_for(self, kube_version: str, commands: tuple[str, ...] = KUBE_COMMANDS) -> Binaries:
        key = f"{kube_version}/{','.join(sorted(commands))}"
        if key not in self._binaries:
            self._binaries[key] = ensure_binaries(kube_version, commands=commands)
        return self._binaries[key]

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["KWOK_WORKDIR"] = str(self.workdir)
        return env

    def kwokctl(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.binaries.kwokctl), *args]
        proc = subprocess.run(cmd, env=self._env(), capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise BedError(f"kwokctl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-3000:]}")
        return proc

    def create(self, spec: ClusterSpec, *, wait: str = "120s", attempts: int = 3) -> LocalCluster:
        """Start a cluster; a start that fails (e.g. a port another bed grabbed first) is retried."""
        for attempt in range(1, attempts + 1):
            try:
                return self._create_once(spec, wait)
            except BedError as exc:
                if attempt == attempts:
                    raise
                _log(f"cluster {spec.name}: start attempt {attempt} failed, retrying: {str(exc)[:300]}")
        raise AssertionError("unreachable")

    def _kwokctl_create_args(self, spec: ClusterSpec, wait: str) -> list[str]:
        b = self.binaries_for(spec.kube_version, spec.kube_commands)
        args = [
            "create", "cluster", "--name", spec.name, "--runtime", "binary",
            "--kube-apiserver-binary", str(b.kube_apiserver),
            "--kwok-controller-binary", str(b.kwok),
            "--etcd-binary", str(b.etcd),
            "--config", str(self._ports_config(spec.name)),
            "--secure-port=true", "--kube-authorization=true", "--kube-admission=true",
            "--disable-qps-limits",
            "--wait", wait,
        ]
        # Single-instance test clusters: without leader election, kcm and the scheduler
        # ride out an API server outage (chaos tests) instead of exiting when the lease lapses.
        # Throwaway data: etcd never fsyncs (a killed etcd keeps what it wrote; only a machine
        # crash would lose it, and then the bed is gone anyway).
        args += ["--extra-args", "etcd=unsafe-no-fsync=true"]
        args += ["--extra-args", "kube-controller-manager=leader-elect=false",
                 "--extra-args", "kube-scheduler=leader-elect=false"]
        # Only the commands the cluster starts are built for its release (ClusterSpec.kube_commands).
        if "kube-controller-manager" in spec.kube_commands:
            args += ["--kube-controller-manager-binary", str(b.kube_controller_manager)]
        if "kube-scheduler" in spec.kube_commands:
            args += ["--kube-scheduler-binary", str(b.kube_scheduler)]
        if not spec.controller_manager:
            args.append("--disable-kube-controller-manager")
        elif not spec.job_controller:
            args += ["--extra-args", "kube-controller-manager=controllers=*,-job-controller"]
        if spec.nodes == 0:
            args += ["--disable-kube-scheduler", "--disable", "kwok-controller"]
        else:
            args += ["--config", str(STAGES_FILE), "--config", str(self._logs_config(spec.name))]
        if spec.feature_gates:
            args += ["--kube-feature-gates", spec.feature_gates]
        for extra in spec.extra_args:
            args += ["--extra-args", extra]
        return args

    def _ports_config(self, name: str) -> Path:
        """Ports chosen by the OS, not by kwokctl.

        kwokctl scans down from 32767 for a free port, so beds started at the same time
        (parallel test sessions) race for the same numbers; kernel-assigned ephemeral
        ports do not collide.
        """
        keys = ("etcdPort", "etcdPeerPort", "kubeApiserverPort", "kwokControllerPort",
                "kubeControllerManagerPort", "kubeSchedulerPort")
        socks = []
        try:
            for _ in keys:
                s = socket.socket()
                s.bind(("127.0.0.1", 0))
                socks.append(s)
            ports = {k: s.getsockname()[1] for k, s in zip(keys, socks, strict=True)}
        finally:
            for s in socks:
                s.close()
        path = self.workdir / f"{name}-ports.yaml"
        lines = ["apiVersion: config.kwok.x-k8s.io/v1alpha1", "kind: KwokctlConfiguration", "options:"]
        lines += [f"  {k}: {v}" for k, v in ports.items()]
        path.write_text("\n".join(lines) + "\n")
        return path

    def _logs_config(self, name: str) -> Path:
        """Every fake pod's container log: a few fixed lines, and a ``follow`` stream that stays
        open until the reader leaves, as a running container's would (kwok's ClusterLogs)."""
        log_file = self.workdir / f"{name}-pod.log"
        log_file.write_text("".join(f"2026-01-01T00:00:0{i}.000000000Z stdout F kwok fake container log line {i}\n"
                                    for i in range(1, 4)))  # the CRI log format kwok parses
        path = self.workdir / f"{name}-logs.yaml"
        path.write_text("\n".join([
            "apiVersion: kwok.x-k8s.io/v1alpha1", "kind: ClusterLogs", "metadata:", "  name: jm-pod-logs", "spec:",
            "  selector: {}", "  logs:", "  - containers: []", f"    logsFile: {log_file}", "    follow: true", ""]))
        return path

    def _create_once(self, spec: ClusterSpec, wait: str) -> LocalCluster:
        b = self.binaries_for(spec.kube_version)
        cluster = LocalCluster(spec, self)
        _log(f"creating cluster {spec.name} (Kubernetes v{spec.kube_version}, controller-manager="
             f"{spec.controller_manager}, job-controller={spec.job_controller}, nodes={spec.nodes})")
        start = time.monotonic()
        proc = subprocess.Popen(
            [str(b.kwokctl), *self._kwokctl_create_args(spec, wait)],
            env={**self._env(), "KWOK_KUBE_VERSION": f"v{spec.kube_version}"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.clusters[spec.name] = cluster
        # kwokctl 0.7 exits 0 even when the API server never comes up (after a fixed 2-minute
        # wait), so watch the control plane ourselves and give up as soon as it has died.
        died: str | None = None
        while True:
            try:
                _, stderr = proc.communicate(timeout=1)
                break
            except subprocess.TimeoutExpired:
                died = next((c for c in ("etcd", "kube-apiserver")
                             if (pid := cluster.pid(c)) is not None and not _alive(pid)), None)
                if died or time.monotonic() - start > 600:
                    proc.kill()
                    _, stderr = proc.communicate()
                    break
        try:
            if died:
                raise BedError(f"{died} exited during start")
            if proc.returncode != 0:
                raise BedError(f"kwokctl create cluster exited {proc.returncode}:\n{stderr[-3000:]}")
            ready = cluster.kubectl("get", "--raw", "/readyz", check=False)
            if ready.returncode != 0:
                raise BedError(f"kube-apiserver not ready after kwokctl create: {ready.stderr.strip()[-500:]}\n"
                               f"{stderr[-2000:]}")
            if spec.nodes:
                self.kwokctl("scale", "node", "--replicas", str(spec.nodes), "--name", spec.name)
                _wait_nodes_schedulable(cluster, spec.nodes)
        except (BedError, subprocess.TimeoutExpired) as exc:
            detail = "\n".join(
                f"--- {c} log tail ---\n{cluster.logs(c)}"
                for c in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller")
                if (cluster.dir / "logs" / f"{c}.log").exists()
            )
            self.delete(spec.name)
            raise BedError(f"cluster {spec.name} failed to start: {exc}\n{detail}") from exc
        _log(f"cluster {spec.name} up in {time.monotonic() - start:.1f}s at {cluster.server_url()}")
        return cluster

    def ensure(self, spec: ClusterSpec) -> LocalCluster:
        """Return the running cluster of that name, creating it on first use."""
        existing = self.clusters.get(spec.name)
        if existing is not None:
            if existing.spec != spec:
                raise BedError(f"cluster {spec.name} already runs with {existing.spec}, not {spec}")
            return existing
        return self.create(spec)

    def up(self, specs: Iterable[ClusterSpec]) -> dict[str, LocalCluster]:
        for s in specs:
            self.create(s)
        return self.clusters

    def settle(self) -> None:
        """Every cluster of the bed usable again after a test that stopped or froze parts of it."""
        for cluster in list(self.clusters.values()):
            cluster.settle()

    def _pids(self, name: str) -> list[int]:
        pids = []
        for p in (self.workdir / "clusters" / name / "pids").glob("*.pid"):
            with contextlib.suppress(OSError, ValueError):
                pids.append(int(p.read_text().strip()))
        return pids

    def delete(self, name: str) -> None:
        pids = self._pids(name)
        self.kwokctl("delete", "cluster", "--name", name, check=False, timeout=120)
        # Belt and braces: nothing we started may survive (only our own recorded PIDs).
        for pid in pids:
            _kill_if_alive(pid)
        self.clusters.pop(name, None)

    def down(self) -> None:
        for name in list(self.clusters):
            self.delete(name)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ClusterBed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def describe(self) -> str:
        return json.dumps({n: str(c.kubeconfig) for n, c in self.clusters.items()}, indent=2)


def _alive(pid: int) -> bool:
    """Running (not exited, not a zombie nobody has reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def _kill_if_alive(pid: int) -> None:
    """SIGTERM, then SIGKILL after 5 s; a zombie (exited, not yet reaped) counts as gone."""
    if not _alive(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            time.sleep(0.1)
            if not _alive(pid):
                return
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


DEFAULT_SPECS = (
    ClusterSpec("manager", controller_manager=True, job_controller=True, nodes=0),
    ClusterSpec("worker-1", nodes=2),
    ClusterSpec("worker-2", nodes=2),
)
