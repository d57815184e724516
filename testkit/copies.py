"""Every remote copy the workers ever held, recorded from watches over a test.

A watch, not a poll: a duplicate copy that lives 300 ms between two polls is exactly the
defect a "never two copies" test exists to catch. Each worker gets a ``kruntime`` Informer on
Jobs carrying an origin-uid label; every copy uid seen is kept with its worker and lifetime.
A worker that is stopped or frozen by the test is retried by the informer (a copy created and
deleted entirely inside such a gap cannot be seen by anyone, and is not claimed to be).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kruntime.client import ClusterClient
from kruntime.informer import EventType, Informer
from kruntime.resources import JOBS, Obj
from mirror.naming import LABEL_ORIGIN_UID


@dataclass
class CopyLife:
    uid: str
    worker: str
    name: str
    first_seen: float
    #: first instant the copy was going away (deletionTimestamp) or gone; None while it lives
    ended: float | None = None


@dataclass
class CopyRecorder:
    """``async with CopyRecorder(workers, namespace) as rec``: every copy of every manager Job."""

    workers: Mapping[str, ClusterClient]
    namespace: str
    #: manager uid → copy uid → its life
    seen: dict[str, dict[str, CopyLife]] = field(default_factory=dict)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def _handler(self, worker: str) -> Callable[[EventType, Obj | None, Obj], None]:
        def on_event(etype: EventType, old: Obj | None, new: Obj) -> None:
            md = new["metadata"]
            origin = (md.get("labels") or {}).get(LABEL_ORIGIN_UID)
            if not origin:
                return
            now = time.monotonic()
            life = self.seen.setdefault(origin, {}).setdefault(md["uid"], CopyLife(md["uid"], worker, md["name"], now))
            if (etype == "DELETED" or md.get("deletionTimestamp")) and life.ended is None:
                life.ended = now

        return on_event

    async def __aenter__(self) -> CopyRecorder:
        informers = []
        for worker, client in self.workers.items():
            inf = Informer(client, JOBS, namespace=self.namespace, label_selector=LABEL_ORIGIN_UID)
            inf.add_handler(self._handler(worker))
            informers.append(inf)
            self._tasks.append(asyncio.get_running_loop().create_task(inf.run(), name=f"copy-recorder-{worker}"))
        # Reachable workers are listed before the test acts (an unreachable one is a test, not an error).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in informers)), 30)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def copies_of(self, manager_uid: str) -> dict[str, str]:
        """Every copy uid seen for ``manager_uid``, with its worker."""
        return {uid: life.worker for uid, life in self.seen.get(manager_uid, {}).items()}

    def overlapping(self, manager_uid: str) -> list[tuple[CopyLife, CopyLife]]:
        """Pairs of copies of one manager Job that both existed (not being deleted) at one instant."""
        lives = sorted(self.seen.get(manager_uid, {}).values(), key=lambda c: c.first_seen)
        return [(a, b) for i, a in enumerate(lives) for b in lives[i + 1:]
                if a.ended is None or b.first_seen < a.ended]
