"""Build Kubernetes, etcd and kwok binaries from their Go modules and cache them.

There is no prebuilt download and no Docker here, so every control-plane binary is
compiled from source through the Go module proxy into
``<cache>/bin/<component>-<version>/``. A binary that is already there is reused, so a
warm run builds nothing. Kubernetes binaries are version-stamped exactly as the
upstream build does, because both the API server's compatibility version (which
decides feature-gate defaults such as JobManagedBy) and kwokctl's flag choice read it.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from clusterbed import versions

KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
#: What a kind node image adds (kindbed/images.py).
KUBE_NODE_COMMANDS = ("kubelet", "kubeadm", "kube-proxy")


class BuildError(RuntimeError):
    """A component failed to build; the message carries the tail of the Go output."""


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of one Kubernetes version's control plane plus etcd and kwok."""

    kube_version: str
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    etcd: Path
    kwok: Path
    kwokctl: Path


def _log(msg: str) -> None:
    print(f"[clusterbed build] {msg}", file=sys.stderr, flush=True)


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-buildvcs=false")
    env["CGO_ENABLED"] = "0"
    env["GOTOOLCHAIN"] = env.get("GOTOOLCHAIN", "local")
    return env


def _run_go(args: list[str], cwd: Path, label: str) -> None:
    """Run a go command, printing progress (package count) instead of staying silent."""
    _log(f"{label}: go {' '.join(args[:3])} ...")
    start = time.monotonic()
    proc = subprocess.Popen(
        ["go", *args],
        cwd=cwd,
        env=_go_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    tail: list[str] = []
    last_report = start
    for count, line in enumerate(proc.stdout, 1):
        tail = [*tail[-39:], line.rstrip()]
        now = time.monotonic()
        if now - last_report > 60:
            _log(f"{label}: {count} packages/lines so far, {now - start:.0f}s (last: {line.strip()[:80]})")
            last_report = now
    rc = proc.wait()
    if rc != 0:
        raise BuildError(f"{label}: go {' '.join(args)} failed (exit {rc}) in {cwd}:\n" + "\n".join(tail))
    _log(f"{label}: done in {time.monotonic() - start:.0f}s")


def _scratch_module(dirname: str, requires: dict[str, str], replaces: dict[str, str]) -> Path:
    work = versions.cache_root() / "build" / dirname
    work.mkdir(parents=True, exist_ok=True)
    lines = ["module jobmirror.dev/bedbuild", "", "go 1.24", "", "require ("]
    lines += [f"\t{m} {v}" for m, v in requires.items()]
    lines += [")", ""]
    if replaces:
        lines += ["replace ("]
        lines += [f"\t{m} => {m} {v}" for m, v in replaces.items()]
        lines += [")", ""]
    (work / "go.mod").write_text("\n".join(lines))
    return work


def _staging_modules(kube_version: str) -> list[str]:
    """Every module that k8s.io/kubernetes requires at v0.0.0 (its staging repos)."""
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@v{kube_version}"],
        check=True,
        capture_output=True,
        text=True,
        env=_go_env(),
        cwd=versions.cache_root(),
    ).stdout
    gomod = Path(json.loads(out)["GoMod"]).read_text()
    mods = []
    for line in gomod.splitlines():
        parts = line.strip().split()
        if len(parts) >= 2 and parts[1] == "v0.0.0" and parts[0].startswith("k8s.io/"):
            mods.append(parts[0])
    return sorted(set(mods))


