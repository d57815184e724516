"""What `make test` builds for the matrix corners is what their clusters start (issue 39)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import versions as vm
from clusterbed import versions
from clusterbed.build import KUBE_COMMANDS
from clusterbed.cluster import ClusterSpec
from tests.conftest import apiserver_at


@pytest.mark.parametrize(("spec", "commands"), [
    (ClusterSpec("w"), KUBE_COMMANDS[:3]),
    (ClusterSpec("m", nodes=0), ("kube-apiserver", "kube-controller-manager")),
    (ClusterSpec("a", controller_manager=False, nodes=0), ("kube-apiserver",)),
    (ClusterSpec("b", job_controller=False, nodes=1), KUBE_COMMANDS[:3]),
])
def test_a_cluster_starts_only_the_commands_it_names(spec: ClusterSpec, commands: tuple[str, ...]) -> None:
    assert spec.kube_commands == commands


def test_the_corner_builds_cover_every_corner_cluster_of_make_test() -> None:
    needed: dict[str, set[str]] = {}
    specs = [vm.default_spec(vm.MANAGER, c.manager) for c in vm.CORNERS]
    specs += [vm.default_spec(vm.WORKER, c.worker) for c in vm.CORNERS]
    specs += [apiserver_at(v) for v in versions.CORNER_KUBE_VERSIONS]
    for spec in specs:
        if spec.kube_version != versions.KUBE_VERSION:
            needed.setdefault(spec.kube_version, set()).update(spec.kube_commands)
    assert needed == {v: set(c) for v, c in versions.CORNER_KUBE_COMMANDS.items()}


def test_the_kueue_worker_limits_patch_applies_once_and_refuses_other_code(tmp_path: Path) -> None:
    from clusterbed import build

    target = tmp_path / build._KUEUE_CLIENT_FILE
    target.parent.mkdir(parents=True)
    released = ("func (c *clientConfig) toRESTConfig() (*rest.Config, error) {\n"
                + build._KUEUE_RELEASED_TO_REST + "}\n")
    target.write_text(released)
    build.patch_kueue_worker_limits(tmp_path)
    patched = target.read_text()
    assert "withWorkerLimits(cfg)" in patched and "withWorkerLimits(c.RestConfig)" in patched
    helper = (target.parent / "workerlimits_jobmirror.go").read_text()
    assert build.KUEUE_WORKER_QPS_ENV in helper and build.KUEUE_WORKER_BURST_ENV in helper
    build.patch_kueue_worker_limits(tmp_path)  # a second build reuses the patched copy
    assert target.read_text() == patched
    target.write_text("func (c *clientConfig) toRESTConfig() {}\n")
    with pytest.raises(build.BuildError, match="toRESTConfig"):
        build.patch_kueue_worker_limits(tmp_path)

