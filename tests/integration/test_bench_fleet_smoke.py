"""``bench fleet`` end to end at toy size: the same code as the 50-worker simulation (the fleetsim
process, the real controller process, every phase including the failover relist), 3 workers with 300
pods each and 30 running Jobs, so CI proves the command and that its figures are sane (about a minute).
A simulation: the API servers are bench/fleetsim's fakes, not kube-apiservers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKERS, PODS, RUNNING, RATE, WINDOW = 3, 300, 30, 2.0, 8.0


@pytest.mark.integration
def test_bench_fleet_end_to_end(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench", "fleet", "--name", "smoke", "--out", str(tmp_path),
           "--workers", str(WORKERS), "--pods-per-worker", str(PODS), "--nodes-per-worker", "4",
           "--running", str(RUNNING), "--rate", str(RATE), "--window", str(WINDOW), "--job-seconds", "2",
           "--phase-timeout", "120", "--report-stalls-over", "0.05"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:] + proc.stdout[-2000:]
    assert proc.stdout.startswith(f"Simulation: {WORKERS} workers x {PODS} pods")

    result = json.loads((tmp_path / "smoke.json").read_text())
    assert result["benchmark"] == "fleet" and result["simulation"] is True and "error" not in result
    phases = {p["phase"]: p for p in result["phases"]}
    assert list(phases) == ["start", "fill", "steady", "burst", "failover"]
    for p in phases.values():
        assert p["seconds"] > 0 and p["cpuSeconds"] >= 0 and p["rssMiB"] > 0, p
        assert p["loopLagMaxAtMostSeconds"] is not None, p  # the loop-lag histogram was read
    assert phases["start"]["syncedSeconds"] >= phases["start"]["readySeconds"] > 0
    assert phases["fill"]["dispatches"] >= RUNNING and phases["fill"]["passes"] >= RUNNING
    arrivals = round(RATE * WINDOW) + round(10 * RATE * WINDOW)
    assert phases["steady"]["jobs"] + phases["burst"]["jobs"] == arrivals
    out = result["outcome"]
    assert out["jobs"] == RUNNING + arrivals and out["complete"] > 0, out  # the 2-s Jobs of the steady window
    assert out["placed"] >= RUNNING + round(RATE * WINDOW), out
    # the failover process listed the whole fleet again and ran no second dispatch of a placed Job
    assert phases["failover"]["syncedSeconds"] > 0
    assert phases["failover"]["dispatches"] <= out["notPlaced"], (phases["failover"], out)
    assert result["controller"]["peakRssMiB"] > 0 and result["fleetsim"]["final"]["cpuSeconds"] > 0
    # stalls over 50 ms are reported and kept (a toy fleet may have none)
    assert all("event loop stalled" in r["msg"] for r in result["controller"]["stallReports"])
    for log in result["controller"]["logs"]:  # both processes: no error logged against the simulated fleet
        assert not {"ERROR", "CRITICAL"} & log["byLevel"].keys(), log["topProblems"]
    assert (tmp_path / "smoke.png").stat().st_size > 10_000
