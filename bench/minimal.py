"""What the minimal mirrors of ``bench compare`` share: watches, retries, round robin, readiness.

:mod:`bench.bare` (no guarantees) and :mod:`bench.floor` (exactly our guarantees) differ only in
what they do per Job; everything around that — the clients at a given QPS/burst, an informer on
the manager's Jobs and one per worker on our copies, bounded writes in flight with retries on
transient errors, ``/readyz`` once every cache is synced, a clean stop on SIGTERM — lives here
once, so the two are measured through the same machinery.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from aiohttp import web

from kruntime.client import ApiError, ClusterClient
from kruntime.informer import Informer
from kruntime.lifecycle import run_controller
from kruntime.resources import JOBS, Obj
from mirror.identity import selector

ATTEMPTS = 6
Handler = Callable[[str, Obj | None, Obj], None]
log = logging.getLogger("bench.minimal")


class Minimal:
    """The per-Job logic's surroundings; a subclass sets ``managed_by``, ``field_manager`` and the handlers."""

    managed_by = ""
    field_manager = ""

    def __init__(self, manager: ClusterClient, workers: dict[str, ClusterClient], namespace: str, origin: str,
                 concurrency: int) -> None:
        self.manager = manager
        self.workers = workers
        self.names = sorted(workers)
        self.namespace = namespace
        self.origin = origin
        self.sem = asyncio.Semaphore(concurrency)
        self.next = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.failures = 0
        self.dispatched: set[str] = set()
        self.finished: set[str] = set()

    # -- what a subclass provides ---------------------------------------------------------

    def on_manager(self, etype: str, old: Obj | None, new: Obj) -> None:
        raise NotImplementedError

    def worker_handler(self, worker: str) -> Handler:
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------

    def ours(self, etype: str, job: Obj) -> bool:
        """A manager Job of our ``managedBy``, not a deletion event."""
        return etype != "DELETED" and (job.get("spec") or {}).get("managedBy") == self.managed_by

    def round_robin(self) -> str:
        worker = self.names[self.next % len(self.names)]
        self.next += 1
        return worker

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        t = asyncio.ensure_future(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    async def retry(self, what: str, call: Callable[[], Awaitable[Obj]]) -> Obj | None:
        """``call``'s answer, trying up to ATTEMPTS times on transient errors; ``{}`` when the object
        already exists (a create) or is gone (anything else): nothing left to do; None when it failed
        for good (logged and counted)."""
        for attempt in range(ATTEMPTS):
            try:
                async with self.sem:
                    return await call()
            except ApiError as exc:
                if exc.already_exists or exc.not_found:
                    return {}
                if not exc.transient or attempt == ATTEMPTS - 1:
                    self.failures += 1
                    log.error("%s failed: %s", what, exc)
                    return None
                log.warning("%s: %s (attempt %d)", what, exc, attempt + 1)
                await asyncio.sleep(0.1 * 2 ** attempt)
        return None


async def serve_ready(port: int) -> web.AppRunner:
    """``GET /readyz`` answers once the caller's caches are synced (``bench.env.ControllerProcess`` waits on it)."""
    app = web.Application()

    async def ready(_r: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/readyz", ready)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def run(args: argparse.Namespace, make: type[Minimal]) -> None:
    """Connect, watch, serve ready and run ``make``'s per-Job logic until SIGTERM/SIGINT."""
    async def client(name: str, path: Path) -> ClusterClient:
        return await ClusterClient.from_kubeconfig(name, path, qps=args.qps, burst=args.burst,
                                                   field_manager=make.field_manager)

    manager = await client("manager", args.manager)
    workers = {}
    for spec in args.worker:
        name, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"--worker wants NAME=KUBECONFIG, got {spec!r}")
        workers[name] = await client(name, Path(path))
    m = make(manager, workers, args.namespace, args.origin, args.concurrency)
    informers = [Informer(manager, JOBS, namespace=args.namespace)]
    informers[0].add_handler(m.on_manager)
    for w, c in workers.items():
        inf = Informer(c, JOBS, namespace=args.namespace, label_selector=selector(args.origin))
        inf.add_handler(m.worker_handler(w))
        informers.append(inf)
    tasks = [asyncio.create_task(i.run()) for i in informers]
    await asyncio.gather(*(i.wait_synced(60) for i in informers))
    runner = await serve_ready(args.health_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for t in tasks:
        t.cancel()
    with contextlib.suppress(Exception):
        await asyncio.gather(*tasks, return_exceptions=True)
    await runner.cleanup()
    for c in (manager, *workers.values()):
        await c.close()
    log.info("stopped: %d Jobs dispatched, %d finished, %d failed writes", len(m.dispatched), len(m.finished),
             m.failures)


def main(argv: list[str] | None, make: type[Minimal], prog: str, description: str) -> int:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--manager", type=Path, required=True, help="manager kubeconfig")
    p.add_argument("--worker", action="append", required=True, help="NAME=KUBECONFIG (repeat)")
    p.add_argument("--namespace", default="bench")
    p.add_argument("--origin", default="bench")
    p.add_argument("--qps", type=float, default=200.0)
    p.add_argument("--burst", type=int, default=400)
    p.add_argument("--concurrency", type=int, default=32, help="writes in flight at once")
    p.add_argument("--health-port", type=int, required=True)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    run_controller(run(args, make))  # uvloop, as jobmirror runs: contenders on the same event loop
    return 0
