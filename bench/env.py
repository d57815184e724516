"""Clusters, controller processes, scrapes and progress output for the benchmarks (impure glue)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import aiohttp

from bench import procstat, promtext
from bench.logscan import summarize_log
from bench.machine import REPO, load
from clusterbed.cluster import ClusterBed, ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient


def say(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def bring_up(bed: ClusterBed, specs: Iterable[ClusterSpec]) -> dict[str, LocalCluster]:
    """Start the clusters one after the other and return them by name.

    Not concurrently: parallel ``kwokctl create``/``scale node`` in one work directory fail
    ("No resource ...") and the retries cost minutes (seen on this machine).
    """
    specs = list(specs)
    t0 = time.monotonic()
    clusters = [await asyncio.to_thread(bed.create, s) for s in specs]
    say(f"clusters {', '.join(s.name for s in specs)} up in {time.monotonic() - t0:.1f}s")
    return {c.name: c for c in clusters}


async def client_for(cluster: LocalCluster, *, qps: float = 0, burst: int = 1000) -> ClusterClient:
    return await ClusterClient.from_kubeconfig(f"bench-{cluster.name}", cluster.kubeconfig, qps=qps, burst=burst,
                                               timeout=30)


async def raw_get(client: ClusterClient, path: str, timeout: float = 30) -> str:
    resp = await client._send("GET", path, timeout=timeout)
    try:
        text = await resp.text()
        if resp.status != 200:
            raise ApiError(resp.status, str(resp.reason), text[:300], cluster=client.name)
        return text
    finally:
        resp.release()


async def apiserver_metrics(client: ClusterClient) -> list[promtext.Sample]:
    return promtext.parse(await raw_get(client, "/metrics"))


async def server_version(client: ClusterClient) -> str | None:
    try:
        v = await client.request("GET", "/version")
    except ApiError:
        return None
    return str(v.get("gitVersion"))


async def http_metrics(url: str, timeout: float = 10) -> list[promtext.Sample] | None:
    """Scrape a /metrics endpoint (self-signed TLS accepted); ``None`` when it does not answer."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s, \
                s.get(url, ssl=False) as r:
            if r.status != 200:
                return None
            return promtext.parse(await r.text())
    except (aiohttp.ClientError, TimeoutError, OSError, promtext.MetricsParseError):
        return None


class ControllerProcess:
    """A controller subprocess this benchmark started; stopped by its own PID only."""

    def __init__(self, name: str, argv: list[str], log_path: Path, metrics_port: int,
                 env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.metrics_port = metrics_port
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.final: procstat.ProcSample | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def python(self) -> bool:
        """Whether it runs Python (a CPU profile can be taken of it: bench/cpuprofile.py)."""
        return Path(self.argv[0]).name.startswith("python")

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                     env={**os.environ, **(self.env or {})}, start_new_session=True)
        log.close()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    async def wait_ready(self, timeout: float = 60) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.metrics_port}/readyz"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as s:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
                with contextlib.suppress(aiohttp.ClientError, TimeoutError, OSError):
                    async with s.get(url) as r:
                        if r.status == 200:
                            return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} not ready after {timeout:.0f}s:\n{self.log_tail()}")
                await asyncio.sleep(0.2)

    async def metrics(self) -> list[promtext.Sample] | None:
        return await http_metrics(f"http://127.0.0.1:{self.metrics_port}/metrics")

    def sample(self) -> procstat.ProcSample | None:
        return procstat.sample(self.pid) if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; remembers the last /proc sample."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.final = self.sample() or self.final
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self.proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            if self.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGKILL)
                await asyncio.to_thread(self.proc.wait)
        return self.proc.returncode

    def log_summary(self) -> dict[str, Any]:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return {}
        return {"file": str(self.log_path), **summarize_log(text)}


class Periodic:
    """A task that runs ``tick()`` every ``interval`` seconds between ``start`` and ``stop``."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.t0 = time.time()
        self._task: asyncio.Task[None] | None = None

    def since_start(self) -> float:
        return round(time.time() - self.t0, 2)

    async def tick(self) -> None:
        raise NotImplementedError

    async def _loop(self) -> None:
        while True:
            await self.tick()
            await asyncio.sleep(self.interval)

    def start(self, t0: float | None = None) -> None:
        if t0 is not None:
            self.t0 = t0
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class Sampler(Periodic):
    """Every ``interval`` s: CPU seconds and RSS of some PIDs, and the 1-min load average."""

    def __init__(self, pids: dict[str, int], interval: float = 1.0) -> None:
        super().__init__(interval)
        self.pids = pids
        self.rows: list[dict[str, Any]] = []

    def take(self) -> dict[str, Any]:
        row: dict[str, Any] = {"t": self.since_start(), "load1": load()[0]}
        for name, pid in self.pids.items():
            s = procstat.sample(pid)
            if s is not None:
                row[name] = {"cpu": round(s.cpu_seconds, 2), "rssMiB": round((s.rss_kib or 0) / 1024, 1)}
        self.rows.append(row)
        return row

    async def tick(self) -> None:
        self.take()

    async def stop(self) -> None:
        await super().stop()
        self.take()

    def cpu_percent(self, name: str) -> float | None:
        """Mean CPU use of ``name`` over the sampled window (100 = one core)."""
        pts = [(r["t"], r[name]["cpu"]) for r in self.rows if name in r]
        if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
            return None
        return 100 * (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])

    def max_load(self) -> float | None:
        return max((r["load1"] for r in self.rows), default=None)


class Progress:
    """Print ``render()`` every ``interval`` seconds while a phase runs."""

    def __init__(self, render: Callable[[], str], interval: float = 3.0) -> None:
        self.render = render
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            say(self.render())

    def __enter__(self) -> Progress:
        self._task = asyncio.create_task(self._loop())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()


async def wait_until(pred: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(interval)
    return True


def mib(kib: int | None) -> float | None:
    return None if kib is None else round(kib / 1024, 1)


def kcm_metrics_url(cluster: LocalCluster) -> str | None:
    pid = cluster.pid("kube-controller-manager")
    if pid is None:
        return None
    port = procstat.flag_value(procstat.cmdline(pid), "secure-port")
    return f"https://127.0.0.1:{port}/metrics" if port else None


class RequestRateTimeline(Periodic):
    """Scrape a controller's client-side request counter every ``interval`` s (total over all labels)."""

    def __init__(self, url: str, metric: str, interval: float = 2.0) -> None:
        super().__init__(interval)
        self.url = url
        self.metric = metric
        self.rows: list[tuple[float, int]] = []

    async def tick(self) -> None:
        m = await http_metrics(self.url)
        if m is not None:
            self.rows.append((self.since_start(), int(promtext.total(m, self.metric))))
