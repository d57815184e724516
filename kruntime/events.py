"""Kubernetes Events on the objects we act on, written without blocking reconciles.

Identical events for one object within ``dedupe_window`` are folded into a count
patch, the way client-go's correlator keeps a hot loop from flooding etcd.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime

from kruntime.client import ApiError, ClusterClient
from kruntime.resources import EVENTS, Obj

log = logging.getLogger(__name__)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(self, client: ClusterClient, component: str, *, dedupe_window: float = 600.0) -> None:
        self.client = client
        self.component = component
        self.dedupe_window = dedupe_window
        self._seen: dict[tuple[str, str, str, str], tuple[float, str, int]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def event(self, obj: Obj, etype: str, reason: str, message: str) -> None:
        """Record asynchronously; failures are logged, never raised into the caller."""
        log.info("event %s %s on %s/%s: %s", etype, reason, obj.get("metadata", {}).get("namespace"),
                 obj.get("metadata", {}).get("name"), message)
        task = asyncio.get_running_loop().create_task(self._write(obj, etype, reason, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _write(self, obj: Obj, etype: str, reason: str, message: str) -> None:
        md = obj.get("metadata", {})
        ns = md.get("namespace") or "default"
        dkey = (md.get("uid", ""), etype, reason, message)
        ts = now_rfc3339()
        prev = self._seen.get(dkey)
        try:
            if prev and time.monotonic() - prev[0] < self.dedupe_window:
                count = prev[2] + 1
                await self.client.patch(EVENTS, ns, prev[1], {"count": count, "lastTimestamp": ts})
                self._seen[dkey] = (prev[0], prev[1], count)
                return
            body: Obj = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{md.get('name', 'obj')}.", "namespace": ns},
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion"),
                    "kind": obj.get("kind"),
                    "name": md.get("name"),
                    "namespace": ns,
                    "uid": md.get("uid"),
                    "resourceVersion": md.get("resourceVersion"),
                },
                "reason": reason,
                "message": message[:1024],
                "type": etype,
                "source": {"component": self.component},
                "reportingComponent": self.component,
                "firstTimestamp": ts,
                "lastTimestamp": ts,
                "count": 1,
            }
            created = await self.client.create(EVENTS, ns, body)
            self._seen[dkey] = (time.monotonic(), created["metadata"]["name"], 1)
        except ApiError as exc:
            if prev and exc.not_found:
                self._seen.pop(dkey, None)
            log.warning("could not record event %s on %s/%s: %s", reason, ns, md.get("name"), exc)
