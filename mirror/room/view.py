"""One worker's room, kept from watches of its Nodes and its non-terminal Pods (no agent, no CRD).

Karmada's scheduler-estimator does this per member cluster with node and pod informers; here
the pod watch filters terminal pods out on the server (``status.phase``) and each cached pod is
cut down to what the fit needs (its node, its effective requests, its host ports), so memory
follows the running pods, not their specs. Per node, what its pods request is kept up to date
from the watch events, so asking for a Job's fit costs the nodes, not the pods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from kruntime.client import ClusterClient
from kruntime.informer import Informer
from kruntime.resources import NODES, PODS, Obj
from mirror import metrics
from mirror.room.fit import NodeRoom, WorkerFit, node_room, worker_fit
from mirror.room.quantity import show
from mirror.room.requests import PODS as POD_SLOTS
from mirror.room.requests import HostPort, PodShape, host_ports, pod_requests

#: pods that still hold room on their node (a terminal pod frees it)
NOT_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"


def slim_pod(pod: Obj) -> Obj:
    """What the room view keeps of a pod: its identity, node, effective requests and host ports."""
    md, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    return {"metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in md},
            "nodeName": spec.get("nodeName") or "",
            "requests": pod_requests(spec),
            "ports": sorted((p.protocol, p.port, p.ip) for p in host_ports(spec))}


def slim_node(node: Obj) -> Obj:
    """What the room view keeps of a node: labels, taints, cordon, allocatable, Ready."""
    md, spec, st = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = [c for c in st.get("conditions") or [] if c.get("type") == "Ready"]
    return {"metadata": {k: md[k] for k in ("name", "uid", "resourceVersion", "labels") if k in md},
            "spec": {k: spec[k] for k in ("taints", "unschedulable") if k in spec},
            "status": {"allocatable": st.get("allocatable") or st.get("capacity") or {}, "conditions": ready}}


def room_totals(rooms: Sequence[NodeRoom]) -> dict[str, dict[str, int]]:
    """Allocatable and requested per resource over the Ready, uncordoned nodes."""
    allocatable: Counter[str] = Counter()
    requested: Counter[str] = Counter()
    for r in rooms:
        if r.ready and not r.cordoned:
            allocatable.update(r.allocatable)
            requested.update(r.requested)
    return {"allocatable": dict(allocatable), "requested": dict(requested)}


def free_summary(totals: dict[str, dict[str, int]], pending: int) -> str:
    """``cpu 6500m/8 free, memory 12Gi/16Gi free; 1 pod pending`` (what ``status`` prints per worker)."""
    parts = [f"{r} {show(r, max(0, have - totals['requested'].get(r, 0)))}/{show(r, have)} free"
             for r, have in sorted(totals["allocatable"].items()) if r != POD_SLOTS]
    return (", ".join(parts) or "no schedulable nodes") + f"; {pending} pod{'s' if pending != 1 else ''} pending"


class _NodeLoad:
    """What the pods bound to one node take from it."""

    def __init__(self) -> None:
        self.requested: Counter[str] = Counter()
        self.pods = 0
        self.ports: Counter[HostPort] = Counter()

    def add(self, pod: Obj, sign: int) -> None:
        self.requested.update({r: sign * v for r, v in pod["requests"].items()})
        self.pods += sign
        self.ports.update({HostPort(proto, port, ip): sign for proto, port, ip in pod["ports"]})


class Loads:
    """What the non-terminal pods of a worker take from its nodes, kept pod by pod (pure)."""

    def __init__(self) -> None:
        self._by_node: dict[str, _NodeLoad] = {}
        #: non-terminal pods not bound to a node yet
        self.pending = 0

    def count(self, pod: Obj | None, sign: int) -> None:
        """Add (``sign`` 1) or take back (-1) one pod, as :func:`slim_pod` cut it."""
        if pod is None or "requests" not in pod:
            return
        node = pod["nodeName"]
        if not node:
            self.pending += sign
            return
        self._by_node.setdefault(node, _NodeLoad()).add(pod, sign)

    def rooms(self, nodes: Sequence[Obj]) -> list[NodeRoom]:
        """Every node with what its pods take from it now."""
        out = []
        for node in nodes:
            room = node_room(node)
            load = self._by_node.get(room.name)
            if load is not None:
                room = replace(room, requested={r: v for r, v in load.requested.items() if v},
                               pod_count=load.pods, ports=frozenset(p for p, n in load.ports.items() if n > 0))
            out.append(room)
        return out


def rooms_of(nodes: Sequence[Obj], pods: Sequence[Obj]) -> tuple[list[NodeRoom], int]:
    """The rooms of ``nodes`` given the non-terminal ``pods`` read once (``status``), and the pending count."""
    loads = Loads()
    for p in pods:
        loads.count(slim_pod(p), +1)
    return loads.rooms(nodes), loads.pending


class RoomView:
    """The room of one worker, from two informers on its watch client."""

    def __init__(self, worker: str, client: ClusterClient) -> None:
        self.worker = worker
        self.nodes = Informer(client, NODES, transform=slim_node)
        self.pods = Informer(client, PODS, field_selector=NOT_TERMINAL, transform=slim_pod)
        self.pods.add_handler(self._on_pod)
        self.loads = Loads()

    def informers(self) -> list[Informer]:
        return [self.nodes, self.pods]

    @property
    def synced(self) -> bool:
        return self.nodes.synced.is_set() and self.pods.synced.is_set()

    @property
    def pending(self) -> int:
        return self.loads.pending

    def _on_pod(self, etype: str, old: Obj | None, new: Obj) -> None:
        self.loads.count(old, -1)
        if etype != "DELETED":
            self.loads.count(new, +1)

    def rooms(self) -> list[NodeRoom]:
        return self.loads.rooms(self.nodes.items())

    def fit(self, shape: PodShape, want: int) -> WorkerFit:
        return worker_fit(shape, self.rooms(), want)

    def totals(self) -> dict[str, dict[str, int]]:
        """Allocatable and requested per resource over schedulable nodes (metrics)."""
        return room_totals(self.rooms())

    def export(self) -> None:
        """Set this worker's capacity gauges (called periodically, not per pod event)."""
        totals = self.totals()
        for kind, gauge in (("allocatable", metrics.WORKER_ALLOCATABLE), ("requested", metrics.WORKER_REQUESTED)):
            for resource in {*totals["allocatable"], *totals["requested"]}:
                gauge.labels(self.worker, resource).set(totals[kind].get(resource, 0))
        metrics.WORKER_PODS_PENDING.labels(self.worker).set(self.pending)

    def describe(self) -> dict[str, Any]:
        return {"nodes": len(self.nodes.cache), "pods": len(self.pods.cache), "pending": self.pending,
                **self.totals()}
