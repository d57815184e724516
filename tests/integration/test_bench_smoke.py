"""The benchmark command end to end at toy sizes: its own clusters, JSON and PNGs.

Not a speed assertion (speed is what the full-size run reports); this proves the
command a user runs works from a checkout and that every headline figure is filled
in from real measurements.
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
def test_bench_all_runs_end_to_end_and_writes_json_and_plots(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench", "all", "--name", "smoke", "--out", str(tmp_path),
           "--sizes", "12", "--unclaimed", "30", "--worker-nodes", "1", "--timeout", "120",
           "--jobs", "4", "--pods-per-job", "2", "--indexed-completions", "8", "--indexed-parallelism", "4",
           "--nodes", "2", "--builtin-timeout", "120"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "[bench " in proc.stderr  # progress was shown

    mirror = json.loads((tmp_path / "smoke-mirror.json").read_text())
    assert mirror["benchmark"] == "mirror" and mirror["kubernetes"]
    assert mirror["git"]["commit"] and mirror["machine"]
    (run,) = mirror["runs"]
    assert run["jobs"] == 12 and not run["timedOut"], run.get("anomalies")
    assert run["outcomes"] == {"Complete": 12}
    assert run["throughput"]["allCompleteSeconds"] > 0
    assert run["anomalies"]["unfinishedCopiesDeleted"] == 0 and run["anomalies"]["copiesRecreated"] == 0
    assert run["apiRequests"]["manager"]["perJob"] > 0
    assert run["controller"]["cpuSecondsWorkload"] > 0 and run["controller"]["peakRssMiB"] > 0
    # every Job's first pass came from its manager ADDED event; the rest are told apart by trigger
    by_trigger = run["controller"]["passesByTrigger"]
    assert by_trigger.get("manager-added", 0) >= 12, by_trigger
    # Nobody but the controller writes these Jobs and their copies: the echoes of its own writes and
    # deletions (placement, status, finalizer release, the finished copy's delete) queue no pass.
    echoes = {why: by_trigger.get(why, 0) for why in ("manager-modified", "manager-deleted", "copy-deleted")}
    assert set(echoes.values()) == {0}, by_trigger
    assert run["unclaimed"]["jobs"] == 30 and run["controller"]["rssAfterStartupMiB"] > 0
    assert (tmp_path / "smoke-mirror.png").stat().st_size > 10_000

    builtin = json.loads((tmp_path / "smoke-builtin.json").read_text())
    assert builtin["benchmark"] == "builtin-vs-kcm"
    for name, wl in builtin["workloads"].items():
        for side in ("kcm", "builtin"):
            assert not wl[side]["timedOut"], (name, side)
            assert wl[side]["completionSeconds"] > 0, (name, side)
        assert wl["ratios"]["completionTime"] > 0, name
    assert (tmp_path / "smoke-builtin.png").stat().st_size > 10_000
