"""Polling and setup helpers over the API for the test tiers, the e2e suite and the benchmarks."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kruntime.client import ApiError, ClusterClient
from kruntime.resources import NAMESPACES, Obj, Resource


async def wait_for(
    probe: Callable[[], Awaitable[Any]], *, timeout: float = 60, interval: float = 0.2, what: str = "condition"
) -> Any:
    """Poll ``probe`` until it returns a truthy value; fail naming ``what`` and the last value seen.

    An ``ApiError`` from the probe counts as "not yet" (servers restart in chaos tests).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    while True:
        try:
            last = await probe()
        except ApiError as exc:
            last = exc
        else:
            if last:
                return last
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last value: {last!r}"[:4000])
        await asyncio.sleep(interval)


async def ensure_namespace(client: ClusterClient, name: str, labels: dict[str, str] | None = None) -> None:
    body: Obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}
    try:
        await client.create(NAMESPACES, None, body)
    except ApiError as exc:
        if not exc.already_exists:
            raise


async def get_or_none(client: ClusterClient, res: Resource, namespace: str | None, name: str) -> Obj | None:
    try:
        return await client.get(res, namespace, name)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise
