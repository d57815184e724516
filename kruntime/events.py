"""Kubernetes Events on the objects we act on, written without blocking reconciles.

Like client-go's broadcaster, events go into a bounded queue drained by one writer, so
under load they never take more than one request slot at a time from the client's QPS
budget that pod creates and status writes need; when the queue is full an event is
dropped, counted (``jobmirror_runtime_events_dropped_total``) and logged, never waited
for. Identical events for one object within ``dedupe_window`` are folded into a count
patch, the way client-go's correlator keeps a hot loop from flooding etcd.

Controllers record through :class:`ObjectEvents`, which adds client-go's spam filter
(:class:`SpamFilter`: per object and event type, a burst, then one per refill period) and
names the involved object's kind itself (objects from a list carry no ``apiVersion``/``kind``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from kruntime import metrics
from kruntime.bounded import LruDict
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import EVENTS, Obj, Resource

log = logging.getLogger(__name__)

#: client-go's broadcaster queue length (``maxQueuedEvents``)
MAX_QUEUED_EVENTS = 1000
#: client-go's event spam filter: per object and event type, 25 at once, then 1 per 5 min.
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(
        self, client: ClusterClient, component: str, *, dedupe_window: float = 600.0,
        max_queued: int = MAX_QUEUED_EVENTS, writers: int = 1, max_tracked: int = 10_000,
    ) -> None:
        self.client = client
        self.component = component
        self.dedupe_window = dedupe_window
        self.max_queued = max_queued
        self.writers = writers
        self.dropped = 0
        #: the dedupe map: bounded (least recently written evicted first), so memory follows the
        #: events of the last while, not every object ever evented
        self._seen: LruDict[tuple[str, str, str, str], tuple[float, str, int]] = LruDict(max_tracked)
        self._queue: asyncio.Queue[tuple[Obj, str, str, str]] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._last_drop_log = 0.0

    def event(self, obj: Obj, etype: str, reason: str, message: str) -> None:
        """Queue an event; failures and drops are logged and counted, never raised into the caller."""
        md = obj.get("metadata", {})
        # A Warning is worth a line at the default level; a Normal one is routine (the event itself is the record).
        log.log(logging.INFO if etype == "Warning" else logging.DEBUG, "event %s %s on %s/%s: %s", etype, reason,
                md.get("namespace"), md.get("name"), message)
        if self._queue is None:
            self._queue = asyncio.Queue(self.max_queued)
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(self._drain(), name=f"events-{self.component}-{i}")
                           for i in range(self.writers)]
        try:
            self._queue.put_nowait((obj, etype, reason, message))
        except asyncio.QueueFull:
            self.dropped += 1
            metrics.EVENTS_DROPPED.labels(self.client.name).inc()
            now = time.monotonic()
            if now - self._last_drop_log > 10.0:
                self._last_drop_log = now
                log.warning("event queue for %s full (%d queued): dropping events; %d dropped so far "
                            "(this one: %s on %s/%s)", self.client.name, self.max_queued, self.dropped, reason,
                            md.get("namespace"), md.get("name"))

    async def _drain(self) -> None:
        assert self._queue is not None
        while True:
            item = await self._queue.get()
            try:
                await self._write(*item)
            except Exception:  # one bad event must not stop the writer
                log.exception("writing event %s failed", item[2])
            finally:
                self._queue.task_done()

    async def flush(self, timeout: float = 10.0) -> None:
        """Write what is queued (up to ``timeout`` seconds), then stop the writers."""
        if self._queue is not None and self._tasks:
            try:
                await asyncio.wait_for(self._queue.join(), timeout)
            except TimeoutError:
                log.warning("%d events still queued after %.0fs at shutdown; not written",
                            self._queue.qsize(), timeout)
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t

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
            if exc.namespace_terminating:  # the Job goes with its namespace: nothing to tell anyone
                log.info("event %s on %s/%s not recorded: its namespace is being deleted", reason, ns, md.get("name"))
            else:
                log.warning("could not record event %s on %s/%s: %s", reason, ns, md.get("name"), exc)


class SpamFilter:
    """client-go's event spam filter: a token bucket per (object uid, event type)."""

    def __init__(self, burst: int = SPAM_BURST, refill_seconds: float = SPAM_REFILL_SECONDS,
                 clock: Callable[[], float] = time.monotonic, max_tracked: int = 50_000) -> None:
        self.burst = float(burst)
        self.refill_seconds = refill_seconds
        self.clock = clock
        self.max_tracked = max_tracked
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}

    def allow(self, uid: str, etype: str) -> bool:
        k = (uid, etype)
        now = self.clock()
        tokens, last = self._buckets.get(k, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) / self.refill_seconds)
        if tokens < 1:
            self._buckets[k] = (tokens, now)
            return False
        self._buckets[k] = (tokens - 1, now)
        if len(self._buckets) > self.max_tracked:
            self._buckets.clear()
        return True

    def forget(self, uid: str) -> None:
        for etype in ("Normal", "Warning"):
            self._buckets.pop((uid, etype), None)


class ObjectEvents:
    """Events on objects of one resource, through the spam filter, onto a recorder."""

    def __init__(self, recorder: EventRecorder, resource: Resource, spam_filter: SpamFilter | None = None) -> None:
        self.recorder = recorder
        self.resource = resource
        self.spam_filter = spam_filter if spam_filter is not None else SpamFilter()

    def event(self, obj: Obj, etype: str, reason: str, message: str) -> None:
        md = obj.get("metadata") or {}
        if not self.spam_filter.allow(str(md.get("uid", "")), etype):
            log.debug("event %s on %s/%s dropped by the spam filter", reason, md.get("namespace"), md.get("name"))
            return
        involved = {"apiVersion": self.resource.api_version, "kind": self.resource.kind, "metadata": md}
        self.recorder.event(involved, etype, reason, message)

    def forget(self, uid: str) -> None:
        """The object is gone: drop its buckets."""
        self.spam_filter.forget(uid)
