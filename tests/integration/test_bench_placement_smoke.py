"""``bench placement`` end to end at toy size: the same code path as the full run (one unequal
bed, RoomAware then LeastLoaded, the lower bound, the memory part), 24 short Jobs and one memory
worker with 300 pods, so CI proves the command and that its figures are sane (about a minute)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JOBS = 24


@pytest.mark.integration
def test_bench_placement_end_to_end(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench", "placement", "--name", "smoke", "--out", str(tmp_path), "--jobs", str(JOBS),
           "--duration-scale", "0.3", "--memory-pods", "300", "--memory-workers", "1", "--memory-settle", "1",
           "--timeout", "60"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "| RoomAware |" in proc.stdout and "| LeastLoaded |" in proc.stdout and "| lower bound" in proc.stdout

    result = json.loads((tmp_path / "smoke.json").read_text())
    assert result["benchmark"] == "placement" and result["seed"] == 21 and result["git"]["commit"]
    assert result["lowerBound"]["seconds"] > 0 and result["lowerBound"]["cpu"] > 0
    ra, ll = result["policies"]["RoomAware"], result["policies"]["LeastLoaded"]
    assert ra["finished"] and ra["completed"] == JOBS and ra["neverFit"] == 0, (ra["stopReason"], ra["placement"])
    assert ra["placementByKind"]["large"].keys() == {"worker-1"} and ra["placementByKind"]["gpu"].keys() == {"worker-1"}
    # LeastLoaded's never-fit count is what its placements say: large and gpu Jobs sent to worker-2
    sent_wrong = sum(1 for j in ll["perJob"] if j["kind"] in ("large", "gpu") and j["placement"] == "worker-2")
    assert ll["neverFit"] == sent_wrong == sum(1 for j in ll["perJob"] if j["neverFit"])
    assert ll["completed"] == JOBS - sent_wrong and ll["finished"] == (sent_wrong == 0)
    assert ll["stuckOver60s"] >= sent_wrong
    for r in (ra, ll):
        assert r["pendingPodSeconds"] >= 0 and r["controller"]["cpuSeconds"] > 0 and r["controller"]["peakRssMiB"] > 0
    # room-aware placement costs the manager no extra calls (WaitingForRoom is one event per Job at most)
    assert ra["managerCallsPerJob"] <= ll["managerCallsPerJob"] + 1.5, (ra["apiRequests"], ll["apiRequests"])

    mem = result["memory"]
    assert "error" not in mem, mem.get("error")
    assert mem["podsPerWorker"] == 300 and mem["policies"]["RoomAware"]["roomSynced"] is True
    assert mem["policies"]["RoomAware"]["requestedCpuGauge"] == {w: 3000.0 for w in mem["workers"]}
    assert mem["bytesPerPod"] is not None
    assert (tmp_path / "smoke.png").stat().st_size > 10_000
