"""Every image the kind tier runs, built on this machine and cached by version.

No image can be pulled here, so kind's node image, the control-plane images inside it,
the controller image and the workload image are all built locally:

- **node image** ``jobmirror.local/kind-node:v<kube>-r<recipe>``: a debootstrapped Debian
  bookworm (systemd, containerd, runc, CNI plugins …) laid out as kind's own
  ``images/base`` does (its files come from the kind Go module), plus kubelet/kubeadm/
  kubectl/crictl, with the control-plane images preloaded into containerd under the
  names ``kubeadm config images list`` prints. The Kubernetes binaries are the cluster
  bed's (:mod:`clusterbed.build`): one Go build path and version stamp for both tiers.
- **python base** ``jobmirror.local/python:3.11-bookworm-r<recipe>``: Debian's python3,
  the local stand-in for the public ``python:3.11-slim`` base the Dockerfile defaults to.
- **controller image**: the project's ``Dockerfile`` on that base (rebuilt from the
  current source every time; Docker's layer cache keeps that to seconds).
- **workload image** ``jobmirror.local/busybox:<deb version>``: Debian's busybox-static,
  so e2e Jobs run real containers that exit 0, exit 1 or sleep.

An image that already exists under its versioned tag is not rebuilt: a warm run builds
nothing. Building needs root (debootstrap, chroot) and Debian's package mirror.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clusterbed import build, versions

ROOT = Path(__file__).resolve().parent.parent
SUITE = "bookworm"
NODE_PACKAGES = (
    "systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,conntrack,iptables,nftables,"
    "iproute2,ethtool,util-linux,mount,kmod,libseccomp2,bash,ca-certificates,jq,procps,socat,pigz,e2fsprogs"
)
KPROXY_PACKAGES = "iptables,conntrack,ipset,kmod"
PYTHON_PACKAGES = "python3,python3-venv,python-is-python3,ca-certificates"
HOST_EXTRA_CAS = Path("/usr/local/share/ca-certificates")
SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# One node per cluster: a static ptp CNI replaces kindnetd (which is not in the kind module).
_CNI_CONFLIST = {
    "cniVersion": "0.3.1",
    "name": "kindnet",
    "plugins": [
        {"type": "ptp", "ipMasq": True, "mtu": 1500,
         "ipam": {"type": "host-local", "dataDir": "/run/cni-ipam-state", "routes": [{"dst": "0.0.0.0/0"}],
                  "ranges": [[{"subnet": "10.244.0.0/24"}]]}},
        {"type": "portmap", "capabilities": {"portMappings": True}},
    ],
}
_DUMMY_CNI_MANIFEST = """apiVersion: v1
kind: ConfigMap
metadata:
  name: jobmirror-static-cni
  namespace: kube-system
data:
  note: a static ptp CNI config is baked into the node image (single-node clusters)
