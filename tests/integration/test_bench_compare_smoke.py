"""``bench compare`` end to end at toy size: the bare-API limit, the guarantees floor and jobmirror on fresh beds.

MultiKueue is left out on purpose: it needs Kueue built from source (10-20 min on first
use) and three more processes; ``python -m bench compare`` exercises it. This proves the
command, the shared measurement path and the JSON/PNG/table for the three Python contenders,
and that the floor's status writes (each deciding condition when the worker writes it, as
jobmirror's) are accepted by a real API server. The contenders share one bed (``--shared-bed``, each in its own
namespace): three bed bring-ups would cost CI ~25 s more, and the figures are not what is tested.
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
def test_bench_compare_bare_floor_and_jobmirror_end_to_end(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench", "compare", "--name", "smoke", "--out", str(tmp_path), "--jobs", "6",
           "--contenders", "bare,floor,jobmirror", "--worker-nodes", "1", "--idle-window", "1", "--timeout", "300",
           "--shared-bed"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    for label in ("bare-API limit", "guarantees floor", "jobmirror defaults"):
        assert f"| 6 | {label}" in proc.stdout, label
    assert "jobmirror ÷ floor" in proc.stdout

    result = json.loads((tmp_path / "smoke.json").read_text())
    assert result["benchmark"] == "compare" and result["kubernetes"]["serverVersion"]
    (run,) = result["runs"]
    assert run["order"] == ["bare", "floor", "jobmirror"]
    for key in ("bare", "floor", "jobmirror"):
        r = run["results"][key]
        assert "error" not in r, r.get("error")
        assert not r["timedOut"] and r["outcomes"] == {"Complete": 6}, (key, r["outcomes"], r["anomalies"],
                                                                         r["controller"].get("stopped"))
        assert r["anomalies"]["unfinishedCopiesDeleted"] == 0 and r["anomalies"]["copiesRecreated"] == 0, key
        assert r["throughput"]["dispatchedPerSecond"] > 0 and r["latencySeconds"]["statusPropagation"]["watch"][
            "count"] == 6, key
        assert r["apiRequests"]["byVerb"]["manager"]["POST"] >= 1, key  # the benchmark's own creates at least
        assert r["controller"]["cpuSecondsWorkload"] > 0 and r["controller"]["peakRssMiB"] > 0, key
        assert min(r["samples"]["dispatchWatch"] + r["samples"]["statusWatch"]) >= 0, key
    # The bare limit writes the manager exactly once per Job (its status patch); the floor claims and
    # releases, and writes the status once or twice (the interim condition apart when the worker wrote
    # it apart), nothing else; jobmirror not less than three.
    own = {k: run["results"][k]["apiRequests"]["managerOwnCalls"] for k in run["results"]}
    assert own["bare"] == {"PATCH jobs status": 1.0, "total": 1.0}
    floor_status = own["floor"]["PUT jobs status"]
    assert 1.0 <= floor_status <= 2.0 and own["floor"] == {"PATCH jobs": 2.0, "PUT jobs status": floor_status,
                                                           "total": 2.0 + floor_status}, own["floor"]
    assert own["jobmirror"]["total"] >= 3.0
    assert run["results"]["floor"]["controller"]["stopped"]["floor"]["log"]["byLevel"].get("ERROR", 0) == 0
    assert run["ratios"]["jobmirrorOverBare"] is not None and run["ratios"]["jobmirrorOverFloor"] is not None
    assert (tmp_path / "smoke.png").stat().st_size > 10_000
