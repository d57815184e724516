"""One object per worker cluster: its client, its watches on our copies, its health.

Per mirrored kind it keeps one informer on the copies carrying our origin label, with an
index by the manager object's uid. Health combines an active probe (``/readyz``, retried
with tenacity backoff, every attempt logged and counted) with the state of the copy watches. A bounded number of
in-flight calls per worker means a hung worker can tie up at most that many
reconcile slots, never the whole controller.

A worker that answers, but slowly, is a third state beside healthy and unhealthy: a call (or
probe) slower than ``slow_after`` seconds, or one still waiting longer than that, makes it
*slow* for ``slow_hold`` seconds. A slow worker is chosen for new Jobs only when no other can
take them, and its calls share one small pool of reconcile slots with every other slow worker
(``slow_slots``), so slow workers together never hold more than that pool, whatever their number.
It is not unhealthy: its copies keep being mirrored and nothing is re-dispatched.

A worker that answers but runs nothing is *stalled* (issue 36): several of our copies there
have had no pod and no word from its Job controller past ``podsCreatedTimeout`` (found by
:mod:`mirror.worker_events`). Not lost — its API server answers and its copies stay — but
placement should avoid it; the condition clears itself once a copy there shows its
controller at work again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from datetime import datetime

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_exponential

from kruntime.client import ApiError, ClusterClient
from kruntime.informer import Informer, without_managed_fields
from kruntime.lifecycle import LOOP_STALL
from kruntime.ratelimit import TokenWait, measuring, service_seconds
from kruntime.resources import Obj, key_of
from mirror import identity, metrics
from mirror.config import Worker
from mirror.kinds import MirroredKind
from mirror.worker_line import TokenLine

log = logging.getLogger(__name__)

class WorkerBusy(Exception):
    """The worker cannot take this call now; try this Job again in ``retry_after`` s.

    ``reason`` says why (``jobmirror_worker_busy_total``): ``rate_limited`` (its client's token is
    far off: the Job is parked until its turn), ``in_flight`` (its share of calls is taken),
    ``slow_slots`` (slow, and the slow workers' shared slots are taken), ``detached`` (a call
    outlasted slowCallSeconds and goes on by itself). ``sent``: the request may have gone out.
    """

    expected = True

    def __init__(self, worker: str, retry_after: float = 0.5, *, reason: str = "in_flight",
                 sent: bool = False) -> None:
        super().__init__(worker)
        self.worker, self.retry_after, self.reason, self.sent = worker, retry_after, reason, sent


#: Informer index of copies by the uid of the manager object they came from.
BY_ORIGIN_UID = "origin-uid"


class KindCopies:
    """The copies of one kind in one worker: an informer, the uid index, the unfinished count."""

    def __init__(self, kind: MirroredKind, client: ClusterClient, origin: str,
                 manager_cluster: str | None = None) -> None:
        self.kind = kind
        self.informer = Informer(client, kind.resource, label_selector=identity.selector(origin),
                                 transform=without_managed_fields)
        self.origin = origin
        #: only copies carrying this manager's identity count as load (None: every copy, for tests)
        self.manager_cluster = manager_cluster
        self.informer.add_index(BY_ORIGIN_UID, self._origin_uid)
        #: keys of copies not finished yet, kept incrementally: placement asks for the count per Job
        self.unfinished: set[str] = set()
        self.informer.add_handler(self._count)

    def _count(self, etype: str, old: Obj | None, new: Obj) -> None:
        key = key_of(new)
        # Only copies stamped with this manager's identity are load: anyone who may write Jobs in a
        # worker namespace can put our origin label on them, and must not push placement away (issue 32).
        foreign = (self.manager_cluster is not None
                   and identity.labels_of_copy(new).manager_cluster != self.manager_cluster)
        if etype == "DELETED" or foreign or self.kind.is_finished(new):
            self.unfinished.discard(key)
        else:
            self.unfinished.add(key)

    def _origin_uid(self, obj: Obj) -> Iterable[str]:
        uid = identity.labels_of_copy(obj).manager_uid
        return (uid,) if uid and identity.manager_key_of(self.kind.name, obj) else ()

    def copy_of(self, manager: Obj) -> Obj | None:
        """The copy ``manager`` made (the most recently updated, should there be two): same uid,
        namespace and name (:func:`mirror.kinds.is_copy_of`)."""
        if not self.informer.indexed(BY_ORIGIN_UID, manager["metadata"]["uid"]):
            return None  # the common answer, asked of every worker by every pass: a dict lookup
        found = [c for c in self.informer.by_index(BY_ORIGIN_UID, manager["metadata"]["uid"])
                 if identity.is_copy_of(self.kind.name, c, manager, origin=self.origin)]
        return found[-1] if found else None


class WorkerCluster:
    """One worker: its client, copy caches and health.

    ``config_error`` set: its kubeconfig could not be loaded (bad YAML, missing context or
    file). The worker is kept in the list, unhealthy with that reason, and never contacted, so
    one broken kubeconfig Secret does not stop the mirroring to the others.
    """

    def __init__(
        self,
        cfg: Worker,
        client: ClusterClient,
        *,
        kinds: Sequence[MirroredKind],
        origin: str,
        probe_interval: float = 5.0,
        max_in_flight: int = 8,
        clock: Callable[[], float] = time.monotonic,
        loop_stall: Callable[[], float] = LOOP_STALL.seconds,
        config_error: str | None = None,
        slow_after: float = 3.0,
        slow_hold: float = 60.0,
        slow_slots: asyncio.Semaphore | None = None,
        watch_client: ClusterClient | None = None,
        manager_cluster: str | None = None,
    ) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.client = client
        self.origin = origin
        self.probe_interval = probe_interval
        self.clock = clock
        #: how long our own event loop has been stalled in all: not the worker's slowness
        self.loop_stall = loop_stall
        #: True when this worker is the manager cluster itself (KEP-4368 Story 1).
        self.is_manager = False
        #: its cluster identity (kube-system namespace UID), once read and checked against the others
        self.identity: str | None = None
        #: why it is not admitted yet (identity unread: it could be another entry's cluster, whose
        #: copies it would judge stray); unhealthy and never written to until cleared
        self.held: str | None = None
        #: serves the watches (their own connections: a watch holds one as long as it runs)
        self.watch_client = watch_client or client
        self.kinds = {kind.name: KindCopies(kind, self.watch_client, origin, manager_cluster) for kind in kinds}
        self.probe_ok = False
        #: why this worker's kubeconfig could not be loaded: unhealthy until a restart with a fixed one
        self.config_error = config_error
        self.last_error: str | None = config_error or "not probed yet"
        self.unhealthy_since: float | None = clock()
        self._spell_recoveries = 0  # the copy watches' recoveries when the unhealthy spell began
        self.in_flight = asyncio.Semaphore(max_in_flight)
        self.slow_after, self.slow_hold = slow_after, slow_hold
        #: shared by every worker's calls while it is slow (the controller passes one to all)
        self.slow_slots = slow_slots or asyncio.Semaphore(max_in_flight)
        #: in-flight call -> its start, our loop's stall then, its token wait
        self._calls: dict[int, tuple[float, float, TokenWait]] = {}
        #: Jobs parked while this worker's client has too many calls queued for tokens (worker_line)
        self.line = TokenLine(slow_after / 2)
        self._slow_until = 0.0
        self._slow_reason = ""
        #: set once the first probe has answered either way, so the first placements see every worker
        self.probed = asyncio.Event()
        #: why it runs nothing and since when, per kind whose copies show it (set and cleared by worker events)
        self._stalled: dict[str, tuple[str, datetime | None]] = {}

    # -- cache views ------------------------------------------------------------------------

    def informers(self) -> list[Informer]:
        return [kc.informer for kc in self.kinds.values()]

    def synced(self, kind: MirroredKind) -> bool:
        """Whether the copy cache of ``kind`` has listed at least once (so a miss means none)."""
        return self.kinds[kind.name].informer.synced.is_set()

    def copy_of(self, kind: MirroredKind, manager: Obj) -> Obj | None:
        return self.kinds[kind.name].copy_of(manager)

    def copies(self, kind: MirroredKind) -> list[Obj]:
        return self.kinds[kind.name].informer.items()

    def unfinished(self) -> int:
        """Unfinished copies of every kind: the load placement compares."""
        return sum(len(kc.unfinished) for kc in self.kinds.values())

    def _watch_error(self) -> str | None:
        """The first failing copy watch's error, None when all are healthy."""
        return next((i.last_error for i in self.informers() if not i.healthy), None)

    # -- health -----------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        return (self.config_error is None and self.held is None and self.probe_ok
                and all(i.healthy and i.synced.is_set() for i in self.informers()))

    def unhealthy_for(self) -> float:
        """Seconds this worker has been unhealthy (0 when healthy)."""
        self._track_spell()
        return 0.0 if self.unhealthy_since is None else self.clock() - self.unhealthy_since

    def _track_spell(self) -> None:
        """Keep ``unhealthy_since`` to the current unhealthy spell. ``healthy`` also follows the copy
        watches, which change it between probes: a spell whose watches recovered since it began (the
        worker answered then) is over, so the next one is counted from now, never from an earlier
        spell's start (that would let a worker be given up before workerLostTimeout)."""
        if self.healthy:
            self.unhealthy_since = None
            return
        recoveries = sum(i.recoveries for i in self.informers())
        if self.unhealthy_since is None or recoveries != self._spell_recoveries:
            self.unhealthy_since = self.clock()
            self._spell_recoveries = recoveries

    def _set_health(self, ok: bool, error: str | None) -> None:
        was = self.healthy
        if ok and not self.probe_ok:
            self.watch_client.reachability.answered_again()  # its watches retry now, not after their backoff
        self.probe_ok = ok
        self.last_error = error if not ok else self._watch_error()
        now_healthy = self.healthy
        self._track_spell()
        if was != now_healthy:
            log.log(logging.INFO if now_healthy else logging.WARNING, "worker %s is now %s%s", self.name,
                    "healthy" if now_healthy else "UNHEALTHY", f": {self.last_error}" if self.last_error else "")
        metrics.WORKER_UP.labels(self.name).set(1 if now_healthy else 0)

    # -- stalled (runs nothing) -----------------------------------------------------------------

    @property
    def stalled(self) -> str | None:
        """Why this worker runs nothing (its copies get no pod and no status), or None."""
        return next((why for why, _ in self._stalled.values()), None)

    @property
    def stalled_since(self) -> datetime | None:
        """When the stall began (the earliest of its kinds'), None when not stalled or not known."""
        return min((at for _, at in self._stalled.values() if at is not None), default=None)

    def set_stalled(self, kind: str, reason: str | None, since: datetime | None = None) -> None:
        """Worker events of ``kind`` found the worker's controller silent (``reason``, judged at ``since``)
        or at work again (None)."""
        if reason is None:
            self._stalled.pop(kind, None)
        else:
            self._stalled[kind] = (reason, since)
        metrics.WORKER_STALLED.labels(self.name).set(1 if self._stalled else 0)

    # -- slowness -----------------------------------------------------------------------------

    def slow(self) -> str | None:
        """Why this worker counts as slow now, or None."""
        # A call still waiting for its client's token has not reached the worker: not its slowness.
        longest = max((self._served(started, stall, w) for started, stall, w in self._calls.values()
                       if not w.queueing), default=0.0)
        if longest > self.slow_after:
            return f"a call has been waiting {longest:.1f}s (slow above {self.slow_after:g}s)"
        return self._slow_reason if self.clock() < self._slow_until else None

    def _served(self, started: float, stall: float, tokens: TokenWait) -> float:
        """How long a call begun at ``started`` (our loop's stall then: ``stall``) has been the worker's:
        without its wait for our client's tokens and our own loop's stall since."""
        return service_seconds(self.clock() - started, tokens.seconds, self.loop_stall() - stall)

    def _took(self, seconds: float, what: str) -> None:
        if seconds > self.slow_after:
            if self.slow() is None:
                log.warning("worker %s is SLOW: %s took %.1fs (above %gs): it takes new Jobs only when no other "
                            "worker can, and shares the slow workers' reconcile slots for %gs", self.name, what,
                            seconds, self.slow_after, self.slow_hold)
            self._slow_until = self.clock() + self.slow_hold
            self._slow_reason = f"{what} took {seconds:.1f}s (slow above {self.slow_after:g}s)"
            metrics.WORKER_SLOW_CALLS.labels(self.name).inc()
        metrics.WORKER_SLOW.labels(self.name).set(1 if self.slow() else 0)

    @contextlib.asynccontextmanager
    async def call_slot(self, what: str = "a call", wait: float = 1.0,
                        tokens: TokenWait | None = None) -> AsyncIterator[TokenWait]:
        """One in-flight call to this worker: its own share of slots, and while it is slow also
        one of the shared slow slots. Raises :class:`WorkerBusy` after ``wait`` seconds without one
        (at once for a slow worker: waiting for it is what must not tie up reconcile slots).

        Yields the call's token wait (``tokens``, or a new one): the requests made in the block
        count their wait for the client's token there, and the call is timed without it."""
        shared = self.slow() is not None
        wait, retry = (0.0, 2.0) if shared else (wait, 0.5)
        try:
            async with asyncio.timeout(wait):
                await self.in_flight.acquire()
        except TimeoutError:
            raise WorkerBusy(self.name, retry) from None
        try:
            if shared:
                try:
                    async with asyncio.timeout(wait):
                        await self.slow_slots.acquire()
                except TimeoutError:
                    raise WorkerBusy(self.name, retry, reason="slow_slots") from None
            key = object()
            started = self.clock()
            tokens = tokens if tokens is not None else TokenWait()
            stall = self.loop_stall()
            self._calls[id(key)] = (started, stall, tokens)
            try:
                with measuring(tokens):
                    yield tokens
            finally:
                del self._calls[id(key)]
                self._took(self._served(started, stall, tokens), what)
                if shared:
                    self.slow_slots.release()
        finally:
            self.in_flight.release()

    def mark_suspect(self, error: str) -> None:
        """A real call failed at the transport level: unhealthy until the next good probe."""
        if self.probe_ok:
            self._set_health(False, error)

    def hold(self, why: str) -> None:
        self.held = why
        self._set_health(False, why)

    def admit(self, identity: str, *, is_manager: bool) -> None:
        self.identity, self.is_manager, self.held = identity, is_manager, None
        log.info("worker %s admitted: cluster %s%s", self.name, identity, " (the manager itself)" if is_manager else "")

    async def probe_once(self) -> None:
        if self.config_error is not None or self.held is not None:  # keep the reason visible (metric, /status)
            self._set_health(False, self.config_error or self.held)
            self.probed.set()
            return

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
                with attempt, measuring() as tokens:
                    started, stall = self.clock(), self.loop_stall()
                    await self.client.request("GET", "/readyz", timeout=min(self.client.timeout, 5.0))
                    self._took(self._served(started, stall, tokens), "the /readyz probe")
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
            "copies": sum(len(i.cache) for i in self.informers()),
            "unfinished": self.unfinished(),
            "isManager": self.is_manager,
            "slow": self.slow(),
            "stalled": self.stalled,
            "stalledSince": (since.strftime("%Y-%m-%dT%H:%M:%SZ") if (since := self.stalled_since) is not None
                             else None),
        }
