"""What every act of one kind's reconcile passes shares: the clients, the caches, the records.

The reconciler makes one :class:`Acting` per kind and hands it to the modules that perform the
plan's actions (:mod:`mirror.placing`, :mod:`mirror.moves`, :mod:`mirror.remote_copy`,
:mod:`mirror.copy_cleanup`). It holds no rule: the rules are in :mod:`mirror.plan` and the pure
modules it calls; this is the I/O edge and what passes remember.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from kruntime.bounded import LruDict
from kruntime.events import ObjectEvents
from kruntime.resources import Obj, Resource
from mirror.config import Config
from mirror.copy_namespaces import CopyNamespaces
from mirror.decisions import WorkerState, retry_delay
from mirror.event_reasons import EventReason
from mirror.job_memory import JobMemory, Memories, count_refusal, recalled, remember_about
from mirror.kinds import MirroredKind
from mirror.manager_writes import ManagerWrites
from mirror.placer import Placer
from mirror.status_lag import StatusLag
from mirror.worker_calls import WorkerCalls
from mirror.workers import WorkerCluster

#: how many deletion echoes are awaited at most (copies deleted by finalizing passes, not yet seen gone)
MAX_DELETION_ECHOES = 65536


@dataclass(eq=False)
class Acting:
    """The edge the acts of one kind's passes write and read through."""

    cfg: Config
    kind: MirroredKind
    #: our origin (stamped on copies and on the manager objects we claim)
    origin: str
    #: the manager cluster's identity
    manager_cluster: str
    workers: dict[str, WorkerCluster]
    recorder: ObjectEvents
    writes: ManagerWrites
    calls: WorkerCalls
    places: Placer
    namespaces: CopyNamespaces
    memories: Memories
    status_lag: StatusLag
    #: per worker, manager uids whose create we sent there (answered or not)
    attempted: dict[str, set[str]]
    clock: Callable[[], float]
    now: Callable[[], datetime]
    #: uids of copies a finalizing pass deleted (in the background) and went on from: their DELETED
    #: event needs no pass. Bounded: an echo that never comes (a relist found the copy gone) ages out.
    deleted_here: LruDict[str, None] = field(default_factory=lambda: LruDict(MAX_DELETION_ECHOES))

    @property
    def resource(self) -> Resource:
        return self.kind.resource

    def say(self, obj: Obj, what: EventReason, message: str) -> None:
        """An event on the manager object, its reason and type from mirror.event_reasons' one table."""
        self.recorder.event(obj, what.type, what.reason, message)

    def remember_about(self, uid: str) -> JobMemory:
        return remember_about(self.memories, uid)

    def recalled(self, uid: str) -> JobMemory:
        return recalled(self.memories, uid)

    def refusal_delay(self, uid: str, verb: str) -> float:
        """Count one more refusal of ``verb`` for ``uid``; the seconds until it is tried again."""
        return count_refusal(self.remember_about(uid), verb, self.cfg.resync_period)

    def delete_backoff(self, uid: str) -> float:
        """When a copy whose delete was refused (or could not be sent) is tried again."""
        return retry_delay(self.recalled(uid).refusals.get("delete", 0), base=min(self.cfg.resync_period, 5.0))

    def never_sent(self, job: Obj, worker: WorkerCluster) -> bool:
        """True when no copy can exist there: we never sent a create and its cache has none.

        Only trusted once the worker's cache has synced at least once; after a restart
        with the worker already down we cannot know, and wait for workerLostTimeout.
        """
        uid = job["metadata"]["uid"]
        return (worker.synced(self.kind) and uid not in self.attempted[worker.name]
                and worker.copy_of(self.kind, job) is None)

    def worker_states(self, job: Obj) -> WorkerStates:
        """Each worker as a pass sees it (re-read after every action: a call may have found one down)."""
        return WorkerStates(self, job)

    def worker_state(self, job: Obj, name: str) -> WorkerState:
        w = self.workers[name]
        return WorkerState(w.healthy, w.unhealthy_for(), w.synced(self.kind), job["metadata"]["uid"] in
                           self.attempted[name], never_sent=self.never_sent(job, w))

    def copies_of(self, job: Obj) -> dict[str, Obj]:
        """Our copies of ``job``, per worker, from the worker caches."""
        return {name: c for name, w in self.workers.items() if (c := w.copy_of(self.kind, job)) is not None}

    def deletion_echo(self, copy_uid: str) -> bool:
        """Whether a DELETED event of this copy is the echo of a finalizing pass's delete (then forgotten)."""
        if copy_uid not in self.deleted_here:
            return False
        del self.deleted_here[copy_uid]
        return True

    def forget(self, uid: str) -> None:
        """Drop every per-Job record (the maps stay bounded by the Jobs we handle)."""
        for tracked in self.attempted.values():
            tracked.discard(uid)
        self.memories.pop(uid, None)
        self.status_lag.forget(uid)
        self.places.forget(uid)



class WorkerStates(Mapping[str, WorkerState]):
    """Every configured worker's state for one Job, each read when first asked for: a pass of a
    running Job asks for its own worker only, so its cost does not grow with the fleet (50 workers
    read each time were ~170 of an idle pass's ~290 µs)."""

    def __init__(self, acting: Acting, job: Obj) -> None:
        self._acting, self._job = acting, job
        self._read: dict[str, WorkerState] = {}

    def __getitem__(self, name: str) -> WorkerState:
        state = self._read.get(name)
        if state is None:  # an unknown worker: KeyError, as a dict says
            state = self._read[name] = self._acting.worker_state(self._job, name)
        return state

    def __iter__(self) -> Iterator[str]:
        return iter(self._acting.workers)

    def __len__(self) -> int:
        return len(self._acting.workers)


@dataclass(frozen=True)
class Done:
    """The pass is over: look at the object again after ``after`` seconds (None: when an event comes)."""

    after: float | None
