"""Where a contender's CPU goes: py-spy attached by PID for the measured window, samples sorted into
the parts every contender has (``bench compare --profile-cpu HZ``).

A CPU profile, not a wall-clock one: py-spy reads the process's stacks from outside at ``HZ`` and the
samples whose thread waits (the event loop's poll in uvloop's C code, idle threads) are set apart by
their innermost frame, so what is left is time spent running. Each sample goes to the first part
(in :data:`PARTS`' order) one of its frames belongs to: a room fit inside a pass counts for the room,
the JSON decode of a watch event for the watch, a pass's API call for the calls. Shares are of the
samples left; they say where the CPU went, and the measured CPU per Job says how much there was.

A profiled run pays for py-spy on the same cores (one process reading another's memory 100 times a
second): its own figures are not the headline ones, and the JSON says ``profiled``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: innermost frames of a thread that waits: the loop's poll (uvloop polls in C, under Runner.run),
#: idle pool threads and the stall reporter's wait
IDLE_LEAVES = ("Runner.run (", "Condition.wait (", "_worker (concurrent/futures/thread.py", "Event.wait (",
               "select (", "poll (", "epoll (", "wait (threading.py")

#: (part, what one of its frames looks like), first match wins
PARTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("room views (pod and node events folded, fits, reservations)", re.compile(r"\(mirror/room/")),
    ("API calls (client side: request, send, response)", re.compile(
        r"^(ClusterClient\.(request|_send|create|replace|patch|delete|get|list) |ClientRequest\.|"
        r"BytesPayload\.|StreamWriter\.|ClientSession\._request|ClientResponse\.)")),
    ("watch events (read, decode, caches, handlers)", re.compile(
        r"^(ClusterClient\.(watch|list_pages) |RecordInformer\.|Informer\.|paced )|\(kruntime/informer\.py\)")),
    ("bytes in (TLS, HTTP parsing of responses and watch streams)", re.compile(
        r"^(ResponseHandler\.|SSLObject\.read |SSLProtocol\.|HttpResponseParser)")),
    ("passes' own work (decisions, objects built)", re.compile(r"\((mirror/|jobapi/|bench/(floor|minimal|bare)\.py)")),
    ("work queue", re.compile(r"\(kruntime/workqueue\.py\)")),
)
OTHER = "other (loop plumbing, metrics, logging, collector)"

_LINE = re.compile(r":\d+\)")
#: the frame that runs the event loop
_LOOP = ("Runner.run (", "run_until_complete (")


def _frame(raw: str) -> str:
    """``name (path)``: the line number dropped, the path from the repository's root when it is ours."""
    frame = _LINE.sub(")", raw)
    for root in ("/mirror/", "/kruntime/", "/jobapi/", "/bench/"):
        i = frame.find(root)
        if i >= 0 and "(" in frame[:i]:
            return frame[:frame.index("(") + 1] + frame[i + 1:]
    return frame


@dataclass
class Profile:
    """Samples sorted into parts, and the functions most often on the stack."""

    samples: int
    idle: int
    parts: Counter[str]
    inclusive: Counter[str]

    @property
    def busy(self) -> int:
        return self.samples - self.idle

    def _share(self, n: int) -> float:
        return round(n / max(1, self.busy), 4)

    def shares(self) -> dict[str, float]:
        return {part: self._share(n) for part, n in self.parts.most_common()}

    def summary(self, top: int = 25) -> dict[str, Any]:
        return {"samples": self.samples, "idleSamples": self.idle, "busySamples": self.busy, "shares": self.shares(),
                "topInclusive": [{"frame": f, "share": self._share(n)} for f, n in self.inclusive.most_common(top)]}


def sort_samples(lines: Iterable[str]) -> Profile:
    """Sort py-spy's raw output (``frame;frame;… count`` per line, outermost first) into :data:`PARTS`."""
    parts: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    samples = idle = 0
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame(f) for f in stack.split(";")]
        samples += n
        if frames[-1].startswith(IDLE_LEAVES):
            idle += n
            continue
        # what the loop runs (the frames above it are the entry point: every sample has them)
        inner = frames[next((i + 1 for i in range(len(frames) - 1, -1, -1) if frames[i].startswith(_LOOP)), 0):]
        part = next((name for name, pattern in PARTS if any(pattern.search(f) for f in inner)), OTHER)
        parts[part] += n
        for f in set(inner):
            inclusive[f] += n
    return Profile(samples, idle, parts, inclusive)


def py_spy() -> str:
    """The py-spy executable beside this interpreter (the bench extra installs it), else on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    found = str(here) if here.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("--profile-cpu needs py-spy: it is in the bench extra (bash scripts/bootstrap.sh "
                         "--python-only installs it), or pip install py-spy")
    return found


class Recorder:
    """py-spy recording one process until :meth:`stop` (non-blocking: the process is never paused)."""

    def __init__(self, pid: int, out: Path, hz: float) -> None:
        self.out = out
        self._result: dict[str, Any] | None = None
        self.log = out.with_suffix(".log")
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [py_spy(), "record", "--pid", str(pid), "--rate", str(int(hz)), "--nonblocking",
                 "--format", "raw", "--output", str(out)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self, timeout: float = 30.0) -> dict[str, Any]:
        """Stop recording and sort what was recorded (or say why there is nothing); once."""
        if self._result is None:
            self._result = self._stop(timeout)
        return self._result

    def _stop(self, timeout: float) -> dict[str, Any]:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.out.exists():
            tail = self.log.read_text(errors="replace")[-400:] if self.log.exists() else ""
            return {"error": f"py-spy wrote nothing (exit {self.proc.returncode}): {tail.strip()}"}
        with self.out.open() as f:
            return sort_samples(f).summary()


def ms_per_job_by_part(controller: dict[str, Any]) -> dict[str, float] | None:
    """A run's CPU per Job (``cpuSecondsPerJob``) split by the shares of its processes' busy samples
    (weighted by each process's busy samples); None when the run was not profiled."""
    profile, per_job = controller.get("cpuProfile"), controller.get("cpuSecondsPerJob")
    if not profile or per_job is None:
        return None
    weighted: Counter[str] = Counter()
    busy = 0
    for p in profile["processes"].values():
        if "shares" not in p:
            continue
        busy += p["busySamples"]
        for part, share in p["shares"].items():
            weighted[part] += share * p["busySamples"]
    if not busy:
        return None
    return {part: round(1000 * per_job * w / busy, 3) for part, w in weighted.most_common()}