"""
_STORAGE_MANIFEST = """apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/host-path
"""


class ImageError(RuntimeError):
    """An image could not be built; the message names the step and carries its output."""


@dataclass(frozen=True)
class Images:
    node: str
    controller: str
    workload: str
    jobset: str = ""  # JobSet's controller ("" when not wanted)


def _log(msg: str) -> None:
    print(f"[kind images] {msg}", file=sys.stderr, flush=True)


def images_dir() -> Path:
    return versions.cache_root() / "images"


def node_image_ref(kube_version: str = versions.KUBE_VERSION) -> str:
    return f"jobmirror.local/kind-node:v{kube_version}-r{versions.KIND_IMAGE_RECIPE}"


def python_base_ref() -> str:
    return f"jobmirror.local/python:3.11-{SUITE}-r{versions.KIND_IMAGE_RECIPE}"


def _run(cmd: Sequence[str], *, what: str, input: bytes | None = None, cwd: Path | None = None,
         env: dict[str, str] | None = None, timeout: float = 1800) -> str:
    proc = subprocess.run(list(cmd), input=input, cwd=cwd, capture_output=True, timeout=timeout,
                          env={**os.environ, "DOCKER_BUILDKIT": "0", **(env or {})})
    if proc.returncode != 0:
        raise ImageError(f"{what}: `{' '.join(cmd)[:300]}` failed (exit {proc.returncode}):\n"
                         f"{proc.stdout.decode(errors='replace')[-2000:]}\n{proc.stderr.decode(errors='replace')[-3000:]}")
    return proc.stdout.decode(errors="replace")


def image_exists(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


def image_id(ref: str) -> str:
    return _run(["docker", "image", "inspect", "-f", "{{.Id}}", ref], what="inspect").strip()


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        raise ImageError(f"building {what} needs root (debootstrap, chroot). On a machine that can pull images, "
                         "use the published ones instead: --node-image kindest/node:<tag>, "
                         "--python-image python:3.11-slim-bookworm")


def mirror_in(sources: str) -> str | None:
    """The first non-security Debian mirror in apt sources text (deb822 ``URIs:`` or one-line ``deb``)."""
    for m in re.finditer(r"^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(https?://\S+)", sources, re.MULTILINE):
        if "security" not in m.group(1):
            return m.group(1)
    return None


def apt_mirror() -> str:
    """The Debian mirror apt already uses here (debootstrap must reach the same one)."""
    for f in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            found = mirror_in(f.read_text())
        except OSError:
            continue
        if found:
            return found
    return "http://deb.debian.org/debian"


def debootstrap(target: Path, include: str) -> None:
    """A minimal bookworm rootfs at ``target``; downloaded .debs are kept for the next build."""
    _need_root("a Debian rootfs")
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is not installed (kindbed.engine.ensure_host_packages installs it)")
    debcache = images_dir() / "debcache"
    debcache.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(target, ignore_errors=True)
    t0 = time.monotonic()
    _log(f"debootstrap {SUITE} into {target.name} (+{include})")
    _run(["debootstrap", "--variant=minbase", f"--cache-dir={debcache}", f"--include={include}", SUITE,
          str(target), apt_mirror()], what=f"debootstrap {target.name}")
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for p in (target / junk).glob("*"):
            if p.is_file():
                p.unlink()
    _log(f"debootstrap {target.name}: {time.monotonic() - t0:.0f}s")


def docker_import(rootfs: Path, ref: str, changes: Sequence[str]) -> None:
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    args = ["docker", "import"]
    for c in changes:
        args += ["--change", c]
    imp = subprocess.run([*args, "-", ref], stdin=tar.stdout, capture_output=True)
    assert tar.stdout is not None
    tar.stdout.close()
    if tar.wait() != 0 or imp.returncode != 0:
        raise ImageError(f"docker import {ref} failed:\n{imp.stderr.decode(errors='replace')[-2000:]}")


def build_context(ref: str, dockerfile: str, files: dict[str, Path]) -> None:
    """``docker build`` a tiny image from ``dockerfile`` plus ``files`` (name in context → source)."""
    with tempfile.TemporaryDirectory(prefix="jobmirror-img-") as tmp:
        ctx = Path(tmp)
        for name, src in files.items():
            shutil.copy2(src, ctx / name)
        (ctx / "Dockerfile").write_text(dockerfile)
        _run(["docker", "build", "-q", "-t", ref, str(ctx)], what=f"docker build {ref}")


# -- the workload image --------------------------------------------------------------------------


def workload_image() -> str:
    """Debian's busybox-static in a scratch image: ``sh -c 'sleep 2; exit 1'`` and friends.

    Tagged with the package version apt offers (read locally with ``apt-cache``), so the
    .deb is downloaded only when that version has no image yet.
    """
    out = _run(["apt-cache", "show", "--no-all-versions", "busybox-static"], what="apt-cache show busybox-static")
    m = re.search(r"^Version:\s*(\S+)", out, re.MULTILINE)
    if m is None:
        raise ImageError(f"apt-cache show busybox-static printed no Version:\n{out[:500]}")
    ref = f"jobmirror.local/busybox:{busybox_tag(m.group(1))}"
    if image_exists(ref):
        return ref
    _log(f"building {ref}")
    work = images_dir() / "work" / "busybox"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _run(["apt-get", "download", f"busybox-static={m.group(1)}"], what="apt-get download busybox-static", cwd=work)
    deb = next(work.glob("busybox-static_*.deb"))
    _run(["dpkg-deb", "-x", str(deb), str(work / "x")], what="dpkg-deb -x busybox-static")
    build_context(ref, "FROM scratch\nCOPY busybox /bin/busybox\n"
                       'RUN ["/bin/busybox", "--install", "-s", "/bin"]\n'
                       'ENV PATH=/bin\nCMD ["/bin/sh"]\n',
                  {"busybox": work / "x" / "bin" / "busybox"})
    shutil.rmtree(work, ignore_errors=True)
    return ref


def busybox_tag(deb_version: str) -> str:
    """A Debian version as an image tag: no epoch, only ``[A-Za-z0-9_.-]``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", deb_version.split(":", 1)[-1])


