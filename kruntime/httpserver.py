"""``/healthz``, ``/readyz`` and ``/metrics`` for one controller process."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]


class HealthServer:
    def __init__(self, address: str, *, liveness: Check | None = None, readiness: Check | None = None) -> None:
        host, _, port = address.rpartition(":")
        self.host = host or "0.0.0.0"
        self.port = int(port)
        self.liveness = liveness or (lambda: (True, "ok"))
        self.readiness = readiness or (lambda: (True, "ok"))
        self._runner: web.AppRunner | None = None

    async def _probe(self, check: Check) -> web.Response:
        ok, detail = check()
        return web.Response(status=200 if ok else 503, text=detail + "\n")

    async def _metrics(self, _req: web.Request) -> web.Response:
        # Written in a thread: at 50 workers the exposition is ~0.1 s of Python, which on the loop held
        # every timer that long per scrape (the stall reporter found it); the thread yields the
        # interpreter every few milliseconds. prometheus_client reads each metric under its lock.
        body = await asyncio.to_thread(generate_latest, REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self) -> int:
        app = web.Application()
        async def healthz(_req: web.Request) -> web.Response:
            return await self._probe(self.liveness)

        async def readyz(_req: web.Request) -> web.Response:
            return await self._probe(self.readiness)

        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        sockets = getattr(site._server, "sockets", None)
        if self.port == 0 and sockets:
            self.port = sockets[0].getsockname()[1]
        log.info("serving /healthz /readyz /metrics on %s:%d", self.host, self.port)
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