def _ldflags_kube(kube_version: str) -> str:
    major, minor, _ = kube_version.split(".")
    stamp = {
        "gitVersion": f"v{kube_version}",
        "gitMajor": major,
        "gitMinor": minor,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.{k}={v}" for k, v in stamp.items()]
    return " ".join(flags)


@contextlib.contextmanager
def _exclusive(name: str) -> Iterator[None]:
    """One builder per scratch module at a time, across processes: the kind tier's image build
    runs beside the bed's bootstrap, and both may need the same Kubernetes binaries."""
    lock_dir = versions.cache_root() / "build"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with (lock_dir / f"{name}.lock").open("w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log(f"{name}: another process is building it; waiting for it")
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _build_once(lock: str, dest: Path, names: tuple[str, ...], build: Callable[[], None]) -> None:
    """Run ``build`` unless ``dest`` already holds ``names``, checking again under the lock
    (another process may have built them while we waited)."""
    if _have(dest, names):
        return
    with _exclusive(lock):
        if not _have(dest, names):
            build()


def _bin_dir(component: str, version: str) -> Path:
    return versions.cache_root() / "bin" / f"{component}-{version}"


def _have(dest: Path, names: tuple[str, ...]) -> bool:
    return all((dest / n).is_file() and os.access(dest / n, os.X_OK) for n in names)


def _install(work: Path, dest: Path, names: tuple[str, ...]) -> None:
    """Move freshly built binaries into place atomically so a killed build leaves no half cache."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for n in names:
        shutil.move(str(work / "out" / n), tmp / n)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def _build_kube_commands(kube_version: str, component: str, commands: tuple[str, ...]) -> Path:
    """Build ``commands`` of ``k8s.io/kubernetes`` into ``<cache>/bin/<component>-<version>/``.

    Every Kubernetes command is built from the one scratch module per version, so the
    control-plane binaries of the bed and the node binaries of the kind image share
    go.sum, the Go build cache and the version stamp.
    """
    dest = _bin_dir(component, kube_version)
    _build_once(f"kubernetes-{kube_version}", dest, commands,
                lambda: _build_kube_commands_locked(kube_version, component, commands, dest))
    return dest


def _build_kube_commands_locked(kube_version: str, component: str, commands: tuple[str, ...], dest: Path) -> None:
    versions.cache_root().mkdir(parents=True, exist_ok=True)
    minor = kube_version.split(".", 1)[1]
    staging = _staging_modules(kube_version)
    work = _scratch_module(
        f"kubernetes-{kube_version}",
        {"k8s.io/kubernetes": f"v{kube_version}"},
        {m: f"v0.{minor}" for m in staging},
    )
    label = f"{component} v{kube_version} ({', '.join(commands)})"
    _log(f"{label}: building from source, {_estimate(commands)} on 2 cores with a cold Go cache "
         "(less when another release's build left shared packages in it); cached afterwards")
    (work / "out").mkdir(exist_ok=True)
    # -mod=mod lets go resolve and record the full module graph on the first build.
    pkgs = [f"k8s.io/kubernetes/cmd/{c}" for c in commands]
    flags = ["-mod=mod", "-v", "-trimpath", "-ldflags", _ldflags_kube(kube_version)]
    _run_go(["build", *flags, "-o", "out/", *pkgs], work, label)
    _install(work, dest, commands)


def _estimate(commands: tuple[str, ...]) -> str:
    """What a newcomer waits for, measured here (docs/contributing.md, "Cold and warm runs")."""
    if commands == KUBE_NODE_COMMANDS:
        return "about 5-8 min"
    if len(commands) < len(KUBE_COMMANDS):
        return "about 7-12 min"
    return "about 10-16 min"


def build_kubernetes(kube_version: str) -> Path:
    return _build_kube_commands(kube_version, "kubernetes", KUBE_COMMANDS)


def build_kube_commands(kube_version: str, commands: tuple[str, ...]) -> Path:
    """Some of a release's control-plane commands, into the same directory as the full set: a
    release that only ever runs as an API server (and kcm) is never linked into a scheduler and
    kubectl. A later need for more builds the union, mostly from the Go build cache."""
    dest = _bin_dir("kubernetes", kube_version)
    if _have(dest, commands):
        return dest
    present = tuple(c for c in KUBE_COMMANDS if _have(dest, (c,)))
    wanted = tuple(c for c in KUBE_COMMANDS if c in commands or c in present)
    return _build_kube_commands(kube_version, "kubernetes", wanted)


def build_kubernetes_node(kube_version: str) -> Path:
    """kubelet, kubeadm and kube-proxy: what a kind node image needs beyond the control plane."""
    return _build_kube_commands(kube_version, "kubernetes-node", KUBE_NODE_COMMANDS)


def build_go_tool(name: str, module: str, version: str, package: str, *, ldflags: str = "-s -w",
                  source: Path | None = None) -> Path:
    """Build one command of a Go module at a pinned version into ``<cache>/bin/<name>-<version>/<name>``.

    ``go install pkg@version`` is not used: the module proxy here refuses the ``@v/list``
    lookup it makes. A scratch module that requires the version works. ``source`` is a
    directory of our own Go files to build instead of a module from the proxy.
    """
    dest = _bin_dir(name, version)
    _build_once(f"{name}-{version}", dest, (name,),
                lambda: _build_go_tool_locked(name, module, version, package, ldflags, source, dest))
    return dest / name


def _build_go_tool_locked(name: str, module: str, version: str, package: str, ldflags: str, source: Path | None,
                          dest: Path) -> None:
    work = _scratch_module(f"{name}-{version}", {module: f"v{version}"} if source is None else {}, {})
    if source is not None:
        for f in source.glob("*.go"):
            shutil.copy(f, work / f.name)
    (work / "out").mkdir(exist_ok=True)
    _run_go(["build", "-mod=mod", "-v", "-trimpath", "-ldflags", ldflags, "-o", f"out/{name}", package],
            work, f"{name} {version}")
    _install(work, dest, (name,))


def build_etcd(etcd_version: str) -> Path:
    return build_go_tool("etcd", "go.etcd.io/etcd/server/v3", etcd_version, "go.etcd.io/etcd/server/v3").parent


def build_kwok(kwok_version: str) -> Path:
    dest = _bin_dir("kwok", kwok_version)
    _build_once(f"kwok-{kwok_version}", dest, ("kwok", "kwokctl"), lambda: _build_kwok_locked(kwok_version, dest))
    return dest


def _build_kwok_locked(kwok_version: str, dest: Path) -> None:
    work = _scratch_module(f"kwok-{kwok_version}", {"sigs.k8s.io/kwok": f"v{kwok_version}"}, {})
    (work / "out").mkdir(exist_ok=True)
    ldflags = f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v{kwok_version}"
    _run_go(
        ["build", "-mod=mod", "-v", "-trimpath", "-ldflags", ldflags, "-o", "out/",
         "sigs.k8s.io/kwok/cmd/kwok", "sigs.k8s.io/kwok/cmd/kwokctl"],
        work,
        f"kwok v{kwok_version}",
    )
    _install(work, dest, ("kwok", "kwokctl"))


def build_helm(helm_version: str = versions.HELM_VERSION) -> Path:
    """``helm`` stamped as its Makefile does: its own version, and the Kubernetes minor of its
    client-go (the default ``.Capabilities.KubeVersion`` of ``helm template`` and ``helm lint``)."""
    module = "helm.sh/helm/v3"
    if _have(_bin_dir("helm", helm_version), ("helm",)):
        return _bin_dir("helm", helm_version) / "helm"  # warm: no go call at all
    gomod = subprocess.run(["go", "mod", "download", "-json", f"{module}@v{helm_version}"], check=True,
                           capture_output=True, text=True, env=_go_env(), cwd=versions.cache_root()).stdout
    client_go = next((line.split()[1] for line in Path(json.loads(gomod)["GoMod"]).read_text().splitlines()
                      if line.strip().startswith("k8s.io/client-go ")), "")
    if not client_go.startswith("v0."):
        raise BuildError(f"helm v{helm_version}: cannot read its k8s.io/client-go version from go.mod ({client_go!r})")
    kube_minor = client_go.split(".")[1]
    flags = ["-s", "-w", f"-X {module}/internal/version.version=v{helm_version}",
             f"-X {module}/internal/version.gitTreeState=clean"]
    for pkg in ("pkg/lint/rules", "pkg/chartutil"):
        flags += [f"-X {module}/{pkg}.k8sVersionMajor=1", f"-X {module}/{pkg}.k8sVersionMinor={kube_minor}"]
    return build_go_tool("helm", module, helm_version, f"{module}/cmd/helm", ldflags=" ".join(flags))


def prometheus_operator_crds(version: str = versions.PROMETHEUS_OPERATOR_VERSION) -> Path:
    """The directory of the Prometheus Operator's CRD manifests, from its Go module (downloaded once, not built)."""
    module = f"github.com/prometheus-operator/prometheus-operator@v{version}"
    versions.cache_root().mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["go", "mod", "download", "-json", module], capture_output=True, text=True, env=_go_env(),
                          cwd=versions.cache_root())
    info = json.loads(proc.stdout or "{}")
    if proc.returncode != 0 or "Dir" not in info:
        raise BuildError(f"go mod download {module} failed: {info.get('Error') or proc.stderr.strip()}")
    crds = Path(info["Dir"]) / "example" / "prometheus-operator-crd"
    if not crds.is_dir():
        raise BuildError(f"{module} has no example/prometheus-operator-crd/")
    return crds


def build_kueue(kueue_version: str = versions.KUEUE_VERSION, *, worker_limits_patch: bool = False) -> Path:
    """Build Kueue's manager binary into ``<cache>/bin/kueue-<version>[-workerlimits]/kueue``.

    Kueue is built inside its own module (its go.mod pins the controller-runtime and
    Kubernetes libraries it was released with) rather than from a scratch module: the
    module cache copy is read-only, so it is copied out and made writable first.
    ``worker_limits_patch`` builds a locally patched copy (:func:`patch_kueue_worker_limits`).
    """
    flavour = f"{kueue_version}-workerlimits" if worker_limits_patch else kueue_version
    dest = _bin_dir("kueue", flavour)
    _build_once(f"kueue-{flavour}", dest, ("kueue",),
                lambda: _build_kueue_locked(kueue_version, flavour, dest, worker_limits_patch))
    return dest / "kueue"


def _module_source(module: str, version: str) -> Path:
    """The read-only module-cache directory of ``module`` at ``version`` (downloaded once)."""
    versions.cache_root().mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["go", "mod", "download", "-json", f"{module}@v{version}"],
                         check=False, capture_output=True, text=True, env=_go_env(), cwd=versions.cache_root())
    if out.returncode != 0:
        raise BuildError(f"go mod download {module}@v{version} failed:\n{out.stdout}{out.stderr}")
    return Path(json.loads(out.stdout)["Dir"])


