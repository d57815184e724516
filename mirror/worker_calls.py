"""Calls to workers on behalf of one manager object's pass, which a slow worker cannot stall.

A call goes through the worker's share of in-flight calls (``WorkerCluster.call_slot``); one
still unanswered after the worker's ``slow_after`` seconds goes on by itself and the pass ends
(``WorkerBusy``), so workers that answer in 9 s cannot hold every reconcile slot between them.
The object's next pass waits until its detached calls have ended (:meth:`WorkerCalls.busy`)
and reads what they did.

The wait for the worker client's own token is not the worker's slowness and is not held in a
slot: a call whose token is further off than the worker's line allows parks the Job until its
turn (:mod:`mirror.worker_line`), and the detach timer starts counting only once the token is due.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from kruntime.client import ApiError
from kruntime.ratelimit import TokenWait
from mirror import metrics
from mirror.workers import WorkerBusy, WorkerCluster

log = logging.getLogger(__name__)

T = TypeVar("T")

#: the manager uid of the pass running in this task (names the object a detached call belongs to)
_PASS_UID: contextvars.ContextVar[str] = contextvars.ContextVar("jobmirror_pass_uid", default="")
#: the workers whose line let the pass running in this task through: its further calls there go on
_ADMITTED: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("jobmirror_pass_admitted", default=None)


class WorkerCalls:
    def __init__(self) -> None:
        #: per manager uid, worker calls still running after its pass stopped waiting
        self._detached: dict[str, set[asyncio.Task[Any]]] = {}

    def busy(self, uid: str) -> bool:
        """A call of an earlier pass for ``uid`` has not ended yet."""
        return uid in self._detached

    def pending_on(self, uid: str) -> str | None:
        """The worker a call of an earlier pass for ``uid`` still runs on, or None."""
        return next((t.get_name() for t in self._detached.get(uid, ())), None)

    @contextlib.contextmanager
    def on_behalf_of(self, uid: str) -> Iterator[None]:
        """Calls made in this block belong to the pass of manager object ``uid``."""
        token, admitted = _PASS_UID.set(uid), _ADMITTED.set(set())
        try:
            yield
        finally:
            _ADMITTED.reset(admitted)
            _PASS_UID.reset(token)

    async def call(self, worker: WorkerCluster, coro: Coroutine[Any, Any, T], *,
                   on_sent: Callable[[], None] | None = None) -> T:
        """One call to ``worker``, within its share of in-flight calls (see the module doc).

        ``on_sent`` runs when the request goes out: a pass that ends before (parked, no slot) sent nothing."""
        verb = str(getattr(coro, "__qualname__", "call")).rsplit(".", 1)[-1]
        delay = worker.client.limiter.delay_for_next()
        try:
            self._admit(worker, delay)
        except WorkerBusy:
            coro.close()
            raise
        tokens = TokenWait(on_sent=on_sent)

        async def call() -> T:
            try:
                async with worker.call_slot(f"a {verb} call", tokens=tokens):
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
        task.set_name(worker.name)
        try:
            # Counted from when its token is due: the wait for it is ours, not the worker's slowness.
            done, _ = await asyncio.wait({task}, timeout=worker.slow_after + delay)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task in done:
            return task.result()
        uid = _PASS_UID.get()
        self._detached.setdefault(uid, set()).add(task)
        task.add_done_callback(functools.partial(self._ended, uid, worker.name, verb))
        metrics.WORKER_CALLS_DETACHED.labels(worker.name).inc()
        raise WorkerBusy(worker.name, 1.0, reason="detached", sent=True)

    @staticmethod
    def _admit(worker: WorkerCluster, delay: float) -> None:
        """Let the pass call ``worker`` or park its Job in the worker's line (WorkerBusy ``rate_limited``,
        back at its turn). Once let through, the pass's further calls there do not ask again."""
        uid, admitted = _PASS_UID.get(), _ADMITTED.get()
        if not uid or admitted is None or worker.name in admitted:
            return
        after = worker.line.admit(uid, worker.clock(), delay, worker.client.limiter.qps)
        metrics.WORKER_PARKED.labels(worker.name).set(len(worker.line))
        if after is not None:
            log.debug("worker %s: next token in %.2fs: %s parked for %.2fs (%d parked)", worker.name, delay, uid,
                      after, len(worker.line))
            raise WorkerBusy(worker.name, after, reason="rate_limited")
        admitted.add(worker.name)

    def _ended(self, uid: str, worker: str, verb: str, task: asyncio.Task[Any]) -> None:
        calls = self._detached.get(uid, set())
        calls.discard(task)
        if not calls:
            self._detached.pop(uid, None)
        if not task.cancelled() and task.exception() is not None:
            log.info("worker %s: a slow %s call for %s ended with %s (its next pass reads the outcome)", worker,
                     verb, uid, task.exception())
