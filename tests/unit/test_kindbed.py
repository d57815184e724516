"""kindbed's pure parts: capability detection, the runc wrapper, mirror and config rewriting, the overlay."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kindbed import clusters, engine, images
from kindbed.__main__ import env_lines


@pytest.mark.parametrize(("capbnd", "lacks"), [
    ("000001fffeffffff", True),   # this project's CI machine: bit 24 (CAP_SYS_RESOURCE) cleared
    ("000001ffffffffff", False),  # a normal root shell
    ("0000000000000000", True),
])
def test_bounding_set_detection(tmp_path: Path, capbnd: str, lacks: bool) -> None:
    status = tmp_path / "status"
    status.write_text(f"Name:\tx\nCapEff:\t0000000000000000\nCapBnd:\t{capbnd}\n")
    assert engine.bounding_set_lacks(engine.CAP_SYS_RESOURCE, status) is lacks


def test_bounding_set_unreadable_means_leave_the_engine_alone(tmp_path: Path) -> None:
    assert engine.bounding_set_lacks(engine.CAP_SYS_RESOURCE, tmp_path / "missing") is False


@pytest.mark.skipif(shutil.which("jq") is None, reason="the wrapper needs jq (installed by the kind tier)")
def test_runc_wrapper_strips_only_cap_sys_resource(tmp_path: Path) -> None:
    """Run the real wrapper script with a fake runc: create edits config.json, exec edits the process file."""
    fake_runc = tmp_path / "runc"
    fake_runc.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/argv"\n')
    fake_runc.chmod(0o755)
    wrapper = tmp_path / "wrapper"
    wrapper.write_text(engine._WRAPPER.replace("@REAL_RUNC@", str(fake_runc)).replace("@JQ@", shutil.which("jq") or ""))
    wrapper.chmod(0o755)
    caps = ["CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"]
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps({"process": {"capabilities": {
        "bounding": caps, "effective": caps, "permitted": caps}}, "root": {"path": "rootfs"}}))
    subprocess.run([str(wrapper), "--root", "/x", "create", "--bundle", str(bundle), "cid"], check=True)
    spec = json.loads((bundle / "config.json").read_text())
    for kind in ("bounding", "effective", "permitted"):
        assert spec["process"]["capabilities"][kind] == ["CAP_CHOWN", "CAP_SYS_ADMIN"]
    assert spec["root"] == {"path": "rootfs"}
    assert (tmp_path / "argv").read_text().split() == ["--root", "/x", "create", "--bundle", str(bundle), "cid"]

    proc_file = tmp_path / "process.json"
    proc_file.write_text(json.dumps({"args": ["sh"], "capabilities": {"bounding": caps}}))
    subprocess.run([str(wrapper), "exec", f"--process={proc_file}", "cid"], check=True)
    assert json.loads(proc_file.read_text())["capabilities"]["bounding"] == ["CAP_CHOWN", "CAP_SYS_ADMIN"]

    # Other commands and specs without capabilities pass through untouched.
    plain = bundle / "config.json"
    plain.write_text('{"process": {}}')
    subprocess.run([str(wrapper), "create", "-b", str(bundle), "cid"], check=True)
    assert json.loads(plain.read_text()) == {"process": {}}
    subprocess.run([str(wrapper), "delete", "cid"], check=True)
    assert (tmp_path / "argv").read_text().split() == ["delete", "cid"]


@pytest.mark.parametrize(("text", "mirror"), [
    ("Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n", "http://deb.debian.org/debian"),
    ("Types: deb\nURIs: http://deb.debian.org/debian-security\n", None),
    ("deb [arch=amd64] http://mirror.example/debian bookworm main\n", "http://mirror.example/debian"),
    ("# deb http://commented.example/debian bookworm main\n", None),
])
def test_apt_mirror_parsing(text: str, mirror: str | None) -> None:
    assert images.mirror_in(text) == mirror


def test_containerd_config_drops_fuse_proxy_and_restricts_oom_score_adj(tmp_path: Path) -> None:
    conf = tmp_path / "etc/containerd"
    conf.mkdir(parents=True)
    (conf / "config.toml").write_text(
        'version = 2\n\n[proxy_plugins]\n# rootless\n[proxy_plugins."fuse-overlayfs"]\n  type = "snapshot"\n'
        '  address = "/run/containerd-fuse-overlayfs.sock"\n\n[plugins."io.containerd.grpc.v1.cri"]\n'
        '  sandbox_image = "registry.k8s.io/pause:3.10"\n  restrict_oom_score_adj = false\n')
    text, sandbox = images._containerd_config(tmp_path)
    assert "proxy_plugins" not in text and "fuse-overlayfs" not in text
    assert "restrict_oom_score_adj = true" in text and "= false" not in text
    assert sandbox == "registry.k8s.io/pause:3.10"
    assert 'version = 2' in text and '[plugins."io.containerd.grpc.v1.cri"]' in text


def test_options_validate_workers_and_image_tag() -> None:
    with pytest.raises(clusters.KindError, match="workers"):
        clusters.KindOptions(workers=3)
    with pytest.raises(clusters.KindError, match="tag"):
        clusters.KindOptions(image="registry.example:5000/jobmirror")
    opts = clusters.KindOptions(prefix="p", workers=2)
    assert opts.all_clusters() == ["p-manager", "p-worker-1", "p-worker-2"]
    assert opts.worker_clusters() == {"worker-1": "p-worker-1", "worker-2": "p-worker-2"}


def test_no_jobs_cluster_is_optional_and_always_deleted() -> None:
    opts = clusters.KindOptions(prefix="p")
    assert opts.all_clusters() == ["p-manager", "p-worker-1"]
    assert opts.deletable_clusters() == ["p-manager", "p-worker-1", "p-no-jobs"]
    with_it = clusters.KindOptions(prefix="p", no_jobs_cluster=True)
    assert with_it.all_clusters() == ["p-manager", "p-worker-1", "p-no-jobs"]
    assert with_it.deletable_clusters() == with_it.all_clusters()
    assert "p-no-jobs" not in with_it.worker_clusters().values()  # nothing is deployed to it


def test_kind_config_disables_only_the_job_controller() -> None:
    plain = yaml.safe_load(clusters.kind_config())
    off = yaml.safe_load(clusters.kind_config(job_controller=False))
    assert off["nodes"] == plain["nodes"] == [{"role": "control-plane"}]
    patches = [yaml.safe_load(p) for p in off["kubeadmConfigPatches"]]
    plain_patches = [yaml.safe_load(p) for p in plain["kubeadmConfigPatches"]]
    assert patches[0] == plain_patches[0] == {"kind": "KubeletConfiguration",
                                              "apiVersion": "kubelet.config.k8s.io/v1beta1", "failCgroupV1": False}
    no_fsync = {"local": {"extraArgs": {"unsafe-no-fsync": "true"}}}
    # Map form without apiVersion: kind 0.33 merges it into kubeadm v1beta4's list (Kubernetes >= 1.36).
    assert patches[1] == {"kind": "ClusterConfiguration", "etcd": no_fsync,
                          "controllerManager": {"extraArgs": {"controllers": "*,-job-controller"}}}
    assert plain_patches[1] == {"kind": "ClusterConfiguration", "etcd": no_fsync}
    assert len(patches) == len(plain_patches) == 2  # one patch per kubeadm kind
    assert "extraMounts" not in plain["nodes"][0]


def test_kind_etcd_lives_in_a_host_tmpfs_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMIRROR_SCRATCH", str(tmp_path))
    where = clusters.etcd_host_dir("p-worker-1")
    assert where == tmp_path / "jobmirror-kind-etcd-p-worker-1"
    node = yaml.safe_load(clusters.kind_config(etcd_host_dir=where))["nodes"][0]
    mount = {"hostPath": str(where), "containerPath": "/var/lib/etcd"}
    assert node == {"role": "control-plane", "extraMounts": [mount]}
    monkeypatch.setenv("JOBMIRROR_SCRATCH", "")  # the system's temporary directory: etcd stays in the node
    assert clusters.etcd_host_dir("p-worker-1") is None


@pytest.mark.parametrize("workers", [1, 2])
def test_overlay_replaces_config_and_secret_and_keeps_the_shipped_workers(tmp_path: Path, workers: int) -> None:
    opts = clusters.KindOptions(workers=workers, image="reg.example:5000/jm:v9", workdir=tmp_path)
    files = [f"{w}.kubeconfig" for w in opts.worker_clusters()]
    overlay = clusters._overlay(opts, files, story1=workers == 1)
    k = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    base = (overlay / k["resources"][0]).resolve()
    assert base == (clusters.DEPLOY / "manager-as-worker" if workers == 1 else clusters.DEPLOY).resolve()
    assert k["images"] == [{"name": "jobmirror", "newName": "reg.example:5000/jm", "newTag": "v9"}]
    assert k["secretGenerator"][0]["files"] == files and k["secretGenerator"][0]["behavior"] == "replace"
    cfg = yaml.safe_load((overlay / "config.yaml").read_text())
    assert cfg["workerLostTimeout"] == clusters.E2E_CONFIG_OVERRIDES["workerLostTimeout"]
    names = [w["name"] for w in cfg["workers"]]
    assert names == (["manager", "worker-1"] if workers == 1 else ["worker-1", "worker-2"])
    assert cfg["leaderElection"]["enabled"] is True
    if workers == 1:
        assert (overlay / "in-cluster.kubeconfig").exists()
        assert "in-cluster.kubeconfig" in k["configMapGenerator"][0]["files"]


@pytest.mark.parametrize("workers", [1, 2])
def test_overlay_mirrors_jobsets_unless_told_not_to(tmp_path: Path, workers: int) -> None:
    """jobsets (the default): kinds [Job, JobSet] and deploy/jobset/'s manager RBAC for the layout"""
    story1 = workers == 1
    opts = clusters.KindOptions(workers=workers, workdir=tmp_path)
    k = yaml.safe_load((clusters._overlay(opts, [], story1=story1) / "kustomization.yaml").read_text())
    extra = (tmp_path / "overlay" / k["resources"][1]).resolve()
    assert extra == (clusters.DEPLOY / "jobset" / ("manager-as-worker" if story1 else "manager")).resolve()
    assert yaml.safe_load((tmp_path / "overlay" / "config.yaml").read_text())["kinds"] == ["Job", "JobSet"]
    off = clusters.KindOptions(workers=workers, workdir=tmp_path / "off", jobsets=False)
    k = yaml.safe_load((clusters._overlay(off, [], story1=story1) / "kustomization.yaml").read_text())
    assert len(k["resources"]) == 1
    assert "JobSet" not in (yaml.safe_load((tmp_path / "off" / "overlay" / "config.yaml").read_text())
                            .get("kinds") or [])