def kueue_source(kueue_version: str = versions.KUEUE_VERSION) -> Path:
    """The read-only module-cache directory of Kueue (its CRDs are applied from here)."""
    return _module_source("sigs.k8s.io/kueue", kueue_version)


#: environment variables the patched Kueue reads for its worker clients (unset: client-go's 5/10)
KUEUE_WORKER_QPS_ENV = "KUEUE_MULTIKUEUE_WORKER_QPS"
KUEUE_WORKER_BURST_ENV = "KUEUE_MULTIKUEUE_WORKER_BURST"
_KUEUE_CLIENT_FILE = "pkg/controller/admissionchecks/multikueue/multikueuecluster.go"
_KUEUE_RELEASED_TO_REST = """\tif c.RestConfig != nil {
\t\treturn c.RestConfig, nil
\t}
\treturn clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
"""
_KUEUE_PATCHED_TO_REST = """\tif c.RestConfig != nil {
\t\treturn withWorkerLimits(c.RestConfig), nil
\t}
\tcfg, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
\tif err != nil {
\t\treturn nil, err
\t}
\treturn withWorkerLimits(cfg), nil
"""
_KUEUE_WORKER_LIMITS_GO = f"""package multikueue

// Local patch by jobmirror's benchmark, not part of Kueue v0.19.2: worker clients take their
// QPS and burst from the environment, the effect kueue#15280 gives later releases (worker
// clients reuse clientConnection) for a release that has no setting for them.

import (
\t"os"
\t"strconv"

\t"k8s.io/client-go/rest"
)

func withWorkerLimits(cfg *rest.Config) *rest.Config {{
\tif v, err := strconv.ParseFloat(os.Getenv("{KUEUE_WORKER_QPS_ENV}"), 32); err == nil {{
\t\tcfg.QPS = float32(v)
\t}}
\tif v, err := strconv.Atoi(os.Getenv("{KUEUE_WORKER_BURST_ENV}")); err == nil {{
\t\tcfg.Burst = v
\t}}
\treturn cfg
}}
"""


