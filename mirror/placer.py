"""Where and when a Job goes: the Placer owns placement for every kind of the controller.

It keeps what placement needs between passes — dispatches not yet visible in a worker's cache,
the Jobs waiting in the manager (for room, or for their tenant's quota), the work running per
tenant, the room views — and answers one question for a pass: which worker takes this Job now
(:meth:`Placer.choose`), or why it waits. The rules are pure (mirror.placement, mirror.scheduling,
mirror.room); the reconciler performs the writes. Exclusions (workers that refused the Job or hold
a same-named object) are passed in, so the Placer reads nothing the reconciler remembers.

One Placer serves all kinds, so a tenant's JobSets and Jobs share one fair share and one quota.
Its clock is injected: hold lapses, aging and backfill are table rows, not sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from jobapi.objects import annotations_of
from kruntime.resources import Obj, key_of
from mirror import access, metrics
from mirror.config import Config, SchedulingOrder
from mirror.decisions import placement_of
from mirror.event_reasons import EXCEEDS_QUOTA, WAITING_FOR_QUOTA
from mirror.kinds import MirroredKind, QueueKey
from mirror.naming import ANNOTATION_EXPECTED_DURATION, ANNOTATION_PIN, ANNOTATION_WORKER_SELECTOR
from mirror.placement import (
    NoWorker,
    NoWorkerFits,
    WaitingForRoom,
    WorkerChooser,
    WorkerView,
    explain,
    narrow_by_room,
    select_by_labels,
)
from mirror.room.fit import WorkerFit
from mirror.room.requests import PODS, PodShape, shape_of_template
from mirror.room.view import RoomView, service_account_of
from mirror.scheduling.backfill import expected_length, may_backfill, start_on_worker
from mirror.scheduling.line import Waiting, WaitingLine, heads, holds
from mirror.scheduling.order import OrderRule, within_tenant
from mirror.scheduling.quota import Quota, never_within, over_quota, quota_of
from mirror.scheduling.shares import Running, RunningWork, demand_of, weighted_share
from mirror.scheduling.tenants import tenant_of
from mirror.worker_selector import SelectorError, matches
from mirror.worker_selector import parse as parse_selector
from mirror.workers import WorkerCluster

log = logging.getLogger(__name__)

#: seconds between two looks for room by the Jobs first in line (RoomAware): the placer's sweep
#: (:meth:`Placer.wake_waiting`), not a timer per Job
WAITING_RECHECK = 3.0
#: how many Jobs behind the first in a worker's line are looked at when room appears there (one
#: the first cannot use, or will not need before it could start: backfill; a first whose hold lapsed)
BEHIND_WAKES = 8
#: how many of a tenant's Jobs waiting for its quota are looked at again when some of it frees
QUOTA_WAKES = 8
#: seconds the fleet's capacity (the sum of the room views) is reused between placements
CAPACITY_TTL = 1.0


class Wake(Protocol):
    """Queue passes for waiting Jobs: ``urgent`` ahead of the queue (a Job that room appeared for
    must not wait behind a burst of new Jobs), else in turn."""

    def __call__(self, keys: list[QueueKey], *, urgent: bool = True) -> None: ...


class WaitingForQuota(NoWorker):
    """Placing the Job now would take its tenant past its quota: it waits in the manager."""

    reason = WAITING_FOR_QUOTA.reason


class OverQuotaForever(NoWorkerFits):
    """The Job alone asks more than its tenant's whole quota: it could never be placed."""

    reason = EXCEEDS_QUOTA.reason


@dataclass(frozen=True)
class Choice:
    """A placement decision and why it was made (the policy and the load it saw, or the pin)."""

    worker: str
    why: str
    #: the Job's pod as the room fit read it, and how many it wants at once (RoomAware only):
    #: what the chosen worker reserves until the copy's pods are bound
    pod: PodShape | None = None
    pods: int = 0
    #: whose the Job is and what it holds while it runs (fair share and quota count it from placement)
    tenant: str = ""
    demand: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class QueueEntry:
    """One waiting Job as ``kubectl jobmirror queue`` shows it, in line order."""

    kind: str
    key: str
    tenant: str
    priority: int
    share: float
    waited: float
    why: str
    #: seconds until it could start on the worker it is first in line for (None: not estimated)
    starts_in: float | None = None


