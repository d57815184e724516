"""Does one pod of a Job fit a node, a worker — ever, and now?

"Ever": some node could hold the pod if it held only its DaemonSet pods — resources within
allocatable less what those take, none of its host ports held by them, ``nodeSelector`` and
required node affinity match, every NoSchedule/NoExecute taint tolerated. DaemonSet pods count
as part of the node because they stay: a Job that only fits beside none of them would wait
for room that never comes and hold its worker meanwhile (issue 32). A cordoned or NotReady
node still counts (an operator brings it back), so a Job whose worker is only cordoned waits
instead of being refused.
"Now": the node is schedulable and Ready, and its allocatable minus what the pods bound to
it request leaves room for the pod's request, one ``pods`` slot and its host ports.

Modelled as kube-scheduler's filters NodeResourcesFit, NodeAffinity (nodeSelector and
required terms), TaintToleration, NodeUnschedulable, NodePorts. Not modelled: inter-pod
(anti-)affinity, topology spread, volume topology and limits, DRA claims, preemption,
scheduling gates — a copy those keep Pending is caught by the unschedulable timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mirror.room.quantity import amounts, show
from mirror.room.requests import PODS, HostPort, PodShape

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
#: Taints the node lifecycle controller puts on for a passing state (cordoned, not Ready,
#: unreachable, under pressure) and takes off when it passes: they decide "now", never "ever"
#: (a cordoned node carries node.kubernetes.io/unschedulable besides spec.unschedulable).
PASSING_TAINTS = frozenset({UNSCHEDULABLE_TAINT, *(f"node.kubernetes.io/{s}" for s in (
    "not-ready", "unreachable", "memory-pressure", "disk-pressure", "pid-pressure", "network-unavailable"))})


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class NodeRoom:
    """One node as the fit sees it: static facts plus what the pods bound to it take."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    taints: tuple[Taint, ...] = ()
    cordoned: bool = False
    ready: bool = True
    requested: Mapping[str, int] = field(default_factory=dict)
    pod_count: int = 0
    ports: frozenset[HostPort] = frozenset()
    #: what the DaemonSet pods bound to it request (part of ``requested``): never free for a Job
    daemon_requested: Mapping[str, int] = field(default_factory=dict)
    #: how many of ``pod_count`` are DaemonSet pods, and the host ports they hold
    daemon_pods: int = 0
    daemon_ports: frozenset[HostPort] = frozenset()

    def free(self, resource: str) -> int:
        if resource == PODS:
            return self.allocatable.get(PODS, 0) - self.pod_count
        return self.allocatable.get(resource, 0) - self.requested.get(resource, 0)


def node_room(node: Mapping[str, Any]) -> NodeRoom:
    """The static part of a Node object (requests and pods are added by the worker's view)."""
    md, spec, st = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
    return NodeRoom(
        name=md.get("name", ""),
        labels=dict(md.get("labels") or {}),
        allocatable=amounts(st.get("allocatable") or st.get("capacity")),
        taints=tuple(Taint(t.get("key", ""), t.get("value") or "", t.get("effect", ""))
                     for t in spec.get("taints") or []),
        cordoned=bool(spec.get("unschedulable")),
        ready=ready,
    )


# -- the filters ----------------------------------------------------------------------------------


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"  # an empty key with Exists tolerates everything
    if key != taint.key:
        return False
    return operator == "Exists" or (toleration.get("value") or "") == taint.value


def untolerated(shape: PodShape, taints: Iterable[Taint]) -> list[Taint]:
    return [t for t in taints if t.effect in BLOCKING_EFFECTS
            and not any(tolerates(tol, t) for tol in shape.tolerations)]


def lasting(taints: Iterable[Taint]) -> list[Taint]:
    """The taints an operator put on (what "ever" judges), without the passing ones."""
    return [t for t in taints if t.key not in PASSING_TAINTS]


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), list(expr.get("values") or [])
    have = labels.get(key)
    if op == "In":
        return have is not None and have in values
    if op == "NotIn":
        return have is None or have not in values
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt") and have is not None and len(values) == 1:
        try:
            a, b = int(have), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def _term_matches(term: Mapping[str, Any], node: NodeRoom) -> bool:
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term selects nothing
    if not all(_expression_matches(e, node.labels) for e in exprs):
        return False
    return all(_expression_matches(f, {"metadata.name": node.name}) for f in fields)


def selects(shape: PodShape, node: NodeRoom) -> bool:
    """nodeSelector and required node affinity."""
    if any(node.labels.get(k) != v for k, v in shape.node_selector.items()):
        return False
    return shape.affinity_terms is None or any(_term_matches(t, node) for t in shape.affinity_terms)


