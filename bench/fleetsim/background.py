"""A worker's background pods: many Running pods that are never stored one by one (pure).

Fifty workers of 20,000 pods each would take gigabytes as dicts, and a list of them would spend its
time encoding. Here a pod is an index: its name, uid and node follow from it, and its JSON is one
of a few byte templates (one per request shape) with those filled in, carrying what a
scheduler-style room view reads (labels, ``spec.nodeName``, the containers' requests, Running). A
background pod that is written or deleted leaves the block (:meth:`BackgroundPods.forget`) and
lives on as an ordinary stored object.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from bench.fleetsim.selectors import FieldTerm, Requirement, fields_match, labels_match

#: (cpu, memory) requests of the background shapes, used in turn
SHAPES: tuple[tuple[str, str], ...] = (("100m", "128Mi"), ("250m", "256Mi"), ("500m", "512Mi"), ("50m", "64Mi"))
BACKGROUND_LABEL = "fleetsim.jobmirror.dev/background"
#: field values the same for every background pod (the selectable ones the template fixes)
_CONSTANT_FIELDS = {"status.phase": "Running", "spec.restartPolicy": "Always",
                    "spec.schedulerName": "default-scheduler", "spec.serviceAccountName": "default",
                    "spec.hostNetwork": "false", "status.podIP": "", "status.nominatedNodeName": ""}
_PLACEHOLDERS = (b"@@NAME@@", b"@@UID@@", b'"@@RV@@"', b"@@NODE@@")


def _template(namespace: str, created: str, labels: dict[str, str], cpu: str, memory: str) -> bytes:
    """A pod's JSON with ``%s`` for its name, uid, ``%d`` for its resourceVersion and ``%s`` for its node."""
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "@@NAME@@", "namespace": namespace, "uid": "@@UID@@", "resourceVersion": "@@RV@@",
                     "creationTimestamp": created, "labels": labels},
        "spec": {"nodeName": "@@NODE@@", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                 "serviceAccountName": "default",
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        "status": {"phase": "Running", "qosClass": "Burstable", "startTime": created},
    }
    raw = orjson.dumps(pod).replace(b"%", b"%%")
    for placeholder, fmt in zip(_PLACEHOLDERS, (b"%s", b"%s", b'"%d"', b"%s"), strict=True):
        raw = raw.replace(placeholder, fmt)
    return raw


class BackgroundPods:
    """``count`` Running pods ``bg-0000000``… in ``namespace``, bound round-robin to ``nodes``."""

    def __init__(self, namespace: str, count: int, nodes: Sequence[str], *, rv: int, uid_prefix: str,
                 created: str, shapes: Sequence[tuple[str, str]] = SHAPES) -> None:
        if not nodes:
            raise ValueError("background pods need at least one node")
        self.namespace = namespace
        self.count = count
        self.nodes = list(nodes)
        self._node_bytes = [n.encode() for n in nodes]
        #: the resourceVersion every background pod has (they were all made by one write)
        self.rv = rv
        #: 23 characters of a uuid: each pod's uid ends in its index in 12 hex digits
        self.uid_prefix = uid_prefix
        self.labels = [{"app": f"background-{i}", BACKGROUND_LABEL: "true"} for i in range(len(shapes))]
        self._templates = [_template(namespace, created, lab, cpu, mem)
                           for lab, (cpu, mem) in zip(self.labels, shapes, strict=True)]
        #: indices written or deleted since: served by the store as ordinary objects, or gone
        self.gone: set[int] = set()

    def __len__(self) -> int:
        return self.count - len(self.gone)

    def name(self, i: int) -> str:
        return f"bg-{i:07d}"

    def index(self, name: str) -> int | None:
        """The index of the background pod ``name`` still in the block, or None."""
        if not name.startswith("bg-") or not name[3:].isdigit() or len(name) != 10:
            return None
        i = int(name[3:])
        return i if i < self.count and i not in self.gone else None

    def node(self, i: int) -> str:
        return self.nodes[i % len(self.nodes)]

    def uid(self, i: int) -> str:
        return f"{self.uid_prefix}-{i:012x}"

    def raw(self, i: int) -> bytes:
        return self._templates[i % len(self._templates)] % (
            self.name(i).encode(), self.uid(i).encode(), self.rv, self._node_bytes[i % len(self.nodes)])

    def obj(self, i: int) -> dict[str, Any]:
        obj: dict[str, Any] = orjson.loads(self.raw(i))
        return obj

    def field(self, i: int, path: str) -> str:
        if path == "metadata.name":
            return self.name(i)
        if path == "metadata.namespace":
            return self.namespace
        if path == "spec.nodeName":
            return self.node(i)
        return _CONSTANT_FIELDS.get(path, "")

    def _fixed_field(self, path: str) -> str:
        return self.field(0, path)

    def forget(self, i: int) -> None:
        self.gone.add(i)

    def first_after(self, key: tuple[str, str] | None) -> int:
        """The first index whose (namespace, name) sorts after ``key`` (0 for None)."""
        if key is None or key[0] < self.namespace:
            return 0
        if key[0] > self.namespace:
            return self.count
        return bisect.bisect_right(range(self.count), key[1], key=self.name)

    def scan(self, start: tuple[str, str] | None, labels: tuple[Requirement, ...],
             fields: tuple[FieldTerm, ...]) -> Iterator[tuple[tuple[str, str], bytes]]:
        """The selected pods after ``start``, in key order, as (key, JSON).

        Selectors are judged per shape and per node where they can be (a room view's
        ``status.phase!=…`` costs nothing per pod); only a term on the name is judged per pod."""
        shape_ok = [labels_match(labels, lab) for lab in self.labels]
        per_pod = tuple(t for t in fields if t.path == "metadata.name")
        on_node = tuple(t for t in fields if t.path == "spec.nodeName")
        fixed = tuple(t for t in fields if t.path not in ("metadata.name", "spec.nodeName"))
        if not any(shape_ok) or not fields_match(fixed, self._fixed_field):
            return
        node_ok = [all((n == t.value) != t.negate for t in on_node) for n in self.nodes]
        shapes, nodes = len(self.labels), len(self.nodes)
        for i in range(self.first_after(start), self.count):
            if i in self.gone or not shape_ok[i % shapes] or not node_ok[i % nodes]:
                continue
            if per_pod and not all((self.name(i) == t.value) != t.negate for t in per_pod):
                continue
            yield (self.namespace, self.name(i)), self.raw(i)
