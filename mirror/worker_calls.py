"""Calls to workers on behalf of one manager object's pass, which a slow worker cannot stall.

A call goes through the worker's share of in-flight calls (``WorkerCluster.call_slot``); one
still unanswered after the worker's ``slow_after`` seconds goes on by itself and the pass ends
(``WorkerBusy``), so workers that answer in 9 s cannot hold every reconcile slot between them.
The object's next pass waits until its detached calls have ended (:meth:`WorkerCalls.busy`)
and reads what they did.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from kruntime.client import ApiError
from mirror import metrics
from mirror.workers import WorkerBusy, WorkerCluster

log = logging.getLogger(__name__)

T = TypeVar("T")

#: the manager uid of the pass running in this task (names the object a detached call belongs to)
_PASS_UID: contextvars.ContextVar[str] = contextvars.ContextVar("jobmirror_pass_uid", default="")


class WorkerCalls:
    def __init__(self) -> None:
        #: per manager uid, worker calls still running after its pass stopped waiting
        self._detached: dict[str, set[asyncio.Task[Any]]] = {}

    def busy(self, uid: str) -> bool:
        """A call of an earlier pass for ``uid`` has not ended yet."""
        return uid in self._detached

    @contextlib.contextmanager
    def on_behalf_of(self, uid: str) -> Iterator[None]:
        """Calls made in this block belong to the pass of manager object ``uid``."""
        token = _PASS_UID.set(uid)
        try:
            yield
        finally:
            _PASS_UID.reset(token)

    async def call(self, worker: WorkerCluster, coro: Coroutine[Any, Any, T]) -> T:
        """One call to ``worker``, within its share of in-flight calls (see the module doc)."""
        verb = str(getattr(coro, "__qualname__", "call")).rsplit(".", 1)[-1]

        async def call() -> T:
            try:
                async with worker.call_slot(f"a {verb} call"):
                    try:
                        return await coro
                    except ApiError as exc:
                        if exc.status == 0:
                            worker.mark_suspect(str(exc))  # a timed-out call is evidence enough: stop placing there
                        raise
            except WorkerBusy:
                coro.close()  # never awaited when no slot was free (a no-op once it ran)
                raise

        task = asyncio.ensure_future(call())
        try:
            done, _ = await asyncio.wait({task}, timeout=worker.slow_after)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task in done:
            return task.result()
        uid = _PASS_UID.get()
        self._detached.setdefault(uid, set()).add(task)
        task.add_done_callback(functools.partial(self._ended, uid, worker.name, verb))
        metrics.WORKER_CALLS_DETACHED.labels(worker.name).inc()
        raise WorkerBusy(worker.name, 1.0)

    def _ended(self, uid: str, worker: str, verb: str, task: asyncio.Task[Any]) -> None:
        calls = self._detached.get(uid, set())
        calls.discard(task)
        if not calls:
            self._detached.pop(uid, None)
        if not task.cancelled() and task.exception() is not None:
            log.info("worker %s: a slow %s call for %s ended with %s (its next pass reads the outcome)", worker,
                     verb, uid, task.exception())