def _cordon_tolerated(shape: PodShape) -> bool:
    return any(tolerates(t, Taint(UNSCHEDULABLE_TAINT, "", "NoSchedule")) for t in shape.tolerations)


def lasting_room(node: NodeRoom, resource: str) -> int:
    """What the node could ever give a Job of ``resource``: allocatable less its DaemonSet pods' share."""
    if resource == PODS:
        return node.allocatable.get(PODS, 1) - node.daemon_pods
    return node.allocatable.get(resource, 0) - node.daemon_requested.get(resource, 0)


def missing_for_ever(shape: PodShape, node: NodeRoom) -> list[str]:
    """Resources the node could not hold even with only its DaemonSet pods on it, as
    ``"8 cpu > 4 allocatable"`` (or ``"... allocatable less DaemonSet pods"``) phrases."""
    out = []
    for res, want in sorted(shape.requests.items()):
        have = lasting_room(node, res)
        if want > have:
            less = " less DaemonSet pods" if node.daemon_requested.get(res) else ""
            out.append(f"{res} {show(res, want)} > {show(res, max(have, 0))} allocatable{less}")
    if lasting_room(node, PODS) < 1:
        out.append("pods: allocatable 0")
    out.extend(f"host port {p.protocol}/{p.port} held by a DaemonSet pod" for p in daemon_held_ports(shape, node))
    return out


def daemon_held_ports(shape: PodShape, node: NodeRoom) -> list[HostPort]:
    """The pod's host ports that a DaemonSet pod on the node holds (sorted, for messages)."""
    if not shape.ports or not node.daemon_ports:
        return []
    held = [p for p in shape.ports if any(p.conflicts(q) for q in node.daemon_ports)]
    return sorted(held, key=lambda p: (p.protocol, p.port, p.ip))


def _within_lasting_room(shape: PodShape, node: NodeRoom) -> bool:
    """``not missing_for_ever(shape, node)``, without the phrases (asked on every fit)."""
    if not node.daemon_pods:  # the common case: allocatable alone
        allocatable = node.allocatable
        return (allocatable.get(PODS, 1) >= 1
                and all(want <= allocatable.get(r, 0) for r, want in shape.requests.items()))
    return (lasting_room(node, PODS) >= 1 and all(want <= lasting_room(node, r) for r, want in shape.requests.items())
            and not daemon_held_ports(shape, node))


def could_ever_run(shape: PodShape, node: NodeRoom) -> bool:
    return selects(shape, node) and not untolerated(shape, lasting(node.taints)) and _within_lasting_room(shape, node)


#: a verdict and the node facts it was made from (labels, taints, allocatable: compared by identity)
_Kept = tuple[Mapping[str, str], tuple[Taint, ...], Mapping[str, int], bool]


class EverMemo:
    """:func:`could_ever_run` verdicts kept per (pod shape, node) while the node's object is the same.

    Asked for every node of every worker on each placement (5,000 nodes at 50 workers of 100: ~80 %
    of a placement's CPU), the answer only changes with the Node object (its labels, taints,
    allocatable are parsed once per object and shared by every room made from it) or its DaemonSet
    pods; a node with DaemonSet pods is judged afresh. Bounded: cleared whole past ``limit``."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._kept: dict[tuple[Hashable, str], _Kept] = {}

    def could_ever_run(self, shape: PodShape, node: NodeRoom) -> bool:
        if node.daemon_pods:
            return could_ever_run(shape, node)
        key = (shape.key, node.name)
        kept = self._kept.get(key)
        if kept is not None and kept[0] is node.labels and kept[1] is node.taints and kept[2] is node.allocatable:
            return kept[3]
        verdict = could_ever_run(shape, node)
        if len(self._kept) >= self.limit:
            self._kept.clear()
        self._kept[key] = (node.labels, node.taints, node.allocatable, verdict)
        return verdict


def runs_now(shape: PodShape, node: NodeRoom) -> bool:
    """Whether one more pod of ``shape`` fits on ``node`` as it is now (the cheap tests first: a
    full node is the common no)."""
    if not node.ready or (node.cordoned and not _cordon_tolerated(shape)):
        return False
    if node.free(PODS) < 1:
        return False
    if any(node.free(r) < want for r, want in shape.requests.items()):
        return False
    if not could_ever_run(shape, node) or untolerated(shape, node.taints):
        return False
    return not any(p.conflicts(q) for p in shape.ports for q in node.ports)


def pods_fitting_now(shape: PodShape, node: NodeRoom, limit: int) -> int:
    """How many pods of ``shape`` the node takes now, up to ``limit`` (host ports: at most one)."""
    if limit <= 0 or not runs_now(shape, node):
        return 0
    n = node.free(PODS)
    for r, want in shape.requests.items():
        if want > 0:
            n = min(n, node.free(r) // want)
    if shape.ports:
        n = min(n, 1)
    return max(0, min(n, limit))


# -- one worker -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerFit:
    """The fit of a Job's pod on one worker: ``ever`` False means never send it there."""

    ever: bool
    now: int  # pods that fit now (capped at what the Job wants)
    #: for events and the placement reason: the blocking cause, or the room figures. Those figures
    #: are summed over every node, so they are written only when read (:attr:`why`): a placement
    #: reads them for the one worker it chose, not for the fifty it weighed.
    reason: str | Callable[[], str] = field(compare=False)

    @property
    def why(self) -> str:
        if callable(self.reason):
            object.__setattr__(self, "reason", self.reason())
        assert isinstance(self.reason, str)
        return self.reason

    @property
    def has_room(self) -> bool:
        return self.ever and self.now > 0


