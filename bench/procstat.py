"""CPU time and memory of a process from ``/proc`` (parsers are pure)."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class ProcSample:
    cpu_seconds: float  # utime + stime
    rss_kib: int | None  # VmRSS
    hwm_kib: int | None  # VmHWM: peak resident set size
    runqueue_wait_seconds: float | None = None  # all threads: runnable but waiting for a CPU (schedstat)


def parse_stat_cpu_ticks(stat: str) -> tuple[int, int]:
    """(utime, stime) in clock ticks from the text of ``/proc/<pid>/stat``.

    The command name (field 2) is in parentheses and may itself contain spaces and
    parentheses, so fields are counted from the last ``)``.
    """
    end = stat.rfind(")")
    if end < 0:
        raise ValueError("not a /proc/<pid>/stat line")
    rest = stat[end + 1:].split()
    # rest[0] is field 3 (state); utime is field 14, stime field 15.
    return int(rest[11]), int(rest[12])


def parse_status_kib(status: str, key: str) -> int | None:
    """A ``kB`` field (``VmHWM``, ``VmRSS``...) of ``/proc/<pid>/status``, in KiB."""
    for line in status.splitlines():
        if line.startswith(key + ":"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1])
    return None


def parse_schedstat(text: str) -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one) from ``/proc/<pid>/schedstat``."""
    parts = text.split()
    return int(parts[0]) / 1e9, int(parts[1]) / 1e9


def sample(pid: int) -> ProcSample | None:
    """Current CPU seconds and RSS of ``pid``; ``None`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
    except OSError:
        return None
    ut, st = parse_stat_cpu_ticks(stat)
    wait: float | None = None
    for task in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(task) as f:
                wait = (wait or 0.0) + parse_schedstat(f.read())[1]
        except (OSError, ValueError, IndexError):
            continue
    return ProcSample((ut + st) / CLK_TCK, parse_status_kib(status, "VmRSS"), parse_status_kib(status, "VmHWM"), wait)


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def flag_value(argv: list[str], flag: str) -> str | None:
    """Last value of ``--flag=value`` / ``--flag value`` in a command line (Go's pflag keeps the last)."""
    val = None
    for i, a in enumerate(argv):
        if a.startswith(f"--{flag}="):
            val = a.split("=", 1)[1]
        elif a == f"--{flag}" and i + 1 < len(argv):
            val = argv[i + 1]
    return val
