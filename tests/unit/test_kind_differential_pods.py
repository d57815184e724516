"""The kind differential's pods and checks (e2e/differential.py): the pure parts, no cluster."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from e2e.differential import container_script, counters, pod_template, trajectory_faults


@pytest.mark.parametrize(("exit_codes", "probe_port"), [(None, None), ({0: 42, 2: 7}, None), (None, 8080)])
def test_container_script_is_valid_sh(exit_codes: dict[int, int] | None, probe_port: int | None) -> None:
    script = container_script(term_delay=8, exit_codes=exit_codes, probe_port=probe_port)
    assert "trap 'sleep 8; exit 143' TERM" in script and script.endswith('exit "$code"')
    sh = shutil.which("sh")
    if sh is not None:
        assert subprocess.run([sh, "-n", "-c", script], capture_output=True).returncode == 0, script


def test_container_script_exit_codes_by_index_and_probe_only_when_asked() -> None:
    script = container_script(term_delay=3, exit_codes={0: 42, 2: 7})
    assert 'case "$JOB_COMPLETION_INDEX" in 0) code=42;; 2) code=7;; esac' in script
    assert "httpd" not in script
    assert "httpd -p 8080 -h /tmp" in container_script(term_delay=3, probe_port=8080)


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
def test_container_script_exits_with_its_index_code_once_released(tmp_path: Path) -> None:
    script = container_script(term_delay=1, exit_codes={0: 42}).replace("/tmp/go", f"{tmp_path}/go")
    script = script.replace("mkdir -p /tmp", f"touch {tmp_path}/go")  # released at once
    for index, code in (("0", 42), ("1", 0)):
        proc = subprocess.run(["sh", "-c", script], env={"JOB_COMPLETION_INDEX": index, "PATH": "/usr/bin:/bin"},
                              capture_output=True, timeout=10)
        assert proc.returncode == code


def test_pod_template_grace_outlasts_the_trap_and_probe_is_tcp() -> None:
    tpl = pod_template("busybox:x", term_delay=8, readiness_probe=True)
    spec = tpl["spec"]
    assert spec["restartPolicy"] == "Never" and spec["terminationGracePeriodSeconds"] > 8
    [c] = spec["containers"]
    assert c["name"] == "main" and c["imagePullPolicy"] == "IfNotPresent"
    assert c["readinessProbe"]["tcpSocket"] == {"port": 8080}  # no exec probe: no runc exec per second
    assert "readinessProbe" not in pod_template("busybox:x", term_delay=8)["spec"]["containers"][0]


def test_counters_default_to_zero_and_faults_name_ready_above_active() -> None:
    assert counters({"status": {"active": 2, "ready": 1}}) == {"active": 2, "ready": 1, "terminating": 0,
                                                                "succeeded": 0, "failed": 0}
    ok = counters({"status": {"active": 1, "ready": 1}})
    bad = counters({"status": {"active": 0, "ready": 1}})
    assert trajectory_faults([ok]) == []
    assert trajectory_faults([ok, bad]) == ["step 1: ready 1 > active 0"]
