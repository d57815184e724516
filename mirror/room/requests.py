"""What one pod of a Job asks a node for, computed the way kube-scheduler computes it.

The effective request of a pod is the larger of (a) its regular containers plus its
sidecars (restartable init containers, which keep running) and (b) the peak of its init
phase (each ordinary init container runs alone beside the sidecars started before it),
plus the pod overhead of its RuntimeClass. Pod-level ``resources.requests`` (1.34+) replace
the container sum for the resources they name. A container that sets a limit but no request
requests its limit (the API server defaults pods that way; a Job's template is not defaulted,
so we do it here). Every pod also takes one of the node's ``pods``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from mirror.room.quantity import amounts

Resources = dict[str, int]

PODS = "pods"


def _add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    _add_into(out, b)
    return out


def _add_into(total: Resources, more: Mapping[str, int]) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


def _max(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(out.get(k, 0), v)
    return out


def container_requests(container: Mapping[str, Any]) -> Resources:
    """One container's requests; a resource with only a limit requests the limit."""
    res = container.get("resources") or {}
    requested = amounts(res.get("requests"))
    missing = {name: q for name, q in (res.get("limits") or {}).items() if name not in requested}
    return {**amounts(missing), **requested} if missing else requested


def pod_requests(pod_spec: Mapping[str, Any]) -> Resources:
    """The effective request of a pod with this spec (without the ``pods`` slot)."""
    regular: Resources = {}
    for c in pod_spec.get("containers") or []:
        _add_into(regular, container_requests(c))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for c in pod_spec.get("initContainers") or []:
        r = container_requests(c)
        if c.get("restartPolicy") == "Always":  # a sidecar: runs from here on, beside everything after it
            _add_into(sidecars, r)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, _add(r, sidecars))
    total = _max(_add(regular, sidecars), init_peak)
    pod_level = amounts((pod_spec.get("resources") or {}).get("requests"))
    total.update(pod_level)
    total = _add(total, amounts(pod_spec.get("overhead")))
    return {k: v for k, v in total.items() if v > 0}


@dataclass(frozen=True)
class HostPort:
    """A host port a pod binds on its node (protocol, port, host IP; "" = every address)."""

    protocol: str
    port: int
    ip: str = ""

    def conflicts(self, other: HostPort) -> bool:
        if self.protocol != other.protocol or self.port != other.port:
            return False
        wildcard = ("", "0.0.0.0", "::")
        return self.ip in wildcard or other.ip in wildcard or self.ip == other.ip


def host_ports(pod_spec: Mapping[str, Any]) -> frozenset[HostPort]:
    out: set[HostPort] = set()
    for c in [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]:
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                out.add(HostPort(p.get("protocol") or "TCP", int(p["hostPort"]), p.get("hostIP") or ""))
    return frozenset(out)


@dataclass(frozen=True)
class PodShape:
    """Everything the fit needs to know about one pod of a Job (built once per Job)."""

    requests: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    #: required node affinity: OR of terms (each a raw NodeSelectorTerm); None = no constraint
    affinity_terms: tuple[Mapping[str, Any], ...] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    ports: frozenset[HostPort] = frozenset()

    @cached_property
    def key(self) -> Hashable:
        """Equal for pods of equal shape (the Jobs of one template): what a node's verdict is kept under."""
        return (tuple(sorted(self.requests.items())), tuple(sorted(self.node_selector.items())),
                repr(self.affinity_terms), repr(self.tolerations), self.ports)


def shape_of_template(template: Mapping[str, Any]) -> PodShape:
    """The PodShape of a pod made from ``template`` (a Job's ``spec.template``)."""
    spec = template.get("spec") or {}
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or None)
    terms: Iterable[Mapping[str, Any]] | None = None if required is None else required.get("nodeSelectorTerms") or []
    return PodShape(
        requests=pod_requests(spec),
        node_selector=dict(spec.get("nodeSelector") or {}),
        affinity_terms=None if terms is None else tuple(terms),
        tolerations=tuple(spec.get("tolerations") or ()),
        ports=host_ports(spec),
    )