# -- the controller image ---------------------------------------------------------------------------


def python_base() -> str:
    """Debian bookworm's python3 (3.11) as a base image, standing in for the public python:3.11-slim."""
    ref = python_base_ref()
    if image_exists(ref):
        return ref
    root = images_dir() / "work" / "rootfs-python"
    debootstrap(root, PYTHON_PACKAGES)
    for d in ("usr/share/doc", "usr/share/man", "usr/share/locale"):
        shutil.rmtree(root / d, ignore_errors=True)
    added = _trust_host_cas(root)
    docker_import(root, ref, [f"ENV {PATH_ENV}", "ENV LANG=C.UTF-8", f"ENV PIP_CERT={SYSTEM_CA_BUNDLE}",
                              'CMD ["python3"]'])
    shutil.rmtree(root, ignore_errors=True)
    _log(f"built {ref}" + (f" (trusting the host's extra CAs: {', '.join(added)})" if added else ""))
    return ref


def _trust_host_cas(root: Path) -> list[str]:
    """Give a locally built base the host's locally added CAs (a TLS-intercepting egress proxy's,
    here): `pip install` in `docker build` reaches PyPI through the same proxy as the host.
    Pulled images never get this; it only concerns images built on this machine."""
    added = []
    for crt in sorted(HOST_EXTRA_CAS.glob("*.crt")):
        shutil.copy(crt, root / "usr/local/share/ca-certificates" / crt.name)
        added.append(crt.name)
    if added:
        _run(["chroot", str(root), "update-ca-certificates"], what="update-ca-certificates (chroot)")
    return added


def controller_image(ref: str, *, python_image: str | None = None) -> str:
    """The project's Dockerfile, built from the current source on a local (or given) Python base."""
    base = python_image or python_base()
    t0 = time.monotonic()
    _run(["docker", "build", "-q", "--build-arg", f"PYTHON_IMAGE={base}", "-t", ref, str(ROOT)],
         what=f"docker build {ref}", timeout=1200)
    _log(f"controller image {ref} on {base}: {time.monotonic() - t0:.0f}s")
    return ref


# -- JobSet's controller ------------------------------------------------------------------------


def jobset_image(version: str = versions.JOBSET_VERSION) -> str:
    """JobSet's controller laid out as upstream's image (its manager binary as ``/manager``, user
    65532), on scratch, from the cluster bed's static Go build of the module: nothing is pulled,
    and a warm run builds nothing (the binary and the image are both keyed by version)."""
    ref = f"jobmirror.local/jobset:v{version}"
    if image_exists(ref):
        return ref
    t0 = time.monotonic()
    binary = build.build_jobset(version)
    build_context(ref, 'FROM scratch\nCOPY manager /manager\nUSER 65532:65532\nENTRYPOINT ["/manager"]\n',
                  {"manager": binary})
    _log(f"built {ref} in {time.monotonic() - t0:.0f}s")
    return ref


# -- the kind node image ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeInputs:
    """Everything the node image is made of, built (or found) by clusterbed.build."""

    kube_version: str
    kube_bin: Path  # kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
    node_bin: Path  # kubelet, kubeadm, kube-proxy
    etcd: Path
    crictl: Path
    coredns: Path
    pause: Path
    kind_src: Path  # the kind module's directory (images/base/files)


def build_node_inputs(kube_version: str = versions.KUBE_VERSION) -> NodeInputs:
    crictl_version_var = f"sigs.k8s.io/cri-tools/pkg/version.Version=v{versions.CRICTL_VERSION}"
    kube = build.build_kubernetes(kube_version)
    node = build.build_kubernetes_node(kube_version)
    return NodeInputs(
        kube_version=kube_version,
        kube_bin=kube,
        node_bin=node,
        etcd=build.build_etcd(versions.ETCD_VERSION) / "etcd",
        crictl=build.build_go_tool("crictl", "sigs.k8s.io/cri-tools", versions.CRICTL_VERSION,
                                   "sigs.k8s.io/cri-tools/cmd/crictl", ldflags=f"-s -w -X {crictl_version_var}"),
        coredns=build.build_go_tool("coredns", "github.com/coredns/coredns", versions.COREDNS_VERSION,
                                    "github.com/coredns/coredns"),
        pause=build.build_go_tool("pause", "", f"r{versions.KIND_IMAGE_RECIPE}", ".",
                                  source=Path(__file__).resolve().parent / "pause"),
        kind_src=module_dir("sigs.k8s.io/kind", versions.KIND_VERSION),
    )


