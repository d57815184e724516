"""``bench placement --multitenant`` end to end at toy size: the same code path as the full run (one
unequal bed, three tenants' Jobs with two PriorityClasses and staged arrivals, once per
scheduling.order, the figures, table and plot), 12 short Jobs, so CI proves the command and that
its figures are sane. Not a measurement: 12 Jobs say nothing about the orders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JOBS = 12  # burst 10, small-a 1, small-b 1


@pytest.mark.integration
def test_bench_placement_multitenant_end_to_end(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench", "placement", "--multitenant", "--name", "smoke-mt", "--out", str(tmp_path),
           "--jobs", str(JOBS), "--duration-scale", "0.2", "--timeout", "40"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "| Arrival |" in proc.stdout and "| FairShare |" in proc.stdout and "lower bound" in proc.stdout

    result = json.loads((tmp_path / "smoke-mt.json").read_text())
    assert result["benchmark"] == "placement-multitenant" and result["seed"] == 21 and result["git"]["commit"]
    assert result["workload"]["byTenant"]["burst"]["jobs"] == 10 and result["lowerBound"]["seconds"] > 0
    for order in ("Arrival", "FairShare"):
        r = result["orders"][order]
        assert "error" not in r, r.get("error")
        assert r["finished"] and r["completed"] == JOBS and r["notPlaced"] == 0, r["stopReason"]
        assert r["makespanOverBound"] >= 0.9, (r["makespanSeconds"], result["lowerBound"])
        assert set(r["waitSeconds"]) == {"burst", "small-a", "small-b"}
        assert all(w["count"] == n for w, n in zip(r["waitSeconds"].values(), (10, 1, 1), strict=True))
        assert r["sharesOverTime"] and max(max(s["shares"].values()) for s in r["sharesOverTime"]) > 0
        assert isinstance(r["priorityInversions"], int) and r["priorityInversions"] <= r["priorityInversionsLoose"]
        assert r["managerCallsPerJob"] > 0
        # every Job went where it can run (large and gpu Jobs only fit worker-1)
        assert all(j["placement"] == "worker-1" for j in r["perJob"] if j["kind"] in ("large", "gpu"))
    assert (tmp_path / "smoke-mt.png").stat().st_size > 10_000
