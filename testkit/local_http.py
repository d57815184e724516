"""An aiohttp application served on a free loopback port for the length of a block: the small
HTTP servers tests stand in for (an API server's page, a token issuer, an admission webhook)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web


@asynccontextmanager
async def serving(app: web.Application, *, ssl_context: ssl.SSLContext | None = None,
                  handler_cancellation: bool = False) -> AsyncIterator[int]:
    """Serve ``app`` on 127.0.0.1 while the block runs; yields the port. ``handler_cancellation``:
    a handler is cancelled when its client goes away."""
    runner = web.AppRunner(app, handler_cancellation=handler_cancellation)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()
