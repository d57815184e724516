"""The bare-API limit: the fewest writes a mirror must make per Job, with no decisions.

``python -m bench.bare`` watches manager Jobs of one ``managedBy`` and, per Job, makes
exactly three writes: create the copy in a worker (round robin, the body built by the
mirror's own :func:`mirror.jobs.remote_copy.build_remote_copy`), merge-patch the worker's
final status onto the manager Job's status subresource, delete the copy. No finalizer,
no intermediate status, no collision checks, no events: whatever jobmirror does beyond
this is the price of its guarantees. ``bench compare`` runs it at the same client
QPS/burst as jobmirror, as the ceiling for this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from aiohttp import web

from bench import kubetime
from kruntime.client import ApiError, ClusterClient
from kruntime.informer import Informer
from kruntime.resources import JOBS, Obj
from mirror.jobs.remote_copy import build_remote_copy
from mirror.naming import LABEL_ORIGIN

MANAGED_BY = "bench.jobmirror.dev/bare"
FIELD_MANAGER = "bench-bare"
ATTEMPTS = 6
log = logging.getLogger("bench.bare")


class Bare:
    def __init__(self, manager: ClusterClient, workers: dict[str, ClusterClient], namespace: str, origin: str,
                 concurrency: int) -> None:
        self.manager = manager
        self.workers = workers
        self.names = sorted(workers)
        self.namespace = namespace
        self.origin = origin
        self.sem = asyncio.Semaphore(concurrency)
        self.dispatched: set[str] = set()
        self.finished: set[str] = set()
        self.next = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.failures = 0

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        t = asyncio.ensure_future(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    async def _retry(self, what: str, call: Callable[[], Awaitable[object]]) -> bool:
        """Up to ATTEMPTS tries on transient errors; every failure is logged."""
        for attempt in range(ATTEMPTS):
            try:
                async with self.sem:
                    await call()
                return True
            except ApiError as exc:
                if exc.already_exists or exc.not_found:
                    return True
                if not exc.transient or attempt == ATTEMPTS - 1:
                    self.failures += 1
                    log.error("%s failed: %s", what, exc)
                    return False
                log.warning("%s: %s (attempt %d)", what, exc, attempt + 1)
                await asyncio.sleep(0.1 * 2 ** attempt)
        return False

    def on_manager(self, etype: str, old: Obj | None, new: Obj) -> None:
        name = new["metadata"]["name"]
        if etype == "DELETED" or name in self.dispatched or (new.get("spec") or {}).get("managedBy") != MANAGED_BY:
            return
        self.dispatched.add(name)
        worker = self.names[self.next % len(self.names)]
        self.next += 1
        body = build_remote_copy(new, origin=self.origin, origin_cluster="manager", remote_name=name)
        self._spawn(self._retry(f"create {name} in {worker}",
                                lambda: self.workers[worker].create(JOBS, self.namespace, body)))

    def worker_handler(self, worker: str) -> Callable[[str, Obj | None, Obj], None]:
        def handle(etype: str, old: Obj | None, new: Obj) -> None:
            name = new["metadata"]["name"]
            if etype == "DELETED" or name in self.finished or kubetime.terminal_condition(new) is None:
                return
            self.finished.add(name)
            self._spawn(self._finish(worker, name, new.get("status") or {}))
        return handle

    async def _finish(self, worker: str, name: str, status: Obj) -> None:
        ok = await self._retry(f"status {name}", lambda: self.manager.patch(
            JOBS, self.namespace, name, {"status": status}, subresource="status"))
        if ok:
            await self._retry(f"delete {name} in {worker}",
                              lambda: self.workers[worker].delete(JOBS, self.namespace, name))


async def _serve_ready(port: int) -> web.AppRunner:
    app = web.Application()
    async def ready(_r: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/readyz", ready)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def run(args: argparse.Namespace) -> None:
    manager = await ClusterClient.from_kubeconfig("manager", args.manager, qps=args.qps, burst=args.burst,
                                                  field_manager=FIELD_MANAGER)
    workers = {}
    for spec in args.worker:
        name, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"--worker wants NAME=KUBECONFIG, got {spec!r}")
        workers[name] = await ClusterClient.from_kubeconfig(name, Path(path), qps=args.qps, burst=args.burst,
                                                            field_manager=FIELD_MANAGER)
    bare = Bare(manager, workers, args.namespace, args.origin, args.concurrency)
    informers = [Informer(manager, JOBS, namespace=args.namespace)]
    informers[0].add_handler(bare.on_manager)
    for w, c in workers.items():
        inf = Informer(c, JOBS, namespace=args.namespace, label_selector=f"{LABEL_ORIGIN}={args.origin}")
        inf.add_handler(bare.worker_handler(w))
        informers.append(inf)
    tasks = [asyncio.create_task(i.run()) for i in informers]
    await asyncio.gather(*(i.wait_synced(60) for i in informers))
    runner = await _serve_ready(args.health_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    import signal

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
    log.info("stopped: %d Jobs dispatched, %d finished, %d failed writes", len(bare.dispatched),
             len(bare.finished), bare.failures)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bare", description=__doc__.splitlines()[0])
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
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
