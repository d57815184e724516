"""Every remote copy the workers ever held, recorded from watches over a test.

A watch, not a poll: a duplicate copy that lives 300 ms between two polls is exactly the
defect a "never two copies" test exists to catch. The lighter face of the invariant checker
(testkit/invariants.py): the same Recorder, fed by one ``kruntime`` Informer per worker on
Jobs carrying an origin-uid label, without pods, manager Jobs or a verdict. A worker that is
stopped or frozen by the test is retried by the informer (a copy created and deleted entirely
inside such a gap cannot be seen by anyone, and is not claimed to be).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kruntime.client import ApiError, ClusterClient
from kruntime.informer import EventType, Informer
from kruntime.resources import JOBS, Obj
from mirror.naming import LABEL_ORIGIN_UID
from testkit.invariants import CopyLife, Recorder
from testkit.waiting import wait_for


@dataclass
class CopyRecorder:
    """``async with CopyRecorder(workers, namespace) as rec``: every copy of every manager Job."""

    workers: Mapping[str, ClusterClient]
    namespace: str
    record: Recorder = field(default_factory=lambda: Recorder(managed_by="", origins=None))
    #: copy uid -> (worker, its origin-uid label, resourceVersion) as the watch last delivered it;
    #: the resourceVersion is "" once it is deleted
    seen: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def _handler(self, worker: str) -> Callable[[EventType, Obj | None, Obj], None]:
        def on_event(etype: EventType, old: Obj | None, new: Obj) -> None:
            self.record.on_copy(worker, etype, new, time.monotonic())
            md = new["metadata"]
            self.seen[md["uid"]] = (worker, str((md.get("labels") or {}).get(LABEL_ORIGIN_UID) or ""),
                                    "" if etype == "DELETED" else str(md.get("resourceVersion") or ""))

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

    def lives(self, manager_uid: str) -> list[CopyLife]:
        return sorted((c for c in self.record.copies.values() if c.manager_uid == manager_uid),
                      key=lambda c: c.first_seen)

    def copies_of(self, manager_uid: str) -> dict[str, str]:
        """Every copy uid seen for ``manager_uid``, with its worker."""
        return {c.uid: c.worker for c in self.lives(manager_uid)}

    def overlapping(self, manager_uid: str) -> list[tuple[CopyLife, CopyLife]]:
        """Pairs of copies of one manager Job that both existed (not being deleted) at one instant."""
        lives = self.lives(manager_uid)
        return [(a, b) for i, a in enumerate(lives) for b in lives[i + 1:]
                if a.ending is None or b.first_seen < a.ending]

    async def made(self, manager_uid: str, *, timeout: float = 60) -> dict[str, str]:
        """Every copy uid ever made for ``manager_uid``, with its worker, once the watches caught up.

        "The copy was created exactly once" is ``len(await rec.made(uid)) == 1``: every create makes
        a new uid, and the watch sees a copy however briefly it lived. Caught up means: on each
        worker that answers, the copies it holds now are the ones the watch holds, at the same
        resourceVersion (a worker the test stopped is skipped: what it held was watched until then).
        """
        async def agree() -> bool:
            for worker, client in self.workers.items():
                try:
                    items, _ = await asyncio.wait_for(client.list_all(
                        JOBS, self.namespace, label_selector=f"{LABEL_ORIGIN_UID}={manager_uid}"), 5)
                except TimeoutError:  # a frozen worker
                    continue
                except ApiError as exc:
                    if exc.status == 0:  # a stopped worker (a transport error)
                        continue
                    raise
                held = {it["metadata"]["uid"]: str(it["metadata"].get("resourceVersion") or "") for it in items}
                watched = {uid: rv for uid, (w, owner, rv) in self.seen.items()
                           if w == worker and owner == manager_uid and rv}
                if held != watched:
                    return False
            return True

        await wait_for(agree, timeout=timeout, what=f"the copy watches caught up with the workers for {manager_uid}")
        return self.copies_of(manager_uid)
