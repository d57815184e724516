"""What placement looks up on the manager besides the mirrored objects: namespace labels (for
workers[].access and tenants by namespaceSelector) and PriorityClass values (scheduling.order
FairShare), each from a slim watch made only when the configuration needs it."""

from __future__ import annotations

from dataclasses import dataclass

from kruntime.client import ClusterClient
from kruntime.informer import Informer
from kruntime.resources import NAMESPACES, PRIORITY_CLASSES, Obj
from mirror.config import Config, SchedulingOrder


def namespace_informer(cfg: Config, watches: ClusterClient) -> Informer | None:
    """A watch on the manager's namespaces for workers[].access namespaceSelectors: none without
    one; with a ``namespaces`` allow-list only those are cached, and only their names and labels."""
    if not any(w.access is not None and w.access.namespace_selector is not None for w in cfg.workers) \
            and not any(t.namespace_selector is not None for t in cfg.scheduling.tenants):
        return None
    listed = frozenset(cfg.namespaces)

    def keep(obj: Obj) -> bool:
        return not listed or obj["metadata"]["name"] in listed

    def slim(obj: Obj) -> Obj:
        md = obj["metadata"]
        return {"metadata": {"name": md["name"], "labels": md.get("labels") or {},
                             "resourceVersion": md.get("resourceVersion", "")}}

    return Informer(watches, NAMESPACES, keep=keep, transform=slim)


def priority_class_informer(cfg: Config, watches: ClusterClient) -> Informer | None:
    """A watch on the manager's PriorityClasses, only their values (none for scheduling.order Arrival)."""
    if cfg.scheduling.order is not SchedulingOrder.FAIR_SHARE:
        return None

    def slim(obj: Obj) -> Obj:
        md = obj["metadata"]
        return {"metadata": {"name": md["name"], "resourceVersion": md.get("resourceVersion", "")},
                "value": obj.get("value", 0), "globalDefault": bool(obj.get("globalDefault"))}

    return Informer(watches, PRIORITY_CLASSES, transform=slim)


@dataclass(eq=False)
class ManagerLookups:
    """Reads of the two watches (either may be absent: then nothing is known)."""

    #: the manager's namespaces, name and labels only (only when a workers[].access has a namespaceSelector)
    namespaces: Informer | None = None
    #: the manager's PriorityClasses (scheduling.order FairShare), by name: value and globalDefault
    priority_classes: Informer | None = None

    def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        """A manager namespace's labels; None while not known (no watch, not synced, not seen)."""
        if self.namespaces is None or not self.namespaces.synced.is_set():
            return None
        obj = self.namespaces.get(namespace)
        return None if obj is None else dict(obj["metadata"]["labels"])

    def priority_value(self, name: str) -> int | None:
        """The value of the manager's PriorityClass ``name``; None while not known."""
        obj = self.priority_classes.get(name) if self.priority_classes is not None else None
        value = None if obj is None else obj.get("value")
        return value if isinstance(value, int) else None

    def default_priority(self) -> int:
        """A Job naming no (known) class: the globalDefault class's value, else 0 (as kube-scheduler)."""
        if self.priority_classes is None:
            return 0
        return max((o["value"] for o in self.priority_classes.items()
                    if o.get("globalDefault") and isinstance(o.get("value"), int)), default=0)

    def priorities_known(self) -> bool:
        return self.priority_classes is not None and self.priority_classes.synced.is_set()