def patch_kueue_worker_limits(src: Path) -> None:
    """Let the MultiKueue manager's worker clients take QPS/burst from the environment.

    Fails loudly when the released code is not what the patch expects (another release).
    """
    target = src / _KUEUE_CLIENT_FILE
    text = target.read_text()
    if _KUEUE_PATCHED_TO_REST in text:
        return
    if _KUEUE_RELEASED_TO_REST not in text:
        raise BuildError(f"{target}: toRESTConfig is not the v0.19.2 code the worker-limits patch expects")
    target.write_text(text.replace(_KUEUE_RELEASED_TO_REST, _KUEUE_PATCHED_TO_REST, 1))
    (target.parent / "workerlimits_jobmirror.go").write_text(_KUEUE_WORKER_LIMITS_GO)


def _build_kueue_locked(kueue_version: str, flavour: str, dest: Path, worker_limits_patch: bool) -> None:
    versions.cache_root().mkdir(parents=True, exist_ok=True)
    _log(f"kueue v{flavour}: downloading the module")
    src = kueue_source(kueue_version)
    work = versions.cache_root() / "build" / f"kueue-{flavour}"
    if not (work / "go.mod").is_file():
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
        subprocess.run(["chmod", "-R", "u+w", str(work)], check=True)
    if worker_limits_patch:
        patch_kueue_worker_limits(work)
    (work / "out").mkdir(exist_ok=True)
    ldflags = f"-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=v{flavour}"
    _run_go(["build", "-v", "-trimpath", "-ldflags", ldflags, "-o", "out/kueue", "./cmd/kueue"],
            work, f"kueue v{flavour}")
    _install(work, dest, ("kueue",))


