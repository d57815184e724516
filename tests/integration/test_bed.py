"""The cluster bed itself: several real clusters up and down, twice, and nothing left behind.

Uses private :class:`ClusterBed` instances (not the session bed), so it can tear them down.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from clusterbed.cluster import BedError, ClusterBed, ClusterSpec

pytestmark = pytest.mark.integration

SMALL_BED = (
    ClusterSpec("bed-manager", nodes=0),  # kcm on, no nodes: the manager's shape
    ClusterSpec("bed-worker-a", nodes=1),  # kcm + scheduler + one kwok node: a worker's shape
    ClusterSpec("bed-worker-b", controller_manager=False, nodes=0),  # API server only
)


def processes_mentioning(text: str) -> list[str]:
    """Live processes whose command line mentions ``text`` (zombies have none and do not count)."""
    found = []
    needle = text.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline:
            args = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry.name}: {args[:200]}")
    return found


def wait_no_processes(workdir: Path, timeout: float = 10) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := processes_mentioning(str(workdir))) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


# One round: a second bed after the first was the parametrized second round (30-40 s of CI); every
# CI run starts several more beds after this one (the chaos and benchmark beds), each a second round.
def test_three_clusters_up_ready_and_down_without_leftovers() -> None:
    bed = ClusterBed()
    workdir = bed.workdir
    try:
        clusters = bed.up(SMALL_BED)
        assert sorted(clusters) == sorted(s.name for s in SMALL_BED)
        urls = set()
        for spec in SMALL_BED:
            c = clusters[spec.name]
            ready = c.kubectl("get", "--raw", "/readyz", check=False)
            assert ready.returncode == 0 and ready.stdout.strip() == "ok", (spec.name, ready.stderr)
            assert c.kubeconfig.is_file()
            api_pid = c.pid("kube-apiserver")
            assert api_pid is not None and str(workdir) in Path(f"/proc/{api_pid}/cmdline").read_text()
            urls.add(c.server_url())
        assert len(urls) == len(SMALL_BED), f"clusters share an API server address: {urls}"
        # The bed really runs the shape asked for: a worker with nodes has them registered.
        nodes = clusters["bed-worker-a"].kubectl("get", "nodes", "-o", "name").stdout.split()
        assert len(nodes) == 1, nodes
        assert processes_mentioning(str(workdir)), "no process of the bed found while it is up"
    finally:
        bed.down()
    assert wait_no_processes(workdir) == []
    assert not workdir.exists()
    assert bed.clusters == {}


def test_failed_create_raises_with_the_api_server_log_and_leaves_nothing() -> None:
    bed = ClusterBed()
    workdir = bed.workdir
    spec = ClusterSpec("bed-broken", controller_manager=False, nodes=0,
                       extra_args=("kube-apiserver=this-flag-does-not-exist=1",))
    started = time.monotonic()
    try:
        with pytest.raises(BedError) as err:
            bed.create(spec, wait="30s", attempts=1)
        elapsed = time.monotonic() - started
        msg = str(err.value)
        assert "bed-broken" in msg
        assert "--- kube-apiserver log tail ---" in msg
        assert "unknown flag: --this-flag-does-not-exist" in msg
        assert elapsed < 60, f"a dead API server was noticed only after {elapsed:.0f}s"
        assert "bed-broken" not in bed.clusters
        assert wait_no_processes(workdir) == []
    finally:
        bed.down()
    assert not workdir.exists()