def recheck_after(in_line: bool, resync: float) -> float | None:
    """Seconds until a Job left unplaced is looked at again (None: only when woken).

    A Job waiting in line (for room or for its tenant's quota) has no timer of its own: the placer
    wakes the first in line for each worker every WAITING_RECHECK seconds and when room appears
    there, the next BEHIND_WAKES when that first cannot use the room, a tenant's best quota
    waiters when its work ends, and the Jobs held where they had room once that hold lapsed
    (:meth:`Placer.wake_waiting`) — with 10,000 waiting, 10,000 timers would each wake a pass that
    finds nothing new, and the held ones' timers all fire in the same second. A Job that no worker
    may take (pin, selector, access, never fits) is in no line: it is looked at again at the resync."""
    return None if in_line else resync


class Placer:
    def __init__(self, cfg: Config, workers: Mapping[str, WorkerCluster], policy: WorkerChooser, *,
                 rooms: Mapping[str, RoomView] | None = None,
                 namespace_labels: Callable[[str], Mapping[str, str] | None] = lambda _: None,
                 priority_class: Callable[[str], int | None] = lambda _: None,
                 default_priority: Callable[[], int] = lambda: 0,
                 priorities_known: Callable[[], bool] = lambda: True,
                 wake: Wake | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg, self.workers, self.policy = cfg, workers, policy
        self.rooms: Mapping[str, RoomView] = rooms or {}
        self.namespace_labels, self.priority_class, self.default_priority = (namespace_labels, priority_class,
                                                                             default_priority)
        self.wake, self.clock, self.priorities_known = wake, clock, priorities_known
        sched = cfg.scheduling
        self.fair = sched.order is SchedulingOrder.FAIR_SHARE
        self.order = OrderRule(self.fair, sched.starvation_age)
        self._quotas: dict[str, Quota] = {t.name: quota_of(t.quota) for t in sched.tenants}
        self._weights = {t.name: t.weight for t in sched.tenants}
        #: dispatches not yet visible in a worker's cache, so placement sees them at once
        self._pending: dict[str, set[str]] = {name: set() for name in workers}
        #: Jobs waiting in the manager for room, ranked by the scheduling order
        self.waiting = WaitingLine(rank=self._rank)
        #: per tenant, its Jobs waiting for quota: uid -> (its order within the tenant, whom to wake)
        self._over_quota: dict[str, dict[str, tuple[tuple[int, tuple[str, str]], QueueKey]]] = {}
        #: per waiting uid, why it waits (for the queue view; evented once per wait by the reconciler)
        self._why: dict[str, str] = {}
        self._kind_of: dict[str, str] = {}
        #: per worker, when the Jobs behind its first were last woken because the first could not use its room
        self._passed_on: dict[str, float] = {}
        #: per second a hold lapses (rounded up), per worker, the Jobs it held there with their pod
        #: shape and how many pods they start at once
        self._held: dict[int, dict[str, dict[str, tuple[PodShape | None, int]]]] = {}
        #: per held uid, the second its hold lapses (its key in _held): dropped when it stops waiting
        self._held_at: dict[str, int] = {}
        self.running = RunningWork()
        self._capacity: tuple[float, dict[str, int]] = (-CAPACITY_TTL, {})
        self._access: access.Access = ({w.name: w.access for w in cfg.workers}
                                       if any(w.access is not None for w in cfg.workers) else {})
        #: one placement at a time, each in a turn of the event loop of its own (:meth:`turn`)
        self._turns = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Where a pass asks :meth:`choose`: one at a time, and never two in one turn of the event loop.

        A placement weighs every node of every worker (~7 ms of CPU at 50 workers of 100 nodes), and
        the reconcile slots whose answers arrived together each placed in the same turn: 0.2-0.4 s
        without a timer, the Lease's and the probes' included (the fleet simulation's fill)."""
        async with self._turns:
            await asyncio.sleep(0)
            yield

    # -- what a pass tells the placer ----------------------------------------------------------

    def observe(self, kind: MirroredKind, job: Obj, copies: Collection[str]) -> None:
        """What a pass read about ``job``: copies now visible, whether it is placed and running."""
        uid = job["metadata"]["uid"]
        for name in copies:
            if name in self._pending:
                self._pending[name].discard(uid)
        placed = placement_of(job).worker
        suspended = kind.is_suspended(job)
        if placed is not None or suspended:
            self._stop_waiting(uid)  # placed (or held back by the user): it holds no worker for later Jobs
        if placed is not None and not suspended and not kind.is_finished(job):
            known, tenant = self.running.get(uid), self.tenant(job)
            if known is None:  # placed before this process started (or by a pass of another kind)
                self.running.add(uid, Running(tenant, self.demand(kind, job), placed, self.clock(), None))
            elif known.tenant != tenant:  # its namespace's labels seen since (or changed): counted for its tenant
                self.running.add(uid, replace(known, tenant=tenant))
        else:
            self._ended(uid)

    def forget(self, uid: str) -> None:
        self._kind_of.pop(uid, None)
        for pending in self._pending.values():
            pending.discard(uid)
        self._stop_waiting(uid)
        self._ended(uid)
        for room in self.rooms.values():
            # Its pods may have been bound and ended between two looks at the room (one-second
            # pods): the reservation would otherwise hold their room until it lapses (60 s),
            # which capped dispatch at a worker's pod slots per minute in the 10,000-Job run.
            room.release(uid)

    # -- the Job's facts ----------------------------------------------------------------------

    def tenant(self, job: Obj) -> str:
        ns = job["metadata"]["namespace"]
        t = tenant_of(ns, self.namespace_labels(ns), self.cfg.scheduling.tenants) if self.cfg.scheduling.tenants \
            else None
        return t.name if t is not None else ns

    def priority(self, kind: MirroredKind, job: Obj) -> tuple[int, str | None]:
        """The Job's priority (its pods' PriorityClass value; the highest of several templates) and
        the name of a class the manager does not serve (then the default value is used)."""
        names = {(d.template.get("spec") or {}).get("priorityClassName") for d in kind.pod_demand(job)} - {None, ""}
        values, unknown = [], None
        for name in sorted(str(n) for n in names):
            value = self.priority_class(name)
            if value is None:
                unknown = name
            else:
                values.append(value)
        if not values:
            return self.default_priority(), unknown if self.priorities_known() else None
        return max(values), unknown if self.priorities_known() else None

    def demand(self, kind: MirroredKind, job: Obj) -> dict[str, int]:
        """What the Job holds while it runs, all its pods at once (empty when a quantity is unreadable:
        the room fit says so, and such a Job counts for nothing rather than for a guess)."""
        total: dict[str, int] = {}
        try:
            for d in kind.pod_demand(job):
                for r, v in demand_of(shape_of_template(d.template).requests, max(1, d.pods)).items():
                    total[r] = total.get(r, 0) + v
        except ValueError:
            return {}
        return total

    def length(self, job: Obj) -> float | None:
        """How long the Job runs at most once started (None: not known, or the annotation does not parse)."""
        try:
            return expected_length((job.get("spec") or {}).get("activeDeadlineSeconds"),
                                   annotations_of(job).get(ANNOTATION_EXPECTED_DURATION))
        except ValueError as exc:
            log.warning("%s: annotation %s ignored: %s", key_of(job), ANNOTATION_EXPECTED_DURATION, exc)
            return None

    # -- choosing -------------------------------------------------------------------------------

    def views(self, exclude: Collection[str] = ()) -> list[WorkerView]:
        return [
            # A stalled worker (its Job controller runs none of our copies) is used, as a slow one, only
            # when no other can take the Job: excluded, it could never show it runs copies again.
            WorkerView(w.name, w.healthy and w.name not in exclude, w.unfinished() + len(self._pending[w.name]),
                       w.cfg.labels, slow=w.slow() is not None or w.stalled is not None)
            for w in self.workers.values()
        ]

    def choose(self, kind: MirroredKind, job: Obj, exclude: Collection[str]) -> Choice:
        """The worker that takes ``job`` now, never one of ``exclude``, with why (recorded on the Job).

        Raises NoWorker: WaitingForQuota, WaitingForRoom (it waits in the manager), NoWorkerFits
        (it could never run anywhere), or a plain NoWorker naming the pin, selector or access rule.
        """
        uid, now = job["metadata"]["uid"], self.clock()
        self._kind_of[uid] = kind.name
        pin = annotations_of(job).get(ANNOTATION_PIN)
        # before the pin's own check and room: a Job never holds a worker it may not use
        views = self._usable(job, self.views(exclude), pin)
        tenant, demand = self.tenant(job), self.demand(kind, job)
        priority = self.priority(kind, job)[0] if self.fair else 0
        self._check_quota(uid, job, tenant, demand, priority)
        pod, want = self.pod_shape(kind, job) if self.rooms else (None, 0)
        fits = self._fits(pod, want, views) if pod is not None else {}
        fits.update(self._missing_accounts(kind, job, views))
        fits.update(self._missing_classes(kind, job, views))
        backfilled: set[str] = set()  # held workers this Job may take because it ends before their head starts
        if self.rooms:
            entry = Waiting((str(job["metadata"].get("creationTimestamp") or ""), uid), frozenset(), key_of(job),
                            tenant, priority, demand)
            since = self.waiting.since(uid)
            rank = self._rank(entry, now if since is None else since, now)
            length = self.length(job) if self.fair and self.cfg.scheduling.backfill else None

            def backfills(w: str, head: str) -> bool:
                if self._backfills(w, head, length, now):
                    backfilled.add(w)
                    return True
                return False

            try:
                views = narrow_by_room(views, fits, pin, rank=rank, waiting=self.waiting, now=now,
                                       hold=self.cfg.head_of_line_hold, since=since, backfills=backfills)
            except WaitingForRoom as wait:
                self.waiting.add(uid, Waiting(entry.order, wait.could, entry.key, tenant, priority, demand), now)
                self._why[uid] = str(wait)
                metrics.JOBS_WAITING_FOR_ROOM.set(len(self.waiting))
                if wait.held_until is not None and wait.held_until < math.inf:
                    self._unhold(uid)
                    at = self._held_at[uid] = math.ceil(wait.held_until)
                    held = self._held.setdefault(at, {})
                    for w in wait.could:
                        held.setdefault(w, {})[uid] = (pod, want)
                self._pass_on(uid, wait.could, now)
                raise
            except NoWorkerFits:
                self._stop_waiting(uid)  # it waits for no room any more, so it holds no worker
                raise
            self._stop_waiting(uid)
        chosen = self.policy.choose(views, pin)
        if chosen is None:
            raise NoWorker("the placement policy chose none")
        why = explain(self.cfg.placement.value, views, chosen, pin)
        if chosen in backfilled:
            metrics.BACKFILLS.labels(chosen).inc()
            why += "; backfilled: it ends before the Job first in line there could start"
        return Choice(chosen, why + (f"; room on {chosen}: {fits[chosen].why}" if chosen in fits else ""), pod, want,
                      tenant, demand)

    def _usable(self, job: Obj, views: list[WorkerView], pin: str | None) -> list[WorkerView]:
        """The views within the Job's namespace access and its worker-selector (a pin wins over a selector)."""
        selector = annotations_of(job).get(ANNOTATION_WORKER_SELECTOR)
        if self._access:
            return self.within_access(job, views, pin, selector)
        if selector and not pin:
            return select_by_labels(views, selector)
        return views

    def may_use(self, job: Obj) -> set[str]:
        """The workers ``job`` may run on at all (access, selector; health and room not asked): the ones a
        stuck Job's move may still try (mirror.progress.decide_move). Health aside: a worker down now is
        not one that failed the Job, and it may come back."""
        every = [replace(v, healthy=True) for v in self.views()]
        try:
            views = self._usable(job, every, annotations_of(job).get(ANNOTATION_PIN))
        except NoWorker:
            return set()
        return {v.name for v in views if v.healthy}

    def _check_quota(self, uid: str, job: Obj, tenant: str, demand: Mapping[str, int], priority: int) -> None:
        """Raise WaitingForQuota (or OverQuotaForever) when placing the Job would take its tenant past its
        quota; a Job that waits for quota holds no worker against others (it leaves the room line)."""
        quota = self._quotas.get(tenant)
        if quota is None or quota.unlimited:
            return
        never = never_within(demand, quota)
        if never:
            self._stop_waiting(uid)
            raise OverQuotaForever(f"tenant {tenant}: {never}")
        used, jobs = self.running.usage(tenant), self.running.jobs(tenant)
        own = self.running.get(uid)
        if own is not None and own.tenant == tenant:  # a Job moving: what it holds now is not counted twice
            used = {r: v - own.demand.get(r, 0) for r, v in used.items()}
            jobs -= 1
        over = over_quota(used, jobs, demand, quota)
        if over is None:
            self._drop_quota_wait(uid)
            return
        self._stop_waiting(uid)
        created = (str(job["metadata"].get("creationTimestamp") or ""), uid)
        self._over_quota.setdefault(tenant, {})[uid] = (within_tenant(priority, created),
                                                        QueueKey(self._kind_of.get(uid, ""), key_of(job)))
        why = f"tenant {tenant} is at its quota: {over}; placed when its running work ends"
        self._why[uid] = why
        raise WaitingForQuota(why)

    def within_access(self, job: Obj, views: list[WorkerView], pin: str | None, selector: str | None
                      ) -> list[WorkerView]:
        """Only the workers the Job's namespace may use (workers[].access), its worker-selector applied
        among them. Raises WorkerNotAllowed naming the rule when the pin, the selector or the access
        leaves none: the Job waits with that Warning instead of a bare "no healthy worker"."""
        ns = job["metadata"]["namespace"]
        labels = self.namespace_labels(ns)
        refused = access.refusal(ns, labels, self._access, pin=pin)
        if refused:
            raise access.WorkerNotAllowed(refused)
        allowed = access.allowed_workers(ns, labels, self._access)
        within = [v for v in views if v.name in allowed]
        if not selector or pin:
            return within
        try:
            return select_by_labels(within, selector)
        except NoWorker:
            refused = access.refusal(ns, labels, self._access, selected=self._selected(selector))
            if refused:
                raise access.WorkerNotAllowed(refused) from None
            raise

    def _selected(self, selector: str) -> set[str] | None:
        """The configured workers a worker-selector matches, health aside (None: it does not parse)."""
        try:
            requirements = parse_selector(selector)
        except SelectorError:
            return None
        return {w.name for w in self.cfg.workers if matches(requirements, w.labels)}

    def pod_shape(self, kind: MirroredKind, job: Obj) -> tuple[PodShape | None, int]:
        """The object's pod as the room fit reads it and how many run at once (the kind's demand); no
        shape (room unknown) for a quantity the API server would not have accepted, nor for pods of
        several shapes (a JobSet's replicatedJobs may differ; the fit judges one shape)."""
        demand = kind.pod_demand(job)
        try:
            shapes = [shape_of_template(d.template) for d in demand]
        except ValueError as exc:
            log.warning("%s/%s: room not judged: %s", job["metadata"]["namespace"], job["metadata"]["name"], exc)
            return None, 0
        if not shapes or any(s != shapes[0] for s in shapes[1:]):
            return None, 0
        return shapes[0], max(1, sum(d.pods for d in demand))

    def _missing_classes(self, kind: MirroredKind, job: Obj, views: Sequence[WorkerView]) -> dict[str, WorkerFit]:
        """Workers that serve no PriorityClass the Job's pods name: never a fit there (their API server
        would refuse every pod of the copy), said like any other reason a worker can never run it."""
        names = sorted({str(n) for d in kind.pod_demand(job)
                        if (n := (d.template.get("spec") or {}).get("priorityClassName"))})
        out = {}
        for v in views:
            room = self.rooms.get(v.name)
            missing = [n for n in names if room is not None and room.lacks_class(n)]
            if v.healthy and missing:
                out[v.name] = WorkerFit(False, 0, f"serves no PriorityClass {missing[0]} (create it there)")
        return out

    def _missing_accounts(self, kind: MirroredKind, job: Obj, views: Sequence[WorkerView]) -> dict[str, WorkerFit]:
        """Workers whose namespace of the copy surely lacks a ServiceAccount the Job's pods name: never a fit
        there (the ServiceAccount admission plugin refuses every pod), said naming the ServiceAccount."""
        ns = job["metadata"]["namespace"]
        names = sorted({n for d in kind.pod_demand(job) if (n := service_account_of(d.template))})
        out = {}
        for v in views:
            room = self.rooms.get(v.name)
            missing = [n for n in names if room is not None and room.lacks_account(ns, n)]
            if v.healthy and missing:
                out[v.name] = WorkerFit(False, 0, f"has no ServiceAccount {ns}/{missing[0]} (create it there)")
        return out

    def _fits(self, shape: PodShape, want: int, views: Sequence[WorkerView]) -> dict[str, WorkerFit]:
        """How one pod of ``shape`` fits each healthy worker whose room is known (synced, with nodes)."""
        out = {}
        for v in views:
            room = self.rooms.get(v.name)
            if v.healthy and room is not None and room.synced and room.nodes.cache:
                out[v.name] = room.fit(shape, want)
        return out

    # -- the order ------------------------------------------------------------------------------

    def _rank(self, w: Waiting, since: float, now: float) -> tuple[int, int, float, tuple[str, str]]:
        return self.order.rank(w.priority, w.order, self.share(w.tenant), now - since)

    def share(self, tenant: str) -> float:
        """The tenant's weighted dominant share of the fleet (what it runs over the rooms' allocatable)."""
        return weighted_share(self.running.usage(tenant), self.capacity(), self._weights.get(tenant, 1.0))

    def capacity(self) -> dict[str, int]:
        """Allocatable over the healthy workers' schedulable nodes (kept for CAPACITY_TTL seconds)."""
        at, cap = self._capacity
        now = self.clock()
        if now - at < CAPACITY_TTL:
            return cap
        total: dict[str, int] = {}
        for name, room in self.rooms.items():
            w = self.workers.get(name)
            if w is not None and w.healthy and room.synced:
                for r, v in room.allocatable().items():
                    total[r] = total.get(r, 0) + v
        self._capacity = (now, total)
        return total

    def _backfills(self, worker: str, head: str, length: float | None, now: float) -> bool:
        """Whether a Job of ``length`` may take room on ``worker`` ahead of ``head``: it ends before
        the head could start there (mirror.scheduling.backfill), so the head's start is not delayed."""
        if length is None or head not in self.waiting:
            return False
        return may_backfill(now, length, self.cfg.scheduling.backfill_margin,
                            self.starts_at(worker, self.waiting[head].demand, now))

    def starts_at(self, worker: str, demand: Mapping[str, int], now: float) -> float:
        """When a Job of ``demand`` could start on ``worker`` at the earliest (backfill.start_on_worker)."""
        room = self.rooms.get(worker)
        if room is None or not demand:
            return now
        totals = room.totals()
        return start_on_worker(now, totals["allocatable"], totals["requested"],
                               ((r.ends_at, r.demand) for r in self.running.on(worker)), demand)

    # -- placing and waiting ------------------------------------------------------------------

    def placing(self, job: Obj, choice: Choice, remote_name: str) -> None:
        """Count the Job against the chosen worker at once (before the placement write): concurrent
        passes placing a burst must see each other's choices, or they all pick the same least-loaded
        worker — and, with room views, the room its pods will take until they are bound — and its
        tenant's running work, for fair share and quota."""
        uid = job["metadata"]["uid"]
        self._pending[choice.worker].add(uid)
        room = self.rooms.get(choice.worker)
        if room is not None and choice.pod is not None:
            room.reserve(uid, job["metadata"]["namespace"], remote_name, choice.pod, choice.pods)
        self.running.add(uid, Running(choice.tenant, choice.demand, choice.worker, self.clock(),
                                      self.length(job)))
        self._why.pop(uid, None)

    def dispatched(self, worker: str, uid: str) -> None:
        """A copy was created there: it counts as load until the worker's cache shows it."""
        self._pending[worker].add(uid)

    def not_dispatched(self, worker: str, uid: str) -> None:
        """Nothing of the Job's runs on ``worker`` (refused, collided, deleted): not load there."""
        self._pending[worker].discard(uid)

    def unplaced(self, uid: str, worker: str) -> None:
        """The placement write failed: the Job takes nothing on ``worker``."""
        self._pending[worker].discard(uid)
        room = self.rooms.get(worker)
        if room is not None:
            room.release(uid)
        self._ended(uid)

    def in_line(self, uid: str) -> bool:
        """Whether the Job waits in a line the placer wakes from: for room, or for its tenant's quota."""
        return uid in self.waiting or any(uid in w for w in self._over_quota.values())

    def recheck(self, uid: str) -> float | None:
        return recheck_after(self.in_line(uid), self.cfg.resync_period)

    def hold_ended(self, uid: str) -> list[str]:
        """The workers the Job, first in line for them, no longer holds because its headOfLineHold
        ran out (empty while it still holds, or when it held nothing)."""
        hold, since, now = self.cfg.head_of_line_hold, self.waiting.since(uid), self.clock()
        if since is None or hold <= 0 or holds(since, since, now, hold):
            return []
        return sorted(w for w in self.waiting[uid].could if self.waiting.first(w, now) == uid)

    def _stop_waiting(self, uid: str) -> None:
        self._drop_quota_wait(uid)
        self._unhold(uid)
        gone = self.waiting.pop(uid)
        self._why.pop(uid, None)
        if gone is not None:
            metrics.JOBS_WAITING_FOR_ROOM.set(len(self.waiting))
            self.wake_heads(gone.could)  # it held these workers against the Jobs behind it

    def _unhold(self, uid: str) -> None:
        """No longer held for a lapse: a Job placed (or gone) before it is not kept until then, which
        a long headOfLineHold would make hours."""
        at = self._held_at.pop(uid, None)
        if at is None or at not in self._held:
            return
        by_worker = self._held[at]
        for w in [w for w, held in by_worker.items() if held.pop(uid, None) is not None and not held]:
            del by_worker[w]
        if not by_worker:
            del self._held[at]

    def _drop_quota_wait(self, uid: str) -> None:
        for tenant, waiting in list(self._over_quota.items()):
            if waiting.pop(uid, None) is not None and not waiting:
                del self._over_quota[tenant]

    def _ended(self, uid: str) -> None:
        """The Job holds nothing any more: its tenant's quota and share free up."""
        gone = self.running.drop(uid)
        if gone is None:
            return
        waiting = self._over_quota.get(gone.tenant)
        if waiting and self.wake is not None:
            self.wake([key for _, key in heapq.nsmallest(QUOTA_WAKES, waiting.values())])
        if gone.worker:
            self.room_freed(gone.worker)  # (and the order of the line may change)

    def room_freed(self, worker: str) -> None:
        """Room may have appeared on ``worker`` (a Job or pod there ended, a node changed): the first in
        its line looks again (if it cannot use it, :meth:`_pass_on` wakes those behind it)."""
        self.wake_heads([worker])

    def _pass_on(self, uid: str, could: Iterable[str], now: float) -> None:
        """The Job first in line for a worker that has some room looked and could not use it: the next
        BEHIND_WAKES there look (a smaller Job, a backfill). Never the Job itself, so a head that never
        fits does not wake itself in a loop; the Jobs woken wake no one unless one is placed (then the
        first looks again, and the chain goes on while room is taken). At most once per worker every
        WAITING_RECHECK seconds: room appears in small pieces many times a second in a busy fleet, and
        waking 8 Jobs at each piece doubled the passes per Job in bench placement --multitenant."""
        if self.wake is None:
            return
        behind: list[str] = []
        for w in could:
            if now - self._passed_on.get(w, -WAITING_RECHECK) < WAITING_RECHECK:
                continue
            if self.waiting.first(w, now) == uid and self._has_room(w):
                self._passed_on[w] = now
                behind += [u for u in self.waiting.best(w, now, BEHIND_WAKES + 1) if u != uid and u not in behind]
        self._wake(behind)

    def _has_room(self, worker: str) -> bool:
        """Whether a node of the worker shows free cpu and a free pod slot (a hint: each woken Job's fit decides)."""
        room = self.rooms.get(worker)
        return room is not None and room.synced and any(
            n.ready and not n.cordoned and n.free("cpu") > 0 and n.free(PODS) > 0 for n in room.rooms())

    def wake_waiting(self, behind: int = 0) -> None:
        """The sweep that stands for the waiting Jobs' timers: the first in every worker's line looks
        again (room may have appeared unseen, a rank may have changed with time), ``behind`` more,
        and the Jobs whose hold lapsed since the last sweep (:meth:`_lapsed`)."""
        uids = self._heads(self.waiting.workers(), behind)
        self._wake(uids)
        # in turn, not ahead: a hold lapses for many Jobs at once, and ahead of the queue they kept
        # Complete mirroring waiting (status p99 14 s in bench mirror 10000); the first in line for
        # any room that appears is still woken ahead
        self._wake([u for u in self._lapsed() if u not in uids], urgent=False)

    def wake_heads(self, workers: Iterable[str], behind: int = 0) -> None:
        """Look again at once at the Job first in line for each of ``workers`` (room may be there),
        at the best-ranked one still holding it when the first's hold lapsed (line.heads), and at
        the ``behind`` best-ranked after the first."""
        self._wake(self._heads(workers, behind))

    def _heads(self, workers: Iterable[str], behind: int) -> list[str]:
        workers, now = sorted(set(workers)), self.clock()
        uids = heads(self.waiting, workers, now, self.cfg.head_of_line_hold)
        for w in workers if behind else ():
            uids += [u for u in self.waiting.best(w, now, behind + 1) if u not in uids]
        return uids

    def _lapsed(self) -> list[str]:
        """Jobs held by a Job ahead on workers where they had room, whose hold has lapsed: the
        best-ranked first, per worker only as many as the room there takes now (counted in pods of
        the best-ranked one's shape); if that room is taken, placing them wakes the first in line,
        and a first that cannot use what is left wakes those behind. Not a timer each: the Jobs a
        burst's head held share its lapse, and at 10,000 Jobs 4,900 passes woke in the same second
        (results/mirror-10000-room-wake.json, t = 257 s)."""
        now = self.clock()
        due: dict[str, dict[str, tuple[PodShape | None, int]]] = {}
        for at in [at for at in self._held if at <= now]:
            for w, held in self._held.pop(at).items():
                due.setdefault(w, {}).update(held)
                for uid in held:
                    if self._held_at.get(uid) == at:
                        del self._held_at[uid]
        out: list[str] = []
        for w, held in sorted(due.items()):
            ranked = sorted((u for u in held if u in self.waiting and u not in out),
                            key=lambda u: self.waiting.rank(u, now))
            if ranked:
                out += ranked[:self._jobs_fitting(w, *held[ranked[0]], len(ranked))]
        return out

    def _jobs_fitting(self, worker: str, shape: PodShape | None, want: int, most: int) -> int:
        """How many Jobs of ``want`` pods of ``shape`` the worker's room takes now, up to ``most``
        (BEHIND_WAKES where its room or the shape is not known)."""
        room = self.rooms.get(worker)
        if shape is None or room is None or not room.synced or not room.nodes.cache:
            return BEHIND_WAKES
        return room.fit(shape, want * most).now // max(want, 1)

    def _wake(self, uids: list[str], urgent: bool = True) -> None:
        if self.wake is not None and uids:
            self.wake([QueueKey(self._kind_of.get(u, ""), self.waiting[u].key) for u in uids], urgent=urgent)

    # -- what it shows ---------------------------------------------------------------------------

    def queue(self) -> list[QueueEntry]:
        """Every Job waiting in the manager, in the order it would be placed (room waiters by rank,
        then quota waiters by tenant order)."""
        now = self.clock()
        ranked = sorted(self.waiting, key=lambda u: self.waiting.rank(u, now))
        first_of = {self.waiting.first(w, now): w for w in self.workers}
        out = []
        for uid in ranked:
            w = self.waiting[uid]
            starts = None
            if uid in first_of:
                at = self.starts_at(first_of[uid], w.demand, now)
                starts = None if at == float("inf") else max(0.0, at - now)
            out.append(QueueEntry(self._kind_of.get(uid, ""), w.key, w.tenant, w.priority, self.share(w.tenant),
                                  now - (self.waiting.since(uid) or now), self._why.get(uid, ""), starts))
        for tenant, waiting in sorted(self._over_quota.items()):
            for uid, (within, qk) in sorted(waiting.items(), key=lambda kv: kv[1][0]):
                out.append(QueueEntry(qk.kind, qk.key, tenant, -within[0], self.share(tenant), 0.0,
                                      self._why.get(uid, "")))
        return out

    def export(self) -> None:
        """Per-tenant gauges: running Jobs, waiting Jobs, dominant share, quota used."""
        waiting: dict[str, int] = {}
        for uid in self.waiting:
            t = self.waiting[uid].tenant
            waiting[t] = waiting.get(t, 0) + 1
        for t, q in self._over_quota.items():
            waiting[t] = waiting.get(t, 0) + len(q)
        for t in {*self.running.tenants(), *waiting, *self._quotas}:
            metrics.TENANT_RUNNING.labels(t).set(self.running.jobs(t))
            metrics.TENANT_WAITING.labels(t).set(waiting.get(t, 0))
            metrics.TENANT_SHARE.labels(t).set(self.share(t))
            quota = self._quotas.get(t)
            if quota is not None:
                used = self.running.usage(t)
                for r, limit in quota.resources.items():
                    metrics.TENANT_QUOTA_USED.labels(t, r).set(used.get(r, 0) / limit if limit else 0.0)
                if quota.jobs:
                    metrics.TENANT_QUOTA_USED.labels(t, "jobs").set(self.running.jobs(t) / quota.jobs)
