"""A cluster's identity: the UID of its ``kube-system`` namespace.

Two kubeconfigs reaching the same cluster see the same UID, and a new cluster gets a
new one, so it identifies a cluster across names, addresses and credentials. A
controller that needs it (origin labels, manager-as-worker detection) must not guess
when the read fails: the read is retried a bounded number of times, each failure
logged, and the last error raised.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kruntime.client import ApiError, ClusterClient
from kruntime.resources import NAMESPACES

log = logging.getLogger(__name__)


class IdentityUnavailable(Exception):
    """The cluster's identity could not be read within the allowed attempts."""


def identity_retry_delay(exc: ApiError, attempt: int, *, attempts: int, base: float, cap: float) -> float | None:
    """Seconds to wait before attempt ``attempt + 1``, or None to give up now.

    Only failures that can pass by themselves are retried (transport, 429, 5xx); a 403
    or 404 will not change by waiting, so it fails at once with the server's message.
    """
    if not exc.transient or attempt >= attempts:
        return None
    return float(min(cap, base * 2 ** (attempt - 1)))


async def read_identity(
    client: ClusterClient,
    *,
    attempts: int = 6,
    base: float = 0.5,
    cap: float = 8.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> str:
    """The kube-system namespace UID of ``client``'s cluster; raises :class:`IdentityUnavailable`."""
    attempt = 0
    while True:
        attempt += 1
        try:
            ns = await client.get(NAMESPACES, None, "kube-system")
            return str(ns["metadata"]["uid"])
        except ApiError as exc:
            delay = identity_retry_delay(exc, attempt, attempts=attempts, base=base, cap=cap)
            if delay is None:
                raise IdentityUnavailable(
                    f"cannot read the identity (kube-system namespace UID) of cluster {client.name} after "
                    f"{attempt} attempt(s): {exc}") from exc
            log.warning("reading the identity of cluster %s failed (attempt %d/%d, next in %.1fs): %s",
                        client.name, attempt, attempts, delay, exc)
            await sleep(delay)
