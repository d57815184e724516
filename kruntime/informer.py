"""List + watch with a local cache, as client-go's reflector/informer does.

Watches resume from the last seen resourceVersion (bookmarks keep it fresh), a
``410 Gone`` forces a relist, and transport failures back off exponentially with the
attempt count visible in logs and metrics. After a relist, objects that vanished while
we were disconnected are delivered as deletions, so no handler misses one.

A ``keep`` predicate bounds the cache by what the controller handles rather than by the
cluster (a selector cannot express "claimed by us"): objects it rejects are never cached,
and an object that stops being kept is removed and delivered as a deletion.

Secondary indexes (client-go's indexers) map a value computed from each object (an owner
uid, an origin label) to the keys of the cached objects that carry it; they are updated
before handlers run, so a handler sees the index and the cache agree.

What is cached of an object is a record its ``transform`` makes (:class:`Informer`: the object
itself, or a cut-down dict); a :class:`RecordInformer` may keep any type, e.g. a slotted record
a tenth the size of a dict, given how to read the resourceVersion back from it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Generic, Literal, Protocol, TypedDict, TypeVar, Unpack

from kruntime import heap, metrics
from kruntime.client import ApiError, ClusterClient
from kruntime.ratelimit import exponential_backoff
from kruntime.resources import Obj, Resource, key_of

log = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
T = TypeVar("T")
#: what a RecordInformer caches of each object
R = TypeVar("R")
#: Told every change as (type, the record before or None, the record after; for DELETED, made from
#: the object's last state).
RecordHandler = Callable[[EventType, R | None, R], Awaitable[None] | None]
Handler = RecordHandler[Obj]
#: The index values of one record (usually zero or one).
IndexFunc = Callable[[T], Iterable[str]]
#: objects compared or delivered between two yields to the loop during a relist
_YIELD_EVERY = 1000


async def paced(items: Iterable[T]) -> AsyncIterator[T]:
    """``items``, with a yield to the loop after every _YIELD_EVERY of them."""
    for i, item in enumerate(items):
        yield item
        if i % _YIELD_EVERY == _YIELD_EVERY - 1:
            await asyncio.sleep(0)


#: relists that may work at once, per event loop (kruntime.informer.relist_slots); 2 against 4 took
#: bench fleet's start and failover lag p99 from ~0.09 s to 0.04-0.08 s (results/fleet-relist-ab.json)
RELIST_SLOTS = 2
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def relist_slots() -> asyncio.Semaphore:
    """Held by a relist while a page's body is decoded, for its records (and a turn of the loop
    after) and for its comparison and events. Each relist yields between pages and every
    _YIELD_EVERY objects, but fifty at once (a fleet's pods at start or failover) put fifty pages'
    work between two turns of every timer: the Lease and the probes waited seconds (bench fleet, 50
    workers x 20,000 pods). With a few slots a timer waits for a few pages at most. Not held while a
    page is fetched: a slow worker holds none."""
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = asyncio.Semaphore(RELIST_SLOTS)
    return slots


class ListWatch(TypedDict, total=False):
    """What an informer lists and watches (namespace, selectors), how long a watch lasts, how it
    backs off, and which objects it keeps."""

    namespace: str | None
    label_selector: str | None
    field_selector: str | None
    watch_timeout: int
    backoff_base: float
    backoff_cap: float
    keep: Callable[[Obj], bool] | None


class RecordInformer(Generic[R]):
    """List + watch of one resource, caching a record ``transform`` makes of each kept object;
    ``version`` reads a record's resourceVersion (a relist compares records, not objects)."""

    def __init__(self, client: ClusterClient, resource: Resource, *, transform: Callable[[Obj], R],
                 version: Callable[[R], object], **options: Unpack[ListWatch]) -> None:
        self.client = client
        self.resource = resource
        self.namespace = options.get("namespace")
        self.label_selector = options.get("label_selector")
        self.field_selector = options.get("field_selector")
        self.watch_timeout = options.get("watch_timeout", 300)
        self.backoff_base = options.get("backoff_base", 0.5)
        self.backoff_cap = options.get("backoff_cap", 30.0)
        self.keep = options.get("keep") or _keep_all
        #: what is cached of each kept object (e.g. only the fields a view needs): memory follows it
        self.transform = transform
        self.version = version
        self.cache: dict[str, R] = {}
        self.synced = asyncio.Event()
        self.healthy = False
        #: list/watch recoveries (the first sync included): a server that answered again
        self.recoveries = 0
        self.last_error: str | None = None
        self._handlers: list[RecordHandler[R]] = []
        self._index_funcs: dict[str, IndexFunc[R]] = {}
        #: index name -> value -> keys, in the order they were last updated (a dict as an ordered set)
        self._indexes: dict[str, dict[str, dict[str, None]]] = {}
        self._rv = ""
        self._failures = 0

    def add_handler(self, handler: RecordHandler[R]) -> None:
        self._handlers.append(handler)

    def add_index(self, name: str, func: IndexFunc[R]) -> None:
        """Maintain index ``name``: ``func(obj)`` gives the values an object is found under."""
        self._index_funcs[name] = func
        self._indexes[name] = {}
        for key, obj in self.cache.items():
            self._index_one(name, key, None, obj)

    def indexed(self, name: str, value: str) -> bool:
        """Whether any cached object is found under ``value`` in index ``name`` (a dict lookup)."""
        return value in self._indexes[name]

    def by_index(self, name: str, value: str) -> list[R]:
        """Cached objects whose index ``name`` has ``value``, least recently updated first."""
        keys = self._indexes[name].get(value) or {}
        return [obj for k in keys if (obj := self.cache.get(k)) is not None]

    def _index_one(self, name: str, key: str, old: R | None, new: R | None) -> None:
        func, index = self._index_funcs[name], self._indexes[name]
        for value in func(old) if old is not None else ():
            keys = index.get(value)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del index[value]
        for value in func(new) if new is not None else ():
            index.setdefault(value, {})[key] = None

    def _reindex(self, key: str, old: R | None, new: R | None) -> None:
        for name in self._index_funcs:
            self._index_one(name, key, old, new)

    def get(self, key: str) -> R | None:
        return self.cache.get(key)

    def items(self) -> list[R]:
        return list(self.cache.values())

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self.synced.wait(), timeout)

    async def _emit(self, etype: EventType, old: R | None, new: R) -> None:
        for h in self._handlers:
            try:
                r = h(etype, old, new)
                if r is not None:
                    await r
            except Exception:  # a broken handler must not kill the informer
                log.exception("informer handler failed", extra={"resource": self.resource.plural})

    async def _relist(self) -> None:
        fresh: dict[str, R] = {}
        rv = ""
        # Cut down page by page: only the kept, slimmed objects outlive their page (a list of
        # 20,000 pods, whole, would set the process's peak memory for good).
        slots = relist_slots()
        async for page, page_rv in self.client.list_pages(self.resource, self.namespace,
                                                          label_selector=self.label_selector,
                                                          field_selector=self.field_selector,
                                                          decode_slots=slots):
            rv = page_rv
            async with slots:  # taken once the page is here: a slow worker's fetch holds no slot
                fresh.update((key_of(o), self.transform(o)) for o in page if self.keep(o))
                heap.settle()  # what is kept of the page is long-lived: no collection walks it again
                await asyncio.sleep(0)  # held over one turn of the loop: the others wait for it, not run
        metrics.RELISTS.labels(self.client.name, self.resource.plural).inc()
        async with slots:
            await self._swap(fresh, rv)

    async def _swap(self, fresh: dict[str, R], rv: str) -> None:
        """``fresh`` becomes the cache; the handlers are told what changed; the old cache is freed.

        A relist of a million pods must not hold the loop the Lease and probes share: the
        comparison and the events yield every _YIELD_EVERY objects. Until the swap, readers see
        the old cache whole; after it, the cache and the indexes agree before any handler runs."""
        old_cache = self.cache
        gone = [k async for k in paced(old_cache) if k not in fresh]
        changed = [(k, prev) async for k, obj in paced(fresh.items())
                   if (prev := old_cache.get(k)) is None or self.version(prev) != self.version(obj)]
        self.cache = fresh
        self._rv = rv
        if self._index_funcs:
            for k in gone:
                self._reindex(k, old_cache[k], None)
            for k, prev in changed:
                self._reindex(k, prev, fresh[k])
        async for k in paced(gone):
            await self._emit("DELETED", old_cache[k], old_cache[k])
        async for k, prev in paced(changed):
            if prev is None:
                await self._emit("ADDED", None, fresh[k])
            else:
                await self._emit("MODIFIED", prev, fresh[k])
        heap.settle()  # the new cache is long-lived: later collections need not walk it
        # The old cache freed all at once is ~0.2 s per 200,000 pods of deallocation: a piece at a time.
        async for _ in paced(range(len(old_cache))):
            old_cache.popitem()

    async def _watch_once(self) -> None:
        async for ev in self.client.watch(
            self.resource,
            self.namespace,
            resource_version=self._rv,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=int(self.watch_timeout * (1 + random.random())),
            on_open=self._connected,
        ):
            etype = ev.get("type")
            obj = ev.get("object") or {}
            if etype == "ERROR":
                code = int(obj.get("code", 0))
                raise ApiError(code, str(obj.get("reason", "")), str(obj.get("message", "")), obj,
                               cluster=self.client.name)
            rv = obj.get("metadata", {}).get("resourceVersion")
            if rv:
                self._rv = rv
            if etype == "BOOKMARK":
                continue
            k = key_of(obj)
            prev = self.cache.get(k)
            if etype in ("ADDED", "MODIFIED") and not self.keep(obj):
                if prev is not None:  # no longer ours to cache: to handlers, it is gone
                    self.cache.pop(k, None)
                    self._reindex(k, prev, None)
                    await self._emit("DELETED", prev, self.transform(obj))
                continue
            if etype == "DELETED":
                self.cache.pop(k, None)
                self._reindex(k, prev, None)
                await self._emit("DELETED", prev, self.transform(obj))
            elif etype in ("ADDED", "MODIFIED"):
                record = self.transform(obj)
                self.cache[k] = record
                self._reindex(k, prev, record)
                await self._emit("ADDED" if prev is None else "MODIFIED", prev, record)

    def _connected(self) -> None:
        if not self.healthy:
            self.recoveries += 1
        self.healthy = True
        self.last_error = None
        self._failures = 0

    async def run(self) -> None:
        """Run until cancelled. Never returns on errors; they are retried with backoff."""
        self._failures = 0
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                    self.synced.set()
                    self._connected()
                await self._watch_once()
                metrics.WATCH_RESTARTS.labels(self.client.name, self.resource.plural, "timeout").inc()
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                if exc.gone:
                    log.info("watch %s on %s expired (410), relisting", self.resource.plural, self.client.name)
                    metrics.WATCH_RESTARTS.labels(self.client.name, self.resource.plural, "gone").inc()
                    need_list = True
                    continue
                self._failures += 1
                self.healthy = False
                self.last_error = str(exc)
                delay = exponential_backoff(self._failures, self.backoff_base, self.backoff_cap)
                metrics.WATCH_RESTARTS.labels(self.client.name, self.resource.plural, "error").inc()
                log.warning(
                    "list/watch %s on %s failed (attempt %d), retrying in %.1fs: %s",
                    self.resource.plural, self.client.name, self._failures, delay, exc,
                )
                if exc.status in (401, 403):
                    need_list = True
                await self.client.reachability.pause(delay)
            except Exception as exc:  # malformed stream etc: relist after a pause
                self._failures += 1
                self.healthy = False
                self.last_error = f"{type(exc).__name__}: {exc}"
                delay = exponential_backoff(self._failures, self.backoff_base, self.backoff_cap)
                log.warning("informer %s on %s: %s; relisting in %.1fs", self.resource.plural, self.client.name,
                            self.last_error, delay)
                need_list = True
                await self.client.reachability.pause(delay)