def module_dir(module: str, version: str) -> Path:
    out = subprocess.run(["go", "mod", "download", "-json", f"{module}@v{version}"], capture_output=True, text=True,
                         env={**os.environ, "GOFLAGS": "-mod=mod"}, cwd=versions.cache_root())
    if out.returncode != 0:
        raise ImageError(f"go mod download {module}@v{version} failed:\n{out.stdout[-1500:]}{out.stderr[-1500:]}")
    return Path(json.loads(out.stdout)["Dir"])


def kubeadm_image_names(kubeadm: Path, kube_version: str) -> dict[str, str]:
    """``kubeadm config images list`` keyed by component (kube-apiserver, etcd, pause, coredns, …)."""
    out = _run([str(kubeadm), "config", "images", "list", "--kubernetes-version", f"v{kube_version}"],
               what="kubeadm config images list")
    names: dict[str, str] = {}
    for ref in out.split():
        component = ref.rsplit("/", 1)[-1].split(":", 1)[0]
        names[component] = ref
    return names


def _containerd_config(kind_files: Path) -> tuple[str, str]:
    """kind's containerd config without the fuse-overlayfs proxy plugin (rootless only) and with
    ``restrict_oom_score_adj`` on: without CAP_SYS_RESOURCE runc cannot lower a sandbox's
    oom_score_adj and every pod sandbox fails. Returns (config, sandbox image)."""
    text = (kind_files / "etc/containerd/config.toml").read_text()
    text = re.sub(r"(?ms)^\[proxy_plugins\].*?^\s*address = [^\n]*\n", "", text)
    text = text.replace("restrict_oom_score_adj = false", "restrict_oom_score_adj = true")
    m = re.search(r'sandbox_image = "([^"]+)"', text)
    return text, m.group(1) if m else ""


def _install(src: Path, dst_dir: Path, mode: int) -> None:
    dst_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst_dir / src.name)
    (dst_dir / src.name).chmod(mode)


def _layout_node_rootfs(r: Path, inp: NodeInputs, containerd_config: str) -> None:
    """Lay the rootfs out as kind's images/base Dockerfile does (files from the kind module)."""
    k = inp.kind_src / "images" / "base" / "files"
    for f in (k / "usr/local/bin").iterdir():
        _install(f, r / "usr/local/bin", 0o755)
    for f in (k / "kind/bin").iterdir():
        _install(f, r / "kind/bin", 0o755)
    for d in ("kind/manifests", "etc/containerd", "etc/default", "etc/sysctl.d",
              "etc/systemd/system/kubelet.service.d", "etc/kubernetes/manifests", "opt/cni/bin", "etc/cni/net.d"):
        (r / d).mkdir(parents=True, exist_ok=True)
    (r / "kind").chmod(0o755)
    _install(k / "etc/crictl.yaml", r / "etc", 0o644)
    _install(k / "etc/default/kubelet", r / "etc/default", 0o644)
    for f in (k / "etc/sysctl.d").iterdir():
        _install(f, r / "etc/sysctl.d", 0o644)
    for f in (k / "etc/systemd/system").iterdir():
        if f.is_file() and f.name != "containerd-fuse-overlayfs.service":
            _install(f, r / "etc/systemd/system", 0o644)
    for f in (k / "etc/systemd/system/kubelet.service.d").iterdir():
        _install(f, r / "etc/systemd/system/kubelet.service.d", 0o644)
    unit = r / "etc/systemd/system/containerd.service"
    unit.write_text(unit.read_text().replace("/usr/local/bin/containerd", "/usr/bin/containerd"))
    (r / "etc/containerd/config.toml").write_text(containerd_config)
    for f in (r / "usr/lib/cni").iterdir():
        _install(f, r / "opt/cni/bin", 0o755)
    for f in (r / "lib/systemd/system/sysinit.target.wants").glob("systemd-tmpfiles-setup.service"):
        f.unlink()
    for pattern in ("lib/systemd/system/multi-user.target.wants/*", "etc/systemd/system/*.wants/*",
                    "lib/systemd/system/local-fs.target.wants/*", "lib/systemd/system/sockets.target.wants/*udev*",
                    "lib/systemd/system/sockets.target.wants/*initctl*", "lib/systemd/system/basic.target.wants/*"):
        for p in r.glob(pattern):
            p.unlink()
    with (r / "etc/systemd/journald.conf").open("a") as conf:
        conf.write("ReadKMsg=no\n")
    _run(["chroot", str(r), "systemctl", "enable", "kubelet.service", "containerd.service",
          "undo-mount-hacks.service"], what="systemctl enable (chroot)")
    _run(["chroot", str(r), "systemctl", "mask", "systemd-binfmt.service"], what="systemctl mask (chroot)")
    spec = json.loads(_run(["chroot", str(r), "ctr", "oci", "spec"], what="ctr oci spec (chroot)"))
    spec.setdefault("hooks", {}).setdefault("createContainer", []).append({"path": "/kind/bin/mount-product-files.sh"})
    spec.get("process", {}).pop("rlimits", None)
    (r / "etc/containerd/cri-base.json").write_text(json.dumps(spec))
    (r / "etc/cni/net.d/10-jobmirror-static.conflist").write_text(json.dumps(_CNI_CONFLIST, indent=1))
    (r / "kind/manifests/default-cni.yaml").write_text(_DUMMY_CNI_MANIFEST)
    (r / "kind/manifests/default-storage.yaml").write_text(_STORAGE_MANIFEST)
    (r / "kind/version").write_text(f"v{inp.kube_version}")
    for b in (inp.node_bin / "kubelet", inp.node_bin / "kubeadm", inp.kube_bin / "kubectl", inp.crictl):
        _install(b, r / "usr/bin", 0o755)
    (r / "etc/machine-id").write_text("")