def jobset_source(jobset_version: str = versions.JOBSET_VERSION) -> Path:
    """The read-only module-cache directory of JobSet (its CRD and webhook manifests are read from here)."""
    return _module_source("sigs.k8s.io/jobset", jobset_version)


def build_jobset(jobset_version: str = versions.JOBSET_VERSION) -> Path:
    """JobSet's controller manager (the module's root package), version-stamped, into
    ``<cache>/bin/jobset-<version>/jobset``; its go.mod has no replace, so a scratch module builds it."""
    ldflags = f"-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=v{jobset_version}"
    return build_go_tool("jobset", "sigs.k8s.io/jobset", jobset_version, "sigs.k8s.io/jobset", ldflags=ldflags)


def ensure_binaries(kube_version: str = versions.KUBE_VERSION, *,
                    commands: tuple[str, ...] = KUBE_COMMANDS) -> Binaries:
    """Build (or reuse) everything one cluster of ``kube_version`` needs.

    ``commands``: the control-plane commands that cluster runs (``ClusterSpec.kube_commands``);
    the paths of the others name files that may not exist, and kubectl is the default release's.
    """
    if kube_version != versions.KUBE_VERSION and set(commands) != set(KUBE_COMMANDS):
        kube = build_kube_commands(kube_version, commands)
        return replace(ensure_binaries(versions.KUBE_VERSION), kube_version=kube_version,
                       kube_apiserver=kube / "kube-apiserver",
                       kube_controller_manager=kube / "kube-controller-manager",
                       kube_scheduler=kube / "kube-scheduler")
    kube = build_kubernetes(kube_version)
    etcd = build_etcd(versions.ETCD_VERSION)
    kwok = build_kwok(versions.KWOK_VERSION)
    return Binaries(
        kube_version=kube_version,
        kube_apiserver=kube / "kube-apiserver",
        kube_controller_manager=kube / "kube-controller-manager",
        kube_scheduler=kube / "kube-scheduler",
        kubectl=kube / "kubectl",
        etcd=etcd / "etcd",
        kwok=kwok / "kwok",
        kwokctl=kwok / "kwokctl",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build and cache the cluster-bed binaries.")
    parser.add_argument("--kube-version", action="append",
                        help="Kubernetes version(s) to build in full (default: the pinned one)")
    parser.add_argument("--kueue", action="store_true",
                        help=f"also build Kueue v{versions.KUEUE_VERSION} (for `bench compare`)")
    parser.add_argument("--jobset", action="store_true",
                        help=f"also build JobSet v{versions.JOBSET_VERSION} (its controller, for the JobSet tests)")
    parser.add_argument("--test-versions", action="store_true",
                        help="also build what `make test` runs besides the default: the commands the matrix "
                             f"corners {', '.join(versions.CORNER_KUBE_VERSIONS)} start")
    parser.add_argument("--corners-only", action="store_true",
                        help="build only the corners (make test builds them beside the tests that need the "
                             "default release alone)")
    parser.add_argument("--no-helm", action="store_true",
                        help=f"skip helm v{versions.HELM_VERSION} and the Prometheus Operator CRDs "
                             "(the deploy/helm and monitoring tests need them)")
    parser.add_argument("--helm", action="store_true",
                        help="build helm and the Prometheus Operator CRDs with --corners-only too (make test "
                             "builds them beside the local tiers)")
    args = parser.parse_args(argv)
    full = [] if args.corners_only else (args.kube_version or [versions.KUBE_VERSION])
    corners = [v for v in versions.CORNER_KUBE_VERSIONS if v not in full] \
        if (args.test_versions or args.corners_only) else []
    try:
        for v in full:
            b = ensure_binaries(v)
            _log(f"ready: Kubernetes v{v} in {b.kube_apiserver.parent}")
        for v in corners:
            commands = versions.CORNER_KUBE_COMMANDS[v]
            _log(f"ready: Kubernetes v{v} ({', '.join(commands)}) in {build_kube_commands(v, commands)}")
        if args.helm or not (args.no_helm or args.corners_only):
            _log(f"ready: {build_helm()}")
            _log(f"ready: Prometheus Operator CRDs in {prometheus_operator_crds()}")
        if args.kueue:
            _log(f"ready: Kueue in {build_kueue()}")
        if args.jobset:
            _log(f"ready: JobSet in {build_jobset()}")
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
