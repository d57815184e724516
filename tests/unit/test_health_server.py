"""The health server answers probes and serves /metrics (written off the loop: kruntime.httpserver)."""

from __future__ import annotations

import aiohttp

from kruntime.httpserver import HealthServer
from mirror import metrics


async def test_probes_and_metrics() -> None:
    metrics.WORKER_UP.labels("health-server-test").set(1)
    server = HealthServer("127.0.0.1:0", readiness=lambda: (False, "no leader yet"))
    port = await server.start()
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(f"http://127.0.0.1:{port}/healthz") as r:
                assert r.status == 200 and (await r.text()) == "ok\n"
            async with s.get(f"http://127.0.0.1:{port}/readyz") as r:
                assert r.status == 503 and "no leader yet" in await r.text()
            async with s.get(f"http://127.0.0.1:{port}/metrics") as r:
                assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
                assert 'jobmirror_worker_up{worker="health-server-test"} 1.0' in await r.text()
    finally:
        await server.stop()