def _kube_proxy_base() -> str:
    """kube-proxy needs iptables, conntrack and ipset beside its binary: a small Debian base."""
    ref = f"jobmirror.local/kube-proxy-base:{SUITE}-r{versions.KIND_IMAGE_RECIPE}"
    if not image_exists(ref):
        root = images_dir() / "work" / "rootfs-kproxy"
        debootstrap(root, KPROXY_PACKAGES)
        for d in ("usr/share/doc", "usr/share/man", "usr/share/locale"):
            shutil.rmtree(root / d, ignore_errors=True)
        docker_import(root, ref, [f"ENV {PATH_ENV}"])
        shutil.rmtree(root, ignore_errors=True)
    return ref


def _component_images(inp: NodeInputs, sandbox_image: str, kproxy_base: str) -> list[str]:
    """The control-plane images kubeadm will ask for, built from our binaries; returns their refs."""
    names = kubeadm_image_names(inp.node_bin / "kubeadm", inp.kube_version)
    missing = {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "etcd", "pause",
               "coredns"} - set(names)
    if missing:
        raise ImageError(f"kubeadm config images list lacks {sorted(missing)}: {names}")
    coredns_tag = names["coredns"].rsplit(":", 1)[-1]
    if coredns_tag.lstrip("v") != versions.COREDNS_VERSION:
        _log(f"note: kubeadm asks for CoreDNS {coredns_tag}; the image holds {versions.COREDNS_VERSION}")
    for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"):
        binary = (inp.node_bin if c == "kube-proxy" else inp.kube_bin) / c
        base = kproxy_base if c == "kube-proxy" else "scratch"
        build_context(names[c], f"FROM {base}\nENV {PATH_ENV}\nCOPY {c} /usr/local/bin/{c}\n"
                                f'ENTRYPOINT ["/usr/local/bin/{c}"]\n', {c: binary})
    build_context(names["etcd"], "FROM scratch\nENV PATH=/usr/local/bin\nCOPY etcd /usr/local/bin/etcd\n"
                                 'ENTRYPOINT ["/usr/local/bin/etcd"]\n', {"etcd": inp.etcd})
    build_context(names["pause"], 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n',
                  {"pause": inp.pause})
    # CoreDNS binds :53 as root here: the upstream image relies on file capabilities we cannot set.
    build_context(names["coredns"], 'FROM scratch\nCOPY coredns /coredns\nEXPOSE 53 53/udp\nENTRYPOINT ["/coredns"]\n',
                  {"coredns": inp.coredns})
    refs = [names[c] for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "etcd",
                               "pause", "coredns")]
    if sandbox_image and sandbox_image not in refs:
        _run(["docker", "tag", names["pause"], sandbox_image], what="docker tag pause")
        refs.append(sandbox_image)
    return refs


