"""A local TCP proxy that a test can freeze: connections stay open, nothing passes.

Freezing is what a hung API connection looks like to a client (TCP accepted, no answer),
without touching the server or any process: route one client's kubeconfig through it.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from urllib.parse import urlsplit

import yaml


class FreezableProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await reader.read(65536):
                await self._flowing.wait()
                writer.write(chunk)
                await writer.drain()
        with contextlib.suppress(OSError):
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        await self._flowing.wait()
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.add(up_writer)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def close(self) -> None:
        self.thaw()
        if self._server is not None:
            self._server.close()
        for w in self._writers:
            with contextlib.suppress(OSError):
                w.close()


def server_of(kubeconfig: Path) -> tuple[str, int]:
    """Host and port of the (first) cluster server in a kubeconfig."""
    url = urlsplit(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])
    return url.hostname or "127.0.0.1", url.port or 443


def route_kubeconfig(src: Path, dst: Path, port: int) -> Path:
    """Write ``dst``: ``src`` with every server URL pointing at 127.0.0.1:``port`` (TLS passes through)."""
    doc = yaml.safe_load(src.read_text())
    for c in doc.get("clusters") or []:
        url = urlsplit(c["cluster"]["server"])
        c["cluster"]["server"] = f"{url.scheme}://127.0.0.1:{port}"
    dst.write_text(yaml.safe_dump(doc))
    return dst