class Informer(RecordInformer[Obj]):
    """An informer caching the objects themselves, or the dicts ``transform`` cuts them down to
    (a controller's own caches: at least :func:`without_managed_fields`)."""

    def __init__(self, client: ClusterClient, resource: Resource, *, transform: Callable[[Obj], Obj] | None = None,
                 **options: Unpack[ListWatch]) -> None:
        super().__init__(client, resource, transform=transform or _as_sent, version=_rv, **options)


class ObjectCache(Protocol):
    """What a reconciler reads: the cached object of a ``namespace/name`` key."""

    def get(self, key: str) -> Obj | None: ...


class NamespacedInformers:
    """One :class:`Informer` per namespace of an allow-list, read as one cache.

    The API server filters by namespace only one namespace per list/watch (a field
    selector has no set form), so an allow-list is served by a watch per namespace: the
    controller never receives, let alone caches, objects of other namespaces.
    """

    def __init__(self, client: ClusterClient, resource: Resource, namespaces: Iterable[str], **kw: Any) -> None:
        self.client = client
        self.resource = resource
        self.members = {ns: Informer(client, resource, namespace=ns, **kw) for ns in dict.fromkeys(namespaces)}
        self.synced = asyncio.Event()

    def add_handler(self, handler: Handler) -> None:
        for m in self.members.values():
            m.add_handler(handler)

    def get(self, key: str) -> Obj | None:
        m = self.members.get(key.partition("/")[0])
        return m.get(key) if m is not None else None

    def items(self) -> list[Obj]:
        return [o for m in self.members.values() for o in m.items()]

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self.synced.wait(), timeout)

    async def run(self) -> None:
        async def synced_all() -> None:
            await asyncio.gather(*(m.synced.wait() for m in self.members.values()))
            self.synced.set()

        await asyncio.gather(synced_all(), *(m.run() for m in self.members.values()))


def _as_sent(obj: Obj) -> Obj:
    return obj


def without_managed_fields(obj: Obj) -> Obj:
    """``obj`` without the API server's record of who set which field (changed in place: the object
    is the decoder's). No controller here reads it from a cache, and it is over half a Job's memory
    once decoded, its field trees being many small dicts (13 of a claimed Job's 24 KB). A write that
    omits it keeps the server's, a PUT of status included. Observers that time writes by it (the
    benchmarks) keep it."""
    md = obj.get("metadata")
    if isinstance(md, dict):
        md.pop("managedFields", None)
    return obj


def _keep_all(obj: Obj) -> bool:
    return True


def _rv(obj: Obj) -> object:
    return (obj.get("metadata") or {}).get("resourceVersion")
