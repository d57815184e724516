"""Typed descriptors of the API resources both controllers touch, and object helpers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kruntime.names import segment

Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The API path; every caller-given part is one escaped segment (names.segment), so no
        name can reach another object's path."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{segment(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{segment(name)}"
            if subresource:
                base += f"/{segment(subresource)}"
        return base


JOBS = Resource("batch", "v1", "jobs", "Job")
PODS = Resource("", "v1", "pods", "Pod")
EVENTS = Resource("", "v1", "events", "Event")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)


def key_of(obj: Obj) -> str:
    """Workqueue/cache key: ``namespace/name`` (or ``name`` for cluster-scoped objects)."""
    md = obj.get("metadata", {})
    ns = md.get("namespace")
    return f"{ns}/{md['name']}" if ns else md["name"]


def split_key(key: str) -> tuple[str | None, str]:
    if "/" in key:
        ns, name = key.split("/", 1)
        return ns, name
    return None, key


_VOLATILE_METADATA = ("resourceVersion", "managedFields")


def status_only_change(old: Obj, new: Obj) -> bool:
    """True when an update touched nothing but ``status`` (and the bookkeeping metadata it bumps).

    Controllers that are the sole status writer of an object skip such events: they come
    from their own writes, which the writing pass has already acted on.
    """
    if set(old) - {"status"} != set(new) - {"status"}:
        return False
    for k in new:
        if k == "status":
            continue
        if k == "metadata":
            om = {m: v for m, v in (old.get("metadata") or {}).items() if m not in _VOLATILE_METADATA}
            nm = {m: v for m, v in (new.get("metadata") or {}).items() if m not in _VOLATILE_METADATA}
            if om != nm:
                return False
        elif old.get(k) != new[k]:
            return False
    return True


def is_newer(a: Obj, b: Obj) -> bool:
    """True when ``a`` is a later version of the same object than ``b``.

    resourceVersions are opaque by contract, but every kube-apiserver serves etcd
    revisions, which grow; anything else counts as "not newer", so callers fall back to
    their cache.
    """
    try:
        return int(a["metadata"]["resourceVersion"]) > int(b["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return False
