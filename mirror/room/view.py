"""One worker's room, kept from watches of its Nodes and its non-terminal Pods (no agent, no CRD).

Karmada's scheduler-estimator does this per member cluster with node and pod informers; here
the pod watch filters terminal pods out on the server (``status.phase``) and each cached pod is
cut down to what the fit needs (its node, its effective requests, its host ports), so memory
follows the running pods, not their specs. Per node, what its pods request is kept up to date
from the watch events, so asking for a Job's fit costs the nodes, not the pods. The rooms
themselves are kept between fits, since every placement asks every worker: a node's room is
made again when the node or a pod bound to it changes, the reservations are applied again
after such a change or when one ends, and a new one is applied on top of the kept rooms.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Generic, TypeVar

from kruntime.client import ClusterClient
from kruntime.informer import Informer, RecordInformer
from kruntime.resources import NODES, PODS, PRIORITY_CLASSES, Obj, Resource
from mirror import metrics
from mirror.room.fit import EverMemo, NodeRoom, WorkerFit, node_room, pods_fitting_now, worker_fit
from mirror.room.quantity import HUGE, show
from mirror.room.requests import PODS as POD_SLOTS
from mirror.room.requests import HostPort, PodShape, host_ports, pod_requests

#: pods that still hold room on their node (a terminal pod frees it)
NOT_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"


#: the label the Job controller puts on a Job's pods: how a reservation recognises its pods
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def is_daemon_pod(metadata: Mapping[str, Any]) -> bool:
    """Whether a DaemonSet controls the pod: it stays on its node, so what it takes is never free."""
    return any(ref.get("kind") == "DaemonSet" and ref.get("controller") and
               str(ref.get("apiVersion", "")).startswith("apps/") for ref in metadata.get("ownerReferences") or [])


log = logging.getLogger(__name__)

#: What a pod whose requests cannot be read is counted as taking: more cpu and memory than any
#: node has, and every pod slot of its node (``slots``) — never less than it may really take.
UNREADABLE_REQUESTS = {"cpu": HUGE, "memory": HUGE}
#: How many keys are remembered as logged already (an unreadable pod is logged once, not per event).
_LOGGED_MAX = 4096
_logged: OrderedDict[str, None] = OrderedDict()


def _log_once(key: str, message: str, *args: object) -> None:
    """Log a warning about ``key`` the first time only (the last ``_LOGGED_MAX`` keys are
    remembered): every status update of a pod is a watch event."""
    if key in _logged:
        _logged.move_to_end(key)
        return
    _logged[key] = None
    if len(_logged) > _LOGGED_MAX:
        _logged.popitem(last=False)
    log.warning(message, *args)


K = TypeVar("K", bound=Hashable)


class _Sharing(Generic[K]):
    """One object for equal values seen lately, so pod records share what repeats (a worker's pods
    come from few templates, sit on few nodes and namespaces, and a Job's pods arrive together).
    Past ``size`` values the table starts again: it never grows with the pods, and unlike
    ``sys.intern`` it adds nothing to a table the whole process shares."""

    def __init__(self, size: int) -> None:
        self._seen: dict[K, K] = {}
        self._size = size

    def __call__(self, value: K) -> K:
        if len(self._seen) >= self._size:
            self._seen.clear()
        return self._seen.setdefault(value, value)


_shared_names: _Sharing[str] = _Sharing(8192)
_shared_requests: _Sharing[tuple[tuple[str, int], ...]] = _Sharing(4096)
UNREADABLE = tuple(sorted(UNREADABLE_REQUESTS.items()))


@dataclass(slots=True)
class SlimPod:
    """What the room view keeps of a pod (never changed once made).

    Slotted, with its repeating parts shared (equal namespace, node and Job names one string,
    equal requests one tuple): a cached pod costs ~250 B with its key where a dict of the same
    fields cost ~1,200 (tests/unit/test_room_memory.py). Its name is its cache key's."""

    #: its resourceVersion: an int when it is digits (smaller; only compared for equality)
    version: int | str
    namespace: str
    #: the node it is bound to ("": not bound yet)
    node: str
    #: the Job it belongs to (its batch.kubernetes.io/job-name label; "": none)
    job: str
    #: whether a DaemonSet controls it
    daemon: bool
    #: its effective requests, by resource (sorted)
    requests: tuple[tuple[str, int], ...]
    #: its host ports (protocol, port, ip), sorted
    ports: tuple[tuple[str, int, str], ...]
    #: the node's pod slots it takes (every slot for a pod whose requests cannot be read)
    slots: int = 1


def takes_the_same(a: SlimPod, b: SlimPod) -> bool:
    """Whether two records of a pod take the same room (all but the version: a status update)."""
    return (a.node == b.node and a.requests == b.requests and a.ports == b.ports and a.slots == b.slots
            and a.job == b.job and a.namespace == b.namespace and a.daemon == b.daemon)


def _version(rv: object) -> int | str:
    return int(rv) if isinstance(rv, str) and rv.isdigit() else str(rv or "")


def slim_pod(pod: Obj) -> SlimPod:
    """What the room view keeps of a pod: its node, effective requests and host ports, the Job it
    belongs to (to release that Job's reservation as its pods are bound) and whether a DaemonSet
    controls it.

    A pod whose requests or ports cannot be read (whoever may create pods in a worker namespace
    writes them) is counted as taking its whole node, and logged once: this runs on every watch
    event of the pod and must not raise, or the room view's watch would stop."""
    md, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    version, namespace = _version(md.get("resourceVersion")), md.get("namespace")
    namespace = _shared_names(namespace) if isinstance(namespace, str) else ""
    try:
        job = (md.get("labels") or {}).get(JOB_NAME_LABEL) or ""
        return SlimPod(version, namespace, _shared_names(spec.get("nodeName") or ""), _shared_names(job),
                       is_daemon_pod(md), _shared_requests(tuple(sorted(pod_requests(spec).items()))),
                       tuple(sorted((p.protocol, p.port, p.ip) for p in host_ports(spec))))
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        _log_once(str(md.get("uid") or f"{md.get('namespace')}/{md.get('name')}"),
                  "pod %s/%s: requests not readable (%s); counted as taking its whole node",
                  md.get("namespace"), md.get("name"), str(exc)[:200])
        node = spec.get("nodeName")
        return SlimPod(version, namespace, _shared_names(node) if isinstance(node, str) else "", "", False,
                       UNREADABLE, (), HUGE)


def pod_version(pod: SlimPod) -> int | str:
    return pod.version


def pod_informer(client: ClusterClient) -> RecordInformer[SlimPod]:
    """A worker's non-terminal pods, each kept as a :class:`SlimPod`."""
    return RecordInformer(client, PODS, field_selector=NOT_TERMINAL, transform=slim_pod, version=pod_version)


def slim_node(node: Obj) -> Obj:
    """What the room view keeps of a node: labels, taints, cordon, allocatable, Ready."""
    md, spec, st = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = [c for c in st.get("conditions") or [] if c.get("type") == "Ready"]
    return {"metadata": {k: md[k] for k in ("name", "uid", "resourceVersion", "labels") if k in md},
            "spec": {k: spec[k] for k in ("taints", "unschedulable") if k in spec},
            "status": {"allocatable": st.get("allocatable") or st.get("capacity") or {}, "conditions": ready}}


def _node_facts(node: Obj) -> tuple[Any, ...]:
    """What the fit reads of a slim node (its resourceVersion changes on every heartbeat)."""
    md = node.get("metadata") or {}
    return md.get("labels"), node.get("spec"), node.get("status")


def room_totals(rooms: Sequence[NodeRoom]) -> dict[str, dict[str, int]]:
    """Allocatable and requested per resource over the Ready, uncordoned nodes."""
    allocatable: dict[str, int] = {}
    requested: dict[str, int] = {}
    for r in rooms:
        if r.ready and not r.cordoned:
            for name, v in r.allocatable.items():
                allocatable[name] = allocatable.get(name, 0) + v
            for name, v in r.requested.items():
                requested[name] = requested.get(name, 0) + v
    return {"allocatable": allocatable, "requested": requested}


#: The largest magnitude a gauge is set to: a float holds it (an int past ~1.8e308 does not convert).
GAUGE_MAX = 10**300


def gauge_value(value: int | float) -> float:
    """``value`` as a finite float for a gauge, clamped to ``±GAUGE_MAX`` (NaN as 0)."""
    if isinstance(value, float):
        return 0.0 if math.isnan(value) else max(-float(GAUGE_MAX), min(float(GAUGE_MAX), value))
    return float(max(-GAUGE_MAX, min(GAUGE_MAX, value)))


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
        #: the same for its DaemonSet pods alone (what "ever" judges)
        self.daemon_requested: Counter[str] = Counter()
        self.daemon_pods = 0
        self.daemon_ports: Counter[HostPort] = Counter()
        #: the :attr:`Loads.version` of its last change: a room made at this version is current
        self.version = 0

    def room(self, node: NodeRoom) -> NodeRoom:
        """``node`` with what these pods take from it."""
        return _taking(node, {r: v for r, v in self.requested.items() if v}, self.pods,
                       frozenset(p for p, n in self.ports.items() if n > 0),
                       ({r: v for r, v in self.daemon_requested.items() if v}, self.daemon_pods,
                        frozenset(p for p, n in self.daemon_ports.items() if n > 0)))

    def add(self, pod: SlimPod, sign: int) -> None:
        # Item by item, not Counter.update: this runs for each of a fleet's million pods at a
        # relist, and update's checks were most of its time (1.8 us a pod here, against 0.5).
        requested, ports = self.requested, self.ports
        for r, v in pod.requests:
            requested[r] += sign * v
        self.pods += sign * pod.slots
        for proto, port, ip in pod.ports:
            ports[HostPort(proto, port, ip)] += sign
        if pod.daemon:
            for r, v in pod.requests:
                self.daemon_requested[r] += sign * v
            self.daemon_pods += sign
            for proto, port, ip in pod.ports:
                self.daemon_ports[HostPort(proto, port, ip)] += sign


@dataclass(frozen=True)
class Reservation:
    """Room promised to a copy just placed on the worker, until its pods are bound to nodes.

    Between the placement and the scheduler binding the copy's pods, the nodes look as free as
    before; without it, a backlog placed in one burst would all go to the first roomy worker.
    """

    namespace: str
    #: the copy's name on the worker (its pods carry it in batch.kubernetes.io/job-name)
    job: str
    shape: PodShape
    pods: int
    #: monotonic time after which an unbound pod is the scheduler's business, not ours
    until: float


def _taking(room: NodeRoom, requested: Mapping[str, int], pod_count: int, ports: frozenset[HostPort],
            daemons: tuple[Mapping[str, int], int, frozenset[HostPort]] | None = None) -> NodeRoom:
    """``room`` with these pods on it, of which ``daemons`` (requests, count, ports) are DaemonSet
    pods — unchanged when not given (what ``dataclasses.replace`` does, without its cost per call)."""
    d = (room.daemon_requested, room.daemon_pods, room.daemon_ports) if daemons is None else daemons
    return NodeRoom(room.name, room.labels, room.allocatable, room.taints, room.cordoned, room.ready,
                    requested, pod_count, ports, *d)


def with_reservations(rooms: Sequence[NodeRoom], reservations: Iterable[Reservation],
                      bound: Mapping[tuple[str, str], int]) -> list[NodeRoom]:
    """``rooms`` with the pods of each reservation not bound yet (``bound`` by namespace and Job)
    taken from the first nodes where they fit now, as the scheduler would most likely put them.

    Each reservation is applied to what the ones before it left, so the rooms of a list with
    one more reservation at its end are this function's answer for the list, then for the one.
    Reservations only take room, so a node that had no room for a pod shape has none for the next
    reservation of that shape either: its search starts at the first node the last one of the shape
    found room on (a backlog of reservations walks the full nodes once per shape, not once each)."""
    out = list(rooms)
    #: per shape, the first node that had room for it when last looked at (those before had none)
    start: dict[Hashable, int] = {}
    for r in reservations:
        left = r.pods - bound.get((r.namespace, r.job), 0)
        if left <= 0:
            continue
        first = None
        for i in range(start.get(r.shape.key, 0), len(out)):
            room = out[i]
            n = pods_fitting_now(r.shape, room, left)
            if n:
                first = i if first is None else first
                requested = dict(room.requested)
                for k, v in r.shape.requests.items():
                    requested[k] = requested.get(k, 0) + v * n
                out[i] = _taking(room, requested, room.pod_count + n, room.ports)
                left -= n
                if left <= 0:
                    break
        start[r.shape.key] = len(out) if first is None else first
    return out


@dataclass(frozen=True)
class _NodeCache:
    """One node's room and what it was made from: the (slim) node object and its load's version."""

    node: Obj
    static: NodeRoom
    version: int
    room: NodeRoom


class Loads:
    """What the non-terminal pods of a worker take from its nodes, kept pod by pod (pure)."""

    def __init__(self) -> None:
        self._by_node: dict[str, _NodeLoad] = {}
        #: non-terminal pods not bound to a node yet
        self.pending = 0
        #: bound non-terminal pods per (namespace, Job name): what a reservation no longer holds
        self.bound: Counter[tuple[str, str]] = Counter()
        #: counts the changes of bound pods: rooms (and reservations' use of them) made before are stale
        self.version = 0
        self._rooms: dict[str, _NodeCache] = {}

    def count(self, pod: SlimPod | None, sign: int) -> None:
        """Add (``sign`` 1) or take back (-1) one pod, as :func:`slim_pod` cut it."""
        if pod is None:
            return
        node = pod.node
        if not node:
            self.pending += sign
            return
        load = self._by_node.setdefault(node, _NodeLoad())
        load.add(pod, sign)
        self.version += 1
        load.version = self.version
        if pod.job:
            key = (pod.namespace, pod.job)
            self.bound[key] += sign
            if self.bound[key] <= 0:
                del self.bound[key]

    def rooms(self, nodes: Sequence[Obj]) -> list[NodeRoom]:
        """Every node with what its pods take from it now.

        A node's room is kept until its object is replaced (a watch event; allocatable is parsed
        once per node object) or a pod bound to it changes: most fits find nothing changed."""
        out, cache = [], {}
        for node in nodes:
            name = (node.get("metadata") or {}).get("name", "")
            load = self._by_node.get(name)
            version = 0 if load is None else load.version
            hit = self._rooms.get(name)
            if hit is None or hit.node is not node or hit.version != version:
                static = hit.static if hit is not None and hit.node is node else node_room(node)
                hit = _NodeCache(node, static, version, static if load is None else load.room(static))
            cache[name] = hit
            out.append(hit.room)
        self._rooms = cache
        return out


def rooms_of(nodes: Sequence[Obj], pods: Sequence[Obj]) -> tuple[list[NodeRoom], int]:
    """The rooms of ``nodes`` given the non-terminal ``pods`` read once (``status``), and the pending count."""
    loads = Loads()
    for p in pods:
        loads.count(slim_pod(p), +1)
    return loads.rooms(nodes), loads.pending


#: how long room stays reserved for a placed copy whose pods are not bound yet
RESERVATION_SECONDS = 60.0


@dataclass(frozen=True)
class _Reserved:
    """Rooms with reservations, and what they were made from."""

    #: :attr:`Loads.version` and :attr:`RoomView._reserved_version` then
    versions: tuple[int, int]
    #: the rooms without reservations (compared by identity: :meth:`Loads.rooms` keeps them)
    base: Sequence[NodeRoom]
    #: how many of the reservations, in order, are applied
    applied: int
    rooms: list[NodeRoom]


def _same(a: Sequence[NodeRoom], b: Sequence[NodeRoom]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _name_only(obj: Obj) -> Obj:
    md = obj.get("metadata") or {}
    return {"metadata": {"name": md.get("name", ""), "resourceVersion": md.get("resourceVersion", "")}}


def _namespaced_name_only(obj: Obj) -> Obj:
    md = obj.get("metadata") or {}
    return {"metadata": {"namespace": md.get("namespace", ""), "name": md.get("name", ""),
                         "resourceVersion": md.get("resourceVersion", "")}}


SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
#: the ServiceAccount a pod gets when it names none, made in every namespace by the worker's own
#: kube-controller-manager (also in a namespace the controller has just created): never judged missing
DEFAULT_SERVICE_ACCOUNT = "default"


def service_account_of(template: Obj) -> str:
    """The ServiceAccount a pod template runs as ("" or ``default``: the namespace's default); the
    deprecated ``serviceAccount`` counts when ``serviceAccountName`` is unset, as the API server reads it."""
    spec = template.get("spec") or {}
    return str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "")


class RoomView:
    """The room of one worker, from informers on its watch client: its nodes and non-terminal pods (the
    room), its PriorityClasses and ServiceAccounts by name (what its admission would refuse)."""

    def __init__(self, worker: str, client: ClusterClient, *, namespaces: Sequence[str] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.worker = worker
        self.nodes = Informer(client, NODES, transform=slim_node)
        self.pods = pod_informer(client)
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node)
        #: the worker's PriorityClasses, by name only: a copy whose pods name one it lacks never
        #: creates a pod there (admission refuses them), so the fit says "never" for that worker
        self.classes = Informer(client, PRIORITY_CLASSES, transform=_name_only)
        #: the worker's ServiceAccounts, by namespace and name only, kept for the namespaces copies go to
        #: (the controller's namespaces; all when it claims all): the ServiceAccount admission plugin
        #: refuses every pod naming one its namespace lacks, so that fit is "never". One watch, on a
        #: connection of its own (the worker's watch pool is sized for the copy, event and room watches).
        self.namespaces = frozenset(namespaces)
        self.accounts = Informer(client.sibling("room-accounts", pool_size=2), SERVICE_ACCOUNTS,
                                 transform=_namespaced_name_only, keep=self._in_namespaces)
        self.loads = Loads()
        #: which nodes could ever run a pod shape, kept while their Node objects stay
        self._ever = EverMemo()
        #: the node watch's events so far, and the rooms made at (pod changes, node events)
        self._node_events = 0
        self._base: tuple[tuple[int, int], Mapping[str, Obj], list[NodeRoom]] | None = None
        #: allocatable over the schedulable nodes, and the node events and cache it was summed at
        self._allocatable: tuple[int, Mapping[str, Obj], dict[str, int]] | None = None
        #: in the order they were made (a new one is applied on top of the cached rooms)
        self.reserved: dict[str, Reservation] = {}
        #: counts reservations dropped or replaced: the cached rooms must be remade
        self._reserved_version = 0
        #: no reservation lapses before this (may be earlier than the first that does: a look too many)
        self._next_lapse = float("inf")
        #: the :attr:`Loads.version` the reservations were last checked for bound pods at (-1: check)
        self._checked_at = -1
        self._cached: _Reserved | None = None
        self.clock = clock
        #: called with the worker's name when room may have appeared (a bound pod left, a node
        #: changed): Jobs waiting in the manager for it are looked at again at once
        self.on_room: Callable[[str], None] | None = None

    def reserve(self, uid: str, namespace: str, job: str, shape: PodShape, pods: int) -> None:
        """Hold room for the copy of manager Job ``uid`` just placed here, until its pods are bound."""
        r = Reservation(namespace, job, shape, pods, self.clock() + RESERVATION_SECONDS)
        if uid in self.reserved:
            self._reserved_version += 1
        if self.loads.bound.get((namespace, job), 0) >= pods:
            self._checked_at = -1  # bound already: dropped at the next look, as the others
        self.reserved[uid] = r
        self._next_lapse = min(self._next_lapse, r.until)

    def release(self, uid: str) -> None:
        if self.reserved.pop(uid, None) is not None:
            self._reserved_version += 1

    def _room_may_have_appeared(self) -> None:
        if self.on_room is not None:
            self.on_room(self.worker)

    def informers(self) -> list[RecordInformer[Any]]:
        return [self.nodes, self.pods, self.classes, self.accounts]

    def _in_namespaces(self, obj: Obj) -> bool:
        return not self.namespaces or (obj.get("metadata") or {}).get("namespace") in self.namespaces

    def lacks_class(self, name: str) -> bool:
        """Whether the worker surely serves no PriorityClass ``name`` (False while its classes are not known:
        a worker that does not let us list them is judged by its pods' admission, as before)."""
        return self.classes.synced.is_set() and self.classes.get(name) is None

    def lacks_account(self, namespace: str, name: str) -> bool:
        """Whether the worker surely has no ServiceAccount ``namespace/name``: False for the default one
        (its kube-controller-manager makes it, even in a namespace created with the copy) and while the
        accounts are not known (not listed yet, or not readable: unknown is not never; the pods'
        admission judges, as before)."""
        if not name or name == DEFAULT_SERVICE_ACCOUNT or not self.accounts.synced.is_set():
            return False
        if self.namespaces and namespace not in self.namespaces:
            return False
        return self.accounts.get(f"{namespace}/{name}") is None

    @property
    def synced(self) -> bool:
        return self.nodes.synced.is_set() and self.pods.synced.is_set()

    @property
    def pending(self) -> int:
        return self.loads.pending

    def _on_pod(self, etype: str, old: SlimPod | None, new: SlimPod) -> None:
        if etype == "MODIFIED" and old is not None and takes_the_same(old, new):
            return  # a status update (most of a pod's events): the kept rooms and reservations stay valid
        self.loads.count(old, -1)
        if etype != "DELETED":
            self.loads.count(new, +1)
        elif old is not None and old.node:  # a bound pod ended (terminal pods leave the
            self._room_may_have_appeared()  # watch) or went

    def _on_node(self, etype: str, old: Obj | None, new: Obj) -> None:
        self._node_events += 1  # a new object, if only a heartbeat: the rooms are made from it again
        if etype == "DELETED" or (old is not None and _node_facts(old) == _node_facts(new)):
            return  # a heartbeat: nothing the fit reads changed
        self._room_may_have_appeared()

    def _drop_done(self) -> None:
        """Drop the reservations that lapsed or whose pods are all bound (looking only when one may have)."""
        now = self.clock()
        if self._next_lapse >= now and self._checked_at == self.loads.version:
            return
        done = [u for u, r in self.reserved.items()
                if r.until < now or self.loads.bound.get((r.namespace, r.job), 0) >= r.pods]
        for uid in done:
            del self.reserved[uid]
        if done:
            self._reserved_version += 1
        self._next_lapse = min((r.until for r in self.reserved.values()), default=float("inf"))
        self._checked_at = self.loads.version

    def rooms(self) -> list[NodeRoom]:
        """The nodes with what their pods take, and what copies placed here but not bound yet will.

        Same as :func:`with_reservations` over :meth:`Loads.rooms` every time, but kept: made
        again when a pod, a node or a reservation ended changes it, extended when one is added."""
        token = (self.loads.version, self._node_events)
        base = self._base
        if base is None or base[0] != token or base[1] is not self.nodes.cache:
            base = self._base = (token, self.nodes.cache, self.loads.rooms(self.nodes.items()))
        rooms = base[2]  # else no pod or node changed since (nor was the node cache relisted): as they were
        if not self.reserved:
            return list(rooms)
        self._drop_done()
        versions = (self.loads.version, self._reserved_version)
        c = self._cached
        if c is None or c.versions != versions or c.applied > len(self.reserved) or not _same(c.base, rooms):
            c = _Reserved(versions, rooms, 0, rooms)
        if c.applied < len(self.reserved):
            more = islice(self.reserved.values(), c.applied, None)
            c = _Reserved(versions, c.base, len(self.reserved), with_reservations(c.rooms, more, self.loads.bound))
        self._cached = c
        return list(c.rooms)

    def fit(self, shape: PodShape, want: int) -> WorkerFit:
        return worker_fit(shape, self.rooms(), want, self._ever)

    def totals(self) -> dict[str, dict[str, int]]:
        """Allocatable and requested per resource over schedulable nodes (metrics)."""
        return room_totals(self.rooms())

    def allocatable(self) -> dict[str, int]:
        """Allocatable per resource over schedulable nodes, summed again only when a node changed:
        the fair share's capacity reads it for every worker, and the rooms it was summed from
        change with every pod (50 workers' rooms remade and summed in one turn: 0.2 s, bench fleet)."""
        cached = self._allocatable
        if cached is None or cached[0] != self._node_events or cached[1] is not self.nodes.cache:
            cached = self._allocatable = (self._node_events, self.nodes.cache,
                                          room_totals(self.loads.rooms(self.nodes.items()))["allocatable"])
        return cached[2]

    def export(self) -> None:
        """Set this worker's capacity gauges (called periodically, not per pod event, for every
        worker in turn): values clamped to finite floats, and never raises — one worker's odd
        pods must not stop the gauges of the others."""
        try:
            totals = self.totals()
            for kind, gauge in (("allocatable", metrics.WORKER_ALLOCATABLE), ("requested", metrics.WORKER_REQUESTED)):
                for resource in {*totals["allocatable"], *totals["requested"]}:
                    gauge.labels(self.worker, resource).set(gauge_value(totals[kind].get(resource, 0)))
            metrics.WORKER_PODS_PENDING.labels(self.worker).set(gauge_value(self.pending))
        except Exception as exc:  # a bug here must cost this worker's gauges for one round, no more
            _log_once(f"export {self.worker} {type(exc).__name__}", "worker %s: room metrics not exported: %r",
                      self.worker, exc)

    def describe(self) -> dict[str, Any]:
        return {"nodes": len(self.nodes.cache), "pods": len(self.pods.cache), "pending": self.pending,
                **self.totals()}
