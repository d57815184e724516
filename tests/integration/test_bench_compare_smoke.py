"""``bench compare`` end to end at toy size: the bare-API limit and jobmirror on fresh beds.

MultiKueue is left out on purpose: it needs Kueue built from source (10-20 min on first
use) and three more processes; ``python -m bench compare`` exercises it. This proves the
command, the shared measurement path and the JSON/PNG/table for the two Python contenders
(about 1 min here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_bench_compare_bare_and_jobmirror_end_to_end(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench", "compare", "--name", "smoke", "--out", str(tmp_path), "--jobs", "6",
           "--contenders", "bare,jobmirror", "--worker-nodes", "1", "--idle-window", "1", "--timeout", "300"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "| 6 | bare-API limit" in proc.stdout and "| 6 | jobmirror defaults" in proc.stdout

    result = json.loads((tmp_path / "smoke.json").read_text())
    assert result["benchmark"] == "compare" and result["kubernetes"]["serverVersion"]
    (run,) = result["runs"]
    assert run["order"] == ["bare", "jobmirror"]
    for key in ("bare", "jobmirror"):
        r = run["results"][key]
        assert "error" not in r, r.get("error")
        assert not r["timedOut"] and r["outcomes"] == {"Complete": 6}, (key, r["outcomes"], r["anomalies"],
                                                                         r["controller"].get("stopped"))
        assert r["anomalies"]["unfinishedCopiesDeleted"] == 0 and r["anomalies"]["copiesRecreated"] == 0, key
        assert r["throughput"]["dispatchedPerSecond"] > 0 and r["latencySeconds"]["statusPropagation"]["watch"][
            "count"] == 6, key
        assert r["apiRequests"]["byVerb"]["manager"]["POST"] >= 1, key  # the benchmark's own creates at least
        assert r["controller"]["cpuSecondsWorkload"] > 0 and r["controller"]["peakRssMiB"] > 0, key
    # The bare limit writes the manager exactly once per Job (its status patch); jobmirror not less.
    assert run["results"]["bare"]["apiRequests"]["byVerb"]["manager"]["PATCH"] == pytest.approx(1.0, abs=0.01)
    assert run["results"]["jobmirror"]["apiRequests"]["byVerb"]["manager"]["PATCH"] >= 1.0
    assert run["ratios"]["jobmirrorOverBare"] is not None
    assert (tmp_path / "smoke.png").stat().st_size > 10_000