def test_jobset_overlay_is_the_modules_own_with_our_image(tmp_path: Path) -> None:
    opts = clusters.KindOptions(workdir=tmp_path)
    overlay = clusters._jobset_overlay(opts, "jobmirror.local/jobset:v0.12.0")
    k = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    assert (overlay / k["resources"][0]).resolve().parts[-2:] == ("config", "default")
    assert {i["newName"] + ":" + i["newTag"] for i in k["images"]} == {"jobmirror.local/jobset:v0.12.0"}
    assert {i["name"] for i in k["images"]} == set(clusters.JOBSET_UPSTREAM_IMAGES)


@pytest.mark.parametrize(("version", "tag"), [
    ("1:1.35.0-4+deb12u1+b1", "1.35.0-4-deb12u1-b1"),
    ("1.36.1-9~bpo12+1", "1.36.1-9-bpo12-1"),
])
def test_busybox_tag_is_a_valid_image_tag(version: str, tag: str) -> None:
    assert images.busybox_tag(version) == tag


def test_env_lines_let_a_shell_use_the_deployment(tmp_path: Path) -> None:
    """The README's quick start evals them: the manager as KUBECONFIG, kubectl and the plugin on
    PATH, and an image every cluster holds; paths with spaces stay one word."""
    dep = clusters.KindDeployment(prefix="jm", manager_cluster="jm-manager", clusters=["jm-manager"],
                         manager_kubeconfig=str(tmp_path / "a b" / "manager.kubeconfig"), worker_kubeconfigs={},
                         worker_clusters={}, manager_worker="manager", kustomization="", kubectl="/opt/k8s/kubectl",
                         kind="/opt/k8s/kind", controller_image="jobmirror:e2e",
                         workload_image="jobmirror.local/busybox:1.35", node_image="", workdir=str(tmp_path),
                         engine_started_pid=None)
    out = subprocess.run(["bash", "-c", env_lines(dep) + '\nprintf "%s\\n" "$KUBECONFIG" "$IMAGE" "$PATH"'],
                         capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"}).stdout.splitlines()
    assert out[0] == str(tmp_path / "a b" / "manager.kubeconfig")
    assert out[1] == "jobmirror.local/busybox:1.35"
    assert out[2].startswith("/opt/k8s:") and out[2].endswith(":/usr/bin:/bin")


def test_a_kept_cluster_whose_etcd_data_is_gone_is_made_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMIRROR_SCRATCH", str(tmp_path))
    calls: list[str] = []
    kind = clusters.Kind(tmp_path / "kind", tmp_path / "kubectl", tmp_path)

    def run(*args: str, what: str, **kw: object) -> str:
        calls.append(what)
        return "p-worker-1\n" if what == "kind get clusters" else "kubeconfig"

    monkeypatch.setattr(kind, "run", run)
    kind.create("p-worker-1", "node:img")  # its etcd directory is not there (a reboot emptied /dev/shm)
    assert calls == ["kind get clusters", "kind delete cluster p-worker-1", "kind create cluster p-worker-1",
                     "kind get kubeconfig"]
    assert (tmp_path / "jobmirror-kind-etcd-p-worker-1").is_dir()  # made empty for the new cluster
    calls.clear()
    kind.create("p-worker-1", "node:img")  # now it has it: reused
    assert calls == ["kind get clusters", "kind get kubeconfig"]