def worker_fit(shape: PodShape, nodes: Sequence[NodeRoom], want: int, memo: EverMemo | None = None) -> WorkerFit:
    """Fit on a whole worker; ``want`` is ``min(parallelism, completions)`` of the Job (``memo``: the
    worker's kept verdicts of which nodes could ever run it)."""
    if not nodes:
        return WorkerFit(False, 0, "no nodes")
    ever = could_ever_run if memo is None else memo.could_ever_run
    ever_nodes = [n for n in nodes if ever(shape, n)]
    if not ever_nodes:
        return WorkerFit(False, 0, never_reason(shape, nodes))
    now = 0
    for n in ever_nodes:
        now += pods_fitting_now(shape, n, want - now)
        if now >= want:
            break
    if now:
        return WorkerFit(True, now, lambda: f"{now} of {want} pods fit now ({room_summary(shape, ever_nodes)})")
    return WorkerFit(True, 0, f"no room now: {not_now_reason(shape, ever_nodes)}")


def never_reason(shape: PodShape, nodes: Sequence[NodeRoom]) -> str:
    """Why no node could ever hold the pod, the most telling cause first."""
    for res in sorted(shape.requests):
        if all(n.allocatable.get(res, 0) == 0 for n in nodes):
            return f"no node has {res}"
    selected = [n for n in nodes if selects(shape, n)]
    if not selected:
        what = ", ".join(f"{k}={v}" for k, v in sorted(shape.node_selector.items()))
        return f"no node matches {'nodeSelector ' + what if what else 'the required node affinity'}"
    tolerated = [n for n in selected if not untolerated(shape, lasting(n.taints))]
    if not tolerated:
        taint = untolerated(shape, lasting(selected[0].taints))[0]
        return f"every matching node has an untolerated taint ({taint.key}={taint.value}:{taint.effect})"
    for res, want in sorted(shape.requests.items()):
        best = max(n.allocatable.get(res, 0) for n in tolerated)
        if best < want:
            return f"largest node has {show(res, best)} {res} < {show(res, want)} {res} requested"
    for res, want in sorted(shape.requests.items()):
        best = max(lasting_room(n, res) for n in tolerated)
        if best < want:
            return (f"largest node has {show(res, max(best, 0))} {res} beside its DaemonSet pods < "
                    f"{show(res, want)} {res} requested")
    if all(daemon_held_ports(shape, n) for n in tolerated):
        port = daemon_held_ports(shape, tolerated[0])[0]
        return f"host port {port.protocol}/{port.port} is held by DaemonSet pods on every matching node"
    return "; ".join(missing_for_ever(shape, tolerated[0])) or "no node fits"


def not_now_reason(shape: PodShape, nodes: Sequence[NodeRoom]) -> str:
    usable = [n for n in nodes if n.ready and (not n.cordoned or _cordon_tolerated(shape))]
    if not usable:
        return "every node that could run it is cordoned or not Ready"
    for res, want in sorted({**shape.requests, PODS: 1}.items()):
        best = max(n.free(res) for n in usable)
        if best < want:
            return f"largest free node has {show(res, max(best, 0))} {res} < {show(res, want)} {res} requested"
    tainted = [untolerated(shape, n.taints) for n in usable]
    if all(tainted):  # a passing taint (a node not Ready yet, under pressure): its lasting ones never get here
        t = tainted[0][0]
        return f"every node that could run it has an untolerated taint now ({t.key}={t.value}:{t.effect})"
    return "host ports taken on every node that could run it"


def room_summary(shape: PodShape, nodes: Sequence[NodeRoom]) -> str:
    """Free room of the resources the pod asks for, summed over usable nodes."""
    usable = [n for n in nodes if n.ready and (not n.cordoned or _cordon_tolerated(shape))]
    parts = [f"{show(r, sum(max(0, n.free(r)) for n in usable))} {r} free" for r in sorted(shape.requests)]
    return ", ".join(parts) if parts else f"{sum(max(0, n.free(PODS)) for n in usable)} pod slots free"
