"""What the benchmark ran on: machine, load, source revision, date."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def parse_cpu_model(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        key, _, val = line.partition(":")
        if key.strip() in ("model name", "Model", "Processor", "cpu model"):
            return val.strip()
    return platform.processor() or "unknown"


def parse_meminfo_kib(meminfo: str, key: str = "MemTotal") -> int | None:
    for line in meminfo.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _git(*args: str) -> str | None:
    """Read-only git queries (no index refresh: GIT_OPTIONAL_LOCKS=0)."""
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=20,
                             env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_info() -> dict[str, Any]:
    commit = _git("rev-parse", "HEAD")
    porcelain = _git("status", "--porcelain", "--untracked-files=no")
    changed = [ln.split(None, 1)[1] for ln in (porcelain or "").splitlines() if len(ln.split(None, 1)) == 2]
    return {
        "commit": commit,
        # The tree is edited while benchmarks run: the figures are of the working tree.
        "dirty": bool(changed) if porcelain is not None else None,
        "modifiedTrackedFiles": changed,
    }


def machine_info() -> dict[str, Any]:
    mem = parse_meminfo_kib(_read("/proc/meminfo"))
    return {
        "cpuModel": parse_cpu_model(_read("/proc/cpuinfo")),
        "cores": os.cpu_count(),
        "memTotalGiB": round(mem / 1024 / 1024, 1) if mem else None,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "hostname": platform.node(),
    }


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
