"""The inspect API served by itself for unit tables: a manager double that answers its TokenReviews and
SubjectAccessReviews, and one GET against a fresh server."""

from __future__ import annotations

from typing import Any

import aiohttp

from kruntime.resources import Obj
from mirror.inspect import api


class Reviews:
    """A manager that authenticates every token as ``alice`` and allows what ``allowed`` lists."""

    def __init__(self, allowed: set[tuple[str, str | None]]) -> None:
        self.allowed = allowed
        self.asked: list[Obj] = []

    async def create(self, resource: Any, namespace: str | None, body: Obj) -> Obj:
        if body["kind"] == "TokenReview":
            return {"status": {"authenticated": True, "user": {"username": "alice"}}}
        attrs = body["spec"]["resourceAttributes"]
        self.asked.append(attrs)
        return {"status": {"allowed": (attrs["verb"], attrs.get("namespace")) in self.allowed}}

    async def close(self) -> None:
        """The inspect API closes the clients it was given when it stops."""


async def get_once(path: str, allowed: set[tuple[str, str | None]], **served: Any) -> tuple[int, Obj]:
    """GET ``path`` (with a token) from an inspect API serving ``served`` (queue=, fleet=, ...), started
    for this one request and stopped after it: its status and JSON body."""
    server = api.InspectApi("127.0.0.1:0", Reviews(allowed), {}, "jobmirror.dev/controller",  # type: ignore[arg-type]
                            **served)
    port = await server.start()
    try:
        async with aiohttp.ClientSession() as http, \
                http.get(f"http://127.0.0.1:{port}{path}", headers={api.TOKEN_HEADER: "t"}) as resp:
            return resp.status, await resp.json()
    finally:
        await server.stop()
