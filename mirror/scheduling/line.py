"""The Jobs waiting in the manager for room, in line per worker they could run on.

Who is first for a worker is the best-ranked waiting Job that could run there; the rank is the
scheduling order's (:mod:`mirror.scheduling.order`), given as a function, since a tenant's share
changes as its Jobs start and end. Each (worker, tenant) keeps its Jobs in two heaps: in the
tenant's own order (priority, then creation) and by priority, then when each began waiting (the
order of those that waited past the starvation age, whose wait may have begun out of creation
order). Finding the first for a worker ranks two heads per tenant: O(tenants + log n), not a scan
of every waiting Job (with thousands waiting, a scan on every placement and room change starved
the event loop in the 10,000-Job run).

A Job first in line holds the workers it waits for against Jobs behind it, for a bounded time
(:func:`hold_lapses_at`), so that no Job of any tenant keeps another from room for longer.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mirror.scheduling.order import within_tenant


@dataclass(frozen=True)
class Waiting:
    """A Job kept in the manager for room: its place in line and the workers it could run on."""

    #: (creationTimestamp, uid): older first, the uid breaks ties
    order: tuple[str, str]
    could: frozenset[str]
    #: its namespace/name, to look at it again when room appears
    key: str = ""
    tenant: str = ""
    priority: int = 0
    #: what it holds once running, all its pods together (backfill estimates when it could start)
    demand: Mapping[str, int] = field(default_factory=dict, compare=False)

    @property
    def within(self) -> tuple[int, tuple[str, str]]:
        return within_tenant(self.priority, self.order)


#: a waiting Job's rank given when it began waiting and the time now (smaller goes first)
Ranker = Callable[[Waiting, float, float], Any]


def by_arrival(w: Waiting, since: float, now: float) -> Any:
    return w.order


def hold_lapses_at(ahead_since: float, behind_since: float, hold: float) -> float:
    """When a Job ahead in a worker's line stops holding that worker against one behind it:
    ``hold`` seconds after the first of the two began waiting.

    Bounded on both sides, so no Job — of any namespace — keeps another from room it could use
    for longer than ``hold``: not one that never finds room (its own wait runs out), not a
    stream of such Jobs arriving one after another (the held Job's wait runs out), not one
    that is placed, moved and waits again with its old place in line. Which Job is ahead is
    the scheduling order's; this rule holds for any order.
    """
    return min(ahead_since, behind_since) + hold


def holds(ahead_since: float, behind_since: float, now: float, hold: float) -> bool:
    """Whether a Job ahead in line still holds a worker against one behind it at ``now``."""
    return now < hold_lapses_at(ahead_since, behind_since, hold)


_Entry = tuple[Any, float, str]


def _by_creation(w: Waiting, since: float) -> Any:
    return w.within


def _by_since(w: Waiting, since: float) -> Any:
    return (w.within[0], since, w.within[1])


#: the orders of a tenant's heaps per worker: every rank's order within one tenant is one of them
#: at each tenant's best Job (mirror.scheduling.order: aged Jobs by when they began waiting)
_ORDERS = (_by_creation, _by_since)
_Heaps = list[list[_Entry]]


class WaitingLine(Mapping[str, Waiting]):
    """The Jobs waiting in the manager for room, by uid, and in line per worker they could run on."""

    def __init__(self, jobs: Mapping[str, Waiting] | None = None, now: float = 0.0, rank: Ranker = by_arrival) -> None:
        self._jobs: dict[str, Waiting] = {}
        #: per uid, the clock time it began waiting (kept while it waits, however often re-added)
        self._since: dict[str, float] = {}
        self.rank_of: Ranker = rank
        #: per worker, per tenant, its waiting Jobs in each of the _ORDERS
        self._lines: dict[str, dict[str, _Heaps]] = {}
        #: the same, only the Jobs whose hold may not have lapsed (:meth:`holder`): one whose hold
        #: lapsed never holds again in this wait, so it leaves the top for good
        self._holders: dict[str, dict[str, _Heaps]] = {}
        for uid, w in (jobs or {}).items():
            self.add(uid, w, now)

    def __getitem__(self, uid: str) -> Waiting:
        return self._jobs[uid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._jobs)

    def __len__(self) -> int:
        return len(self._jobs)

    def add(self, uid: str, waiting: Waiting, now: float = 0.0) -> None:
        """``uid`` waits (again) this way; ``now`` is when it began, if it was not waiting yet."""
        if self._jobs.get(uid) == waiting:
            return  # looked at again, still waiting the same way: already in line
        self._jobs[uid] = waiting
        since = self._since.setdefault(uid, now)
        for worker in waiting.could:
            for lines in (self._lines, self._holders):
                heaps = lines.setdefault(worker, {}).setdefault(waiting.tenant, [[] for _ in _ORDERS])
                for heap, key in zip(heaps, _ORDERS, strict=True):
                    heapq.heappush(heap, (key(waiting, since), since, uid))
            if len(self._lines[worker][waiting.tenant][0]) > 2 * len(self._jobs) + 16:  # mostly stale: compact
                self._compact(worker, waiting.tenant)

    def pop(self, uid: str) -> Waiting | None:
        self._since.pop(uid, None)
        return self._jobs.pop(uid, None)

    def since(self, uid: str) -> float | None:
        """When the Job began waiting (the clock :meth:`add` was given), None if it is not waiting."""
        return self._since.get(uid)

    def rank(self, uid: str, now: float) -> Any:
        return self.rank_of(self._jobs[uid], self._since[uid], now)

    def _current(self, entry: _Entry, worker: str, tenant: str, order: Callable[[Waiting, float], Any]) -> bool:
        """Whether the entry is the Job as it waits now (not an earlier way: other workers, priority,
        wait, or tenant — a namespace's labels seen or changed move its Jobs to another tenant)."""
        key, since, uid = entry
        w = self._jobs.get(uid)
        return (w is not None and w.tenant == tenant and worker in w.could and self._since.get(uid) == since
                and order(w, since) == key)

    def _best(self, lines: dict[str, _Heaps], worker: str, now: float,
              keep: Callable[[_Entry], bool]) -> str | None:
        """The best-ranked head over the tenants' heaps (stale heads, and those ``keep`` refuses, dropped)."""
        best: tuple[Any, str] | None = None
        for tenant in list(lines):
            for heap, order in zip(lines[tenant], _ORDERS, strict=True):
                while heap and not (self._current(heap[0], worker, tenant, order) and keep(heap[0])):
                    heapq.heappop(heap)
                if heap:
                    uid = heap[0][2]
                    r = self.rank(uid, now)
                    if best is None or r < best[0]:
                        best = (r, uid)
            if not any(lines[tenant]):
                del lines[tenant]
        return None if best is None else best[1]

    def best(self, worker: str, now: float, k: int, _compacted: frozenset[str] = frozenset()) -> list[str]:
        """Up to ``k`` uids waiting for ``worker``, best-ranked first: the first in line and those next
        behind it (the ones to look at when room appears that the first may not use: backfill, or a
        first whose hold lapsed). Walks the heaps as trees from their roots, best rank first: within a
        tenant the creation heap is in rank order for Jobs not aged, the since heap for aged ones, so
        the walk meets every Job after all that rank before it, in O(tenants + k log k) plus the stale
        entries it walks past; a heap with more of those than ``stale`` is compacted first."""
        out: list[str] = []
        lines = self._lines.get(worker) or {}
        if k <= 0 or not lines:
            return out
        stale = 8 * k + 64
        frontier: list[tuple[Any, int, int, int]] = []  # (rank, tie, heap number, index)
        heaps = [(heap, tenant, order) for tenant, hs in lines.items() for heap, order in zip(hs, _ORDERS, strict=True)]
        seen: set[str] = set()
        walked = [0] * len(heaps)

        def visit(h: int, i: int) -> bool:
            """Push the current entries at and below ``i`` that are not yet seen; False: too stale."""
            heap, tenant, order = heaps[h]
            stack = [i]
            while stack:
                j = stack.pop()
                if j >= len(heap):
                    continue
                uid = heap[j][2]
                if self._current(heap[j], worker, tenant, order) and uid not in seen:
                    seen.add(uid)
                    heapq.heappush(frontier, (self.rank(uid, now), len(seen), h, j))
                    continue
                walked[h] += 1  # stale, or met in the tenant's other heap: its children may be current
                if walked[h] > stale and tenant not in _compacted:
                    return False
                stack.extend((2 * j + 1, 2 * j + 2))
            return True

        def again(h: int) -> list[str]:
            tenant = heaps[h][1]
            self._compact(worker, tenant)
            return self.best(worker, now, k, _compacted | {tenant})  # once per tenant: it ends

        for h in range(len(heaps)):
            if not visit(h, 0):
                return again(h)
        while frontier and len(out) < k:
            _, _, h, j = heapq.heappop(frontier)
            out.append(heaps[h][0][j][2])
            if not (visit(h, 2 * j + 1) and visit(h, 2 * j + 2)):
                return again(h)
        return out

    def _compact(self, worker: str, tenant: str) -> None:
        """Rebuild a (worker, tenant)'s heaps from the Jobs waiting now: no stale entries left."""
        jobs = [(u, w, self._since[u]) for u, w in self._jobs.items() if worker in w.could and w.tenant == tenant]
        for lines in (self._lines, self._holders):
            for heap, key in zip(lines.get(worker, {}).get(tenant, ()), _ORDERS, strict=False):
                heap[:] = [(key(w, since), since, u) for u, w, since in jobs]
                heapq.heapify(heap)

    def workers(self) -> list[str]:
        """The workers some Job may be waiting for (a line once made is kept while any entry is in it)."""
        return [w for w, lines in self._lines.items() if lines]

    def first(self, worker: str, now: float = 0.0) -> str | None:
        """The uid of the best-ranked Job waiting for ``worker``."""
        return self._best(self._lines.get(worker) or {}, worker, now, lambda _: True)

    def holder(self, worker: str, now: float, hold: float) -> str | None:
        """The uid of the best-ranked Job waiting for ``worker`` whose own hold has not lapsed at ``now``."""
        return self._best(self._holders.get(worker) or {}, worker, now,
                          lambda e: holds(e[1], e[1], now, hold))  # time only moves on: a lapsed one goes for good

    def is_first(self, uid: str, now: float = 0.0) -> bool:
        """Whether the Job is first in line for a worker it could run on (the others wait to be woken)."""
        w = self._jobs.get(uid)
        return w is not None and any(self.first(worker, now) == uid for worker in w.could)

    def held_before(self, rank: Any, now: float = 0.0, hold: float = math.inf,
                    since: float | None = None) -> dict[str, tuple[str, float]]:
        """The workers a Job ranked before ``rank`` holds at ``now`` against a Job that began waiting
        at ``since`` (None: at ``now``), each with that Job's uid and the clock time its hold lapses.
        The default ``hold`` never lapses."""
        behind = now if since is None else since
        if not holds(behind, behind, now, hold):
            return {}  # it has been held long enough: nothing holds it any more
        out = {}
        for w in list(self._holders):
            u = self.holder(w, now, hold)
            if u is not None and self.rank(u, now) < rank:
                out[w] = (u, hold_lapses_at(self._since[u], behind, hold))
        return out


def heads(waiting: WaitingLine, workers: Iterable[str], now: float = 0.0, hold: float = math.inf) -> list[str]:
    """Per worker of ``workers``, the uid of the Job first in line for it: the one that may take
    room appearing there first, so the one to look at again at once — and, when its hold has
    lapsed at ``now``, also the best-ranked Job whose hold has not: the first no longer keeps it
    from that room (a blocker that never fits must not also take its wake)."""
    out: list[str] = []
    for w in sorted(set(workers)):
        for uid in (waiting.first(w, now), waiting.holder(w, now, hold)):
            if uid is not None and uid not in out:
                out.append(uid)
    return out
