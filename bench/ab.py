"""``python -m bench ab``: two (or more) commits of jobmirror side by side, in alternating runs.

Each variant is a git ref checked out once into its own worktree (under ``~/.cache/jobmirror/ab``);
every run is ``python -m bench compare --contenders jobmirror`` started from that worktree, so
the controller subprocess runs that variant's code on a fresh bed. Runs alternate in the given
order (``ABBA`` by default) so a drift of the machine's load hits both variants alike. One JSON
in ``results/`` holds every run's figures and the per-variant medians; a table goes to stdout.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.env import say
from bench.machine import REPO, machine_info

WORKTREES = Path.home() / ".cache" / "jobmirror" / "ab"
#: the figures kept per run, by name, and where compare's JSON has them
FIGURES = ("all_complete_s", "dispatches_per_s", "dispatch_p99_s", "status_p99_s", "own_manager_calls",
           "api_per_job_manager", "api_per_job_workers", "cpu_ms_per_job", "passes_per_job", "peak_rss_mib")


def _git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def worktree(ref: str) -> tuple[Path, str]:
    """A checkout of ``ref`` (made once per commit), and its full commit id."""
    sha = _git("rev-parse", f"{ref}^{{commit}}")
    path = WORKTREES / sha[:12]
    if not (path / "mirror").is_dir():
        WORKTREES.mkdir(parents=True, exist_ok=True)
        _git("worktree", "prune")
        _git("worktree", "add", "--detach", "--force", str(path), sha)
    return path, sha


def figures(compare_json: dict[str, Any]) -> dict[str, float]:
    """The kept figures of the one jobmirror run in a compare result."""
    r = compare_json["runs"][0]["results"]["jobmirror"]
    api = r["apiRequests"]
    workers = [v["perJobExcludingIdle"] for k, v in api.items() if k.startswith("worker")]
    return {
        "all_complete_s": r["throughput"]["allCompleteSeconds"],
        "dispatches_per_s": r["throughput"]["dispatchedPerSecond"],
        "dispatch_p99_s": r["latencySeconds"]["dispatch"]["watch"]["p99"],
        "status_p99_s": r["latencySeconds"]["statusPropagation"]["watch"]["p99"],
        "own_manager_calls": api["managerOwnCalls"]["total"],
        "api_per_job_manager": api["manager"]["perJobExcludingIdle"],
        "api_per_job_workers": round(sum(workers), 3),
        "cpu_ms_per_job": round(r["controller"]["cpuSecondsPerJob"] * 1000, 2),
        "peak_rss_mib": r["controller"]["peakRssMiB"],
        "passes_per_job": round(r["controller"]["reconciles"] / max(1, sum(r["outcomes"].values())), 2),
        "complete": r["outcomes"].get("Complete", 0),
    }


def run_one(path: Path, jobs: int, out: Path, name: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(path)}
    cmd = [sys.executable, "-m", "bench", "compare", "--contenders", "jobmirror", "--jobs", str(jobs),
           "--out", str(out), "--name", name]
    subprocess.run(cmd, cwd=path, env=env, check=True)
    return json.loads((out / f"{name}.json").read_text())


def main(variants: Sequence[tuple[str, str]], order: str, jobs: int, out: Path, name: str) -> Path:
    letters = {chr(ord("A") + i): v for i, v in enumerate(variants)}
    unknown = sorted(set(order) - set(letters))
    if unknown:
        raise SystemExit(f"--order names {', '.join(unknown)}, but only {', '.join(letters)} are given")
    trees = {letter: (*worktree(ref), label) for letter, (label, ref) in letters.items()}
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="jobmirror-ab-") as tmp:
        for i, letter in enumerate(order, 1):
            path, sha, label = trees[letter]
            say(f"[ab] run {i}/{len(order)}: {letter} = {label} ({sha[:7]}), {jobs} Jobs")
            result = run_one(path, jobs, Path(tmp), f"run-{i}")
            runs.append({"run": i, "variant": letter, "loadAverage": result["runs"][0]["results"]["jobmirror"]
                         ["loadAverage"], **figures(result)})
    medians = {letter: {f: statistics.median(r[f] for r in runs if r["variant"] == letter) for f in FIGURES}
               for letter in letters if any(r["variant"] == letter for r in runs)}
    labels = {letter: f"{sha[:7]} ({label})" for letter, (_, sha, label) in trees.items()}
    doc: dict[str, Any] = {
           "benchmark": "ab", "date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine_info(),
           "command": f"python -m bench ab --jobs {jobs} --order {order} "
                      + " ".join(f"--variant {label}={ref}" for label, ref in variants),
           "variants": labels,
           "runs": runs, "medians": medians}
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print("| variant | " + " | ".join(FIGURES) + " |")
    print("|---" * (len(FIGURES) + 1) + "|")
    for letter, med in medians.items():
        print(f"| {labels[letter]} | " + " | ".join(f"{med[f]:g}" for f in FIGURES) + " |")
    say(f"wrote {path}")
    return path