def node_image(kube_version: str = versions.KUBE_VERSION) -> str:
    """The kind node image for ``kube_version``, built once per version and recipe revision."""
    ref = node_image_ref(kube_version)
    if image_exists(ref):
        return ref
    _need_root("the kind node image")
    t0 = time.monotonic()
    _log(f"building {ref} (first run: two debootstraps, Go builds, preload; ~10 min on 2 cores)")
    # The downloads first: they overlap with the Go builds a concurrent bootstrap may be running.
    kproxy_base = _kube_proxy_base()
    root = images_dir() / "work" / "rootfs-node"
    debootstrap(root, NODE_PACKAGES)
    _log(f"rootfs ready: {time.monotonic() - t0:.0f}s")
    inp = build_node_inputs(kube_version)
    _log(f"node inputs (Go) ready: {time.monotonic() - t0:.0f}s")
    kind_files = inp.kind_src / "images" / "base" / "files"
    config, sandbox = _containerd_config(kind_files)
    refs = _component_images(inp, sandbox, kproxy_base)
    _log(f"control-plane images ready: {time.monotonic() - t0:.0f}s")
    _layout_node_rootfs(root, inp, config)
    tag = f"v{kube_version}-r{versions.KIND_IMAGE_RECIPE}"
    base = f"jobmirror.local/kind-node-base:{tag}"
    docker_import(root, base, ["ENV container=docker", f"ENV {PATH_ENV}",
                               'ENTRYPOINT ["/usr/local/bin/entrypoint","/sbin/init"]'])
    shutil.rmtree(root, ignore_errors=True)
    _log(f"node rootfs imported: {time.monotonic() - t0:.0f}s; preloading {len(refs)} images into containerd")
    builder = f"jobmirror-node-build-{os.getpid()}"
    tarball = images_dir() / "work" / "preload.tar"
    _run(["docker", "save", "-o", str(tarball), *refs], what="docker save control-plane images")
    subprocess.run(["docker", "rm", "-f", builder], capture_output=True)
    try:
        _run(["docker", "run", "-d", "--entrypoint=sleep", "--name", builder, "--security-opt", "seccomp=unconfined",
              base, "infinity"], what="start the preload container")
        _run(["docker", "exec", builder, "bash", "-c",
              "nohup containerd >/tmp/containerd.log 2>&1 </dev/null & "
              "for i in $(seq 120); do [ -S /run/containerd/containerd.sock ] && break; sleep 0.5; done; ctr version"],
             what="containerd in the preload container")
        _run(["docker", "exec", "-i", builder, "ctr", "--namespace=k8s.io", "images", "import",
              "--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--no-unpack", "--digests", "-"],
             what="ctr images import", input=tarball.read_bytes())
        _run(["docker", "exec", builder, "bash", "-c", "kill $(pidof containerd); sleep 1; rm -rf /tmp/*"],
             what="stop containerd in the preload container")
        stage = f"jobmirror.local/kind-node-stage:{tag}"
        _run(["docker", "commit", "--change", 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]', builder,
              stage], what="docker commit node image")
    finally:
        subprocess.run(["docker", "rm", "-f", builder], capture_output=True)
        tarball.unlink(missing_ok=True)
    # import/commit cannot set STOPSIGNAL; a two-line build can (systemd wants SIGRTMIN+3).
    build_context(ref, f"FROM {stage}\nSTOPSIGNAL SIGRTMIN+3\n", {})
    _run(["docker", "rmi", stage, base], what="remove intermediate tags")
    _log(f"built {ref} in {time.monotonic() - t0:.0f}s")
    return ref


def ensure_images(controller_ref: str, *, node: str | None = None, python_image: str | None = None,
                  jobset: bool = False) -> Images:
    """Node, controller and workload images; a given ``node`` image (e.g. kindest/node on a laptop) is used as is.

    Download-heavy steps come first (Debian base, workload), Go builds later, so a concurrent
    bootstrap's compilation overlaps with the network."""
    base = python_image or python_base()
    workload = workload_image()
    node_ref = node or node_image()
    return Images(node=node_ref, controller=controller_image(controller_ref, python_image=base), workload=workload,
                  jobset=jobset_image() if jobset else "")
