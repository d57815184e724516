"""One object per worker cluster: its client, its watch on our copies, its health.

Health combines an active probe (``/readyz``, retried with tenacity backoff, every
attempt logged and counted) with the state of the copy watch. A bounded number of
in-flight calls per worker means a hung worker can tie up at most that many
reconcile slots, never the whole controller.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_exponential

from jobapi.conditions import is_finished
from kruntime.client import ApiError, ClusterClient
from kruntime.informer import Informer
from kruntime.resources import JOBS, Obj
from mirror import metrics
from mirror.config import Worker
from mirror.naming import ANNOTATION_ORIGIN_JOB, LABEL_ORIGIN, LABEL_ORIGIN_UID

log = logging.getLogger(__name__)


class WorkerCluster:
    def __init__(
        self,
        cfg: Worker,
        client: ClusterClient,
        *,
        origin: str,
        probe_interval: float = 5.0,
        max_in_flight: int = 8,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.client = client
        self.origin = origin
        self.probe_interval = probe_interval
        self.clock = clock
        #: True when this worker is the manager cluster itself (KEP-4368 Story 1).
        self.is_manager = False
        self.informer = Informer(client, JOBS, label_selector=f"{LABEL_ORIGIN}={origin}")
        self._by_uid: dict[str, str] = {}
        #: keys of copies not finished yet, kept incrementally: placement asks for the count per Job
        self._unfinished: set[str] = set()
        self.informer.add_handler(self._index)
        self.probe_ok = False
        self.last_error: str | None = "not probed yet"
        self.unhealthy_since: float | None = clock()
        self.in_flight = asyncio.Semaphore(max_in_flight)
        #: set once the first probe has answered either way, so the first placements see every worker
        self.probed = asyncio.Event()

    # -- cache views ------------------------------------------------------------------------

    def _index(self, etype: str, old: Obj | None, new: Obj) -> None:
        uid = (new.get("metadata", {}).get("labels") or {}).get(LABEL_ORIGIN_UID)
        key = f"{new['metadata'].get('namespace')}/{new['metadata']['name']}"
        if old is not None:
            ouid = (old.get("metadata", {}).get("labels") or {}).get(LABEL_ORIGIN_UID)
            if ouid and self._by_uid.get(ouid) == key and ouid != uid:
                self._by_uid.pop(ouid, None)
        if etype == "DELETED" or is_finished(new):
            self._unfinished.discard(key)
        else:
            self._unfinished.add(key)
        if not uid:
            return
        if etype == "DELETED":
            if self._by_uid.get(uid) == key:
                self._by_uid.pop(uid, None)
        else:
            self._by_uid[uid] = key

    def copy_of(self, manager_uid: str) -> Obj | None:
        key = self._by_uid.get(manager_uid)
        return self.informer.get(key) if key else None

    def copies(self) -> list[Obj]:
        return self.informer.items()

    def unfinished(self) -> int:
        return len(self._unfinished)

    @staticmethod
    def manager_key_of(remote: Obj) -> str | None:
        return (remote.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_ORIGIN_JOB)

    # -- health -----------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        return self.probe_ok and self.informer.healthy and self.informer.synced.is_set()

    def unhealthy_for(self) -> float:
        """Seconds this worker has been unhealthy (0 when healthy)."""
        if self.healthy or self.unhealthy_since is None:
            return 0.0
        return self.clock() - self.unhealthy_since

    def _set_health(self, ok: bool, error: str | None) -> None:
        was = self.healthy
        self.probe_ok = ok
        self.last_error = error if not ok else (self.informer.last_error if not self.informer.healthy else None)
        now_healthy = self.healthy
        if now_healthy:
            self.unhealthy_since = None
        elif self.unhealthy_since is None:
            self.unhealthy_since = self.clock()
        if was != now_healthy:
            log.log(logging.INFO if now_healthy else logging.WARNING, "worker %s is now %s%s", self.name,
                    "healthy" if now_healthy else "UNHEALTHY", f": {self.last_error}" if self.last_error else "")
        metrics.WORKER_UP.labels(self.name).set(1 if now_healthy else 0)

    def mark_suspect(self, error: str) -> None:
        """A real call failed at the transport level: unhealthy until the next good probe."""
        if self.probe_ok:
            self._set_health(False, error)

    async def probe_once(self) -> None:
        def before_sleep(state: RetryCallState) -> None:
            metrics.HEALTH_PROBE_FAILURES.labels(self.name).inc()
            exc = state.outcome.exception() if state.outcome else None
            log.info("worker %s probe attempt %d failed: %s", self.name, state.attempt_number, exc)

        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(3),
                wait=wait_exponential(multiplier=0.5, max=4),
                retry=retry_if_exception_type(ApiError),
                before_sleep=before_sleep,
                reraise=True,
            ):
                with attempt:
                    await self.client.request("GET", "/readyz", timeout=min(self.client.timeout, 5.0))
        except ApiError as exc:
            metrics.HEALTH_PROBE_FAILURES.labels(self.name).inc()
            self._set_health(False, str(exc))
        else:
            self._set_health(True, None)
        self.probed.set()

    async def probe_loop(self) -> None:
        while True:
            await self.probe_once()
            await asyncio.sleep(self.probe_interval)

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "healthy": self.healthy,
            "unhealthyFor": round(self.unhealthy_for(), 1),
            "lastError": self.last_error,
            "copies": len(self.informer.cache),
            "unfinished": self.unfinished(),
            "isManager": self.is_manager,
        }
