"""A manager and its workers on :mod:`testkit.fakecluster`, wired to the real reconciler.

Everything above the HTTP layer is the product's own: the informers (list + watch on the fake
servers), ``WorkerCluster`` (probe, identity, call slots), the event recorder, the kind (the Job
kind unless ``kind=`` names another, e.g. testkit.widget's) and the ``Reconciler``. A unit table
builds a fleet, shapes the servers (seed objects, inject a refusal with ``react``), runs passes
with :meth:`FakeFleet.sync` and asserts on what the servers hold and which calls reached them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from kruntime.events import EventRecorder, ObjectEvents
from kruntime.informer import Informer
from kruntime.resources import NODES, Obj
from mirror.config import Config
from mirror.jobs.kind import JOB_KIND
from mirror.kinds import MirroredKind
from mirror.placement import policy_for
from mirror.reconciler import Reconciler
from mirror.room.view import RoomView
from mirror.workers import WorkerCluster
from testkit.fakecluster import FakeApiServer

CONTROLLER = "jobmirror.dev/mirror"
MANAGER_IDENTITY = "manager-cluster-uid"


def job(name: str, *, namespace: str = "default", suspend: bool = False, parallelism: int = 1,
        completions: int = 1, annotations: dict[str, str] | None = None, managed_by: str = CONTROLLER,
        requests: dict[str, str] | None = None) -> Obj:
    """A manager Job as a user writes it (one pod, claimed by jobmirror; ``requests`` for its container)."""
    container: Obj = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
            "spec": {"managedBy": managed_by, "suspend": suspend, "parallelism": parallelism,
                     "completions": completions, "backoffLimit": 6, "completionMode": "NonIndexed",
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"restartPolicy": "Never",
                                           "containers": [container]}}}}


@dataclass
class FakeFleet:
    cfg: Config
    manager: FakeApiServer
    workers: dict[str, FakeApiServer]
    reconciler: Reconciler
    clusters: dict[str, WorkerCluster]
    jobs: Informer
    recorder: EventRecorder
    #: the kind the fleet mirrors (its manager objects and copies are read and written as this kind)
    kind: MirroredKind = JOB_KIND
    _tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    async def create(self, obj: Obj) -> Obj:
        """Create a manager object through the API, as a user does, and wait until the cache has it."""
        ns = obj["metadata"]["namespace"]
        created = await self.manager.client("user").create(self.kind.resource, ns, obj)
        await self.settle()
        return created

    def job(self, name: str, namespace: str = "default") -> Obj | None:
        return self.manager.stored(self.kind.resource.path(namespace, name))

    def copy(self, worker: str, name: str, namespace: str = "default") -> Obj | None:
        return self.workers[worker].stored(self.kind.resource.path(namespace, name))

    async def sync(self, name: str, namespace: str = "default") -> float | None:
        """One reconcile pass of ``namespace/name``, then let every cache catch up."""
        after = await self.reconciler.reconcile(f"{namespace}/{name}")
        await self.settle()
        return after

    async def settle(self) -> None:
        """Let the watches deliver what the servers hold and the event writers drain."""
        for _ in range(20):
            await asyncio.sleep(0)
        if self.recorder._queue is not None:
            await asyncio.wait_for(self.recorder._queue.join(), 5)

    def events(self, name: str, namespace: str = "default") -> list[tuple[str, str]]:
        """(reason, message) of the Events written about manager Job ``namespace/name``."""
        out = []
        for (res, ns, _), ev in self.manager.objects.items():
            inv = ev.get("involvedObject") or {}
            if res == "/v1/events" and ns == namespace and inv.get("name") == name:
                out.append((str(ev.get("reason")), str(ev.get("message"))))
        return out

    def reasons(self, name: str, namespace: str = "default") -> list[str]:
        return [r for r, _ in self.events(name, namespace)]

    async def close(self) -> None:
        tasks = [*self._tasks, *self.recorder._tasks]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def fake_fleet(workers: tuple[str, ...] = ("worker-1", "worker-2"), *, nodes: dict[str, list[Obj]] | None = None,
                     labels: dict[str, dict[str, str]] | None = None, kind: MirroredKind = JOB_KIND,
                     clock: Callable[[], float] = time.monotonic, **settings: Any) -> AsyncIterator[FakeFleet]:
    """A manager and ``workers`` on fake servers, probed, admitted and synced; closed on exit.

    ``kind``: what the fleet mirrors (the Job kind unless a test names another); ``clock``: the
    reconciler's monotonic clock (backoffs, exclusions), for tables that step time.

    ``nodes``: per worker, Node objects to seed, with a room view per worker watching its fake
    Nodes and Pods (placement RoomAware, the default); without them no room is known.
    """
    entries = [{"name": w, "kubeconfig": f"/fake/{w}", "labels": (labels or {}).get(w, {})} for w in workers]
    # The tables run Jobs in `default`, which a controller uses on workers only when named (issue 32).
    cfg = Config.model_validate({"workers": entries, "controllerName": CONTROLLER,
                                 "workerNamespaces": ["default", "*"], **settings})
    manager = FakeApiServer()
    servers = {w: FakeApiServer() for w in workers}
    for worker, objs in (nodes or {}).items():
        for n in objs:
            servers[worker].seed(NODES.path(), n)
    rooms = {w: RoomView(w, servers[w].client(w)) for w in workers} if nodes is not None else {}
    origin = cfg.origin_for(MANAGER_IDENTITY)
    clusters = {}
    for w in cfg.workers:
        cluster = WorkerCluster(w, servers[w.name].client(w.name), kinds=[kind], origin=origin)
        cluster.admit(f"{w.name}-cluster-uid", is_manager=False)
        await cluster.probe_once()
        clusters[w.name] = cluster
    client = manager.client("manager")
    jobs = Informer(client, kind.resource)
    recorder = EventRecorder(client, "jobmirror")
    reconciler = Reconciler(cfg, kind, client, jobs, clusters, ObjectEvents(recorder, kind.resource),
                            policy_for(cfg.placement.value), manager_cluster=MANAGER_IDENTITY, rooms=rooms,
                            clock=clock)
    fleet = FakeFleet(cfg, manager, servers, reconciler, clusters, jobs, recorder, kind)
    informers = [jobs, *(i for c in clusters.values() for i in c.informers()),
                 *(i for r in rooms.values() for i in r.informers())]
    fleet._tasks = [asyncio.create_task(i.run()) for i in informers]
    try:
        await asyncio.wait_for(asyncio.gather(*(i.wait_synced() for i in informers)), 5)
        for c in clusters.values():
            await c.probe_once()  # healthy now that its caches have synced
        yield fleet
    finally:
        await fleet.close()


