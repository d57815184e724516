"""The fleet simulation end to end at toy size: ``python -m bench.fleetsim`` serves the repo's own client
and informers, and the real controller process mirrors a Job through it to Complete (no real API
servers: this is the simulation's own smoke)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.env import free_port
from bench.workload import job_manifest
from kruntime.client import ClusterClient
from kruntime.informer import Informer
from kruntime.resources import JOBS, NAMESPACES, PODS, Obj
from mirror.naming import DEFAULT_CONTROLLER_NAME, LABEL_ORIGIN
from testkit.jobs import cond

pytestmark = [pytest.mark.bench_smoke]

REPO = Path(__file__).resolve().parents[2]
ORIGIN = "fleetsim"


def start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})


async def stop(proc: subprocess.Popen[bytes], timeout: float = 10) -> int:
    """SIGTERM, then SIGKILL after ``timeout``: this test's own process, by its PID."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
    return await asyncio.to_thread(proc.wait)


async def until(what: str, check: Any, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert proc.poll() is None, f"{log.name}: exited while waiting for {what}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"{what}: not after {timeout:.0f}s:\n{log.read_text()[-3000:]}"
        await asyncio.sleep(0.2)


def controller_config(sim: Path, workers: list[str], port: int) -> dict[str, Any]:
    return {"controllerName": DEFAULT_CONTROLLER_NAME, "origin": ORIGIN,
            "managerKubeconfig": str(sim / "manager.kubeconfig"),
            "workers": [{"name": w, "kubeconfig": str(sim / f"{w}.kubeconfig")} for w in workers],
            "metricsAddress": f"127.0.0.1:{port}"}


def bad_lines(log: Path) -> list[str]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            level = json.loads(line).get("level")
        except ValueError:
            out.append(line)  # not the JSON log: a traceback or the like
            continue
        if level in ("error", "exception", "critical"):
            out.append(line)
    return out


async def test_the_simulated_fleet_serves_the_client_and_the_controller_completes_a_job(tmp_path: Path) -> None:
    sim_log, ctrl_log = tmp_path / "fleetsim.log", tmp_path / "controller.log"
    sim = start([sys.executable, "-m", "bench.fleetsim", "--workers", "2", "--pods-per-worker", "200",
                 "--nodes-per-worker", "3", "--run-seconds", "2", "--dir", str(tmp_path)], sim_log)
    ctrl: subprocess.Popen[bytes] | None = None
    clients: list[ClusterClient] = []
    tasks: list[asyncio.Task[None]] = []
    try:
        await until("ready.json", lambda: _exists(tmp_path / "ready.json"), 60, sim, sim_log)
        ready = json.loads((tmp_path / "ready.json").read_text())
        assert ready["pods"] == 400 and sorted(ready["workers"]) == ["worker-1", "worker-2"]
        mgr, w1, w2 = [await ClusterClient.from_kubeconfig(n, tmp_path / f"{n}.kubeconfig", qps=0, timeout=30)
                       for n in ("manager", "worker-1", "worker-2")]
        clients += [mgr, w1, w2]

        # the client: a paged list, then an informer that sees a new pod
        names, pages, cont = [], 0, None
        while True:
            page = await w1.list(PODS, None, limit=64, continue_=cont)
            names += [p["metadata"]["name"] for p in page["items"]]
            pages += 1
            cont = page["metadata"].get("continue")
            if not cont:
                break
        assert pages == 4 and len(set(names)) == len(names) == 200
        seen: list[tuple[str, str]] = []
        pods = Informer(w1, PODS, namespace="default")
        pods.add_handler(lambda etype, old, new: seen.append((etype, new["metadata"]["name"])))
        tasks.append(asyncio.create_task(pods.run()))
        await pods.wait_synced(10)
        await w1.create(PODS, "default", {"metadata": {"name": "hello"}, "spec": {"containers": [{"name": "c"}]}})
        await until("the informer's ADDED", lambda: _true(("ADDED", "hello") in seen), 10, sim, sim_log)

        # the controller: a manager Job mirrored to a worker, run there, mirrored back and cleaned up
        copies: list[tuple[str, str]] = []
        for w in (w1, w2):
            inf = Informer(w, JOBS, label_selector=f"{LABEL_ORIGIN}={ORIGIN}")
            inf.add_handler(_recorder(copies, w.name))
            tasks.append(asyncio.create_task(inf.run()))
        await mgr.create(NAMESPACES, None, {"metadata": {"name": "bench"}})
        await mgr.create(JOBS, "bench", job_manifest("fleet-smoke", "smoke", managed_by=DEFAULT_CONTROLLER_NAME))
        cfg = tmp_path / "jobmirror.yaml"
        cfg.write_text(yaml.safe_dump(controller_config(tmp_path, ["worker-1", "worker-2"], free_port())))
        ctrl = start([sys.executable, "-m", "mirror.cli", "--log-format", "json", "run", "--config", str(cfg)],
                     ctrl_log)
        job: Obj = {}

        async def complete() -> bool:
            nonlocal job
            job = await mgr.get(JOBS, "bench", "fleet-smoke")
            return cond(job, "Complete") == "True"

        await until("the manager Job Complete", complete, 60, ctrl, ctrl_log)
        assert job["status"]["succeeded"] == 1
        await until("the copy deleted", lambda: _true(any(e == "DELETED" for _, e in copies)), 30, ctrl, ctrl_log)
        assert copies[0][1] == "ADDED" and len({w for w, _ in copies}) == 1, copies
        assert await stop(ctrl) == 0
        assert not bad_lines(ctrl_log), "\n".join(bad_lines(ctrl_log))
    finally:
        for t in tasks:
            t.cancel()
        for c in clients:
            await c.close()
        if ctrl is not None:
            await stop(ctrl)
        code = await stop(sim)
    assert code == 0, sim_log.read_text()[-3000:]


def _recorder(into: list[tuple[str, str]], worker: str) -> Any:
    def record(etype: str, old: Obj | None, new: Obj) -> None:
        into.append((worker, etype))
    return record


async def _exists(path: Path) -> bool:
    return path.exists()


async def _true(value: bool) -> bool:
    return value
