"""``Widget`` (``example.dev/v1``): a made-up second kind with the smallest behaviour a mirrored kind
needs, to prove the kind seam (:class:`mirror.kinds.MirroredKind`) in a unit
(tests/unit/test_mirror_kinds.py) and in a fleet of fake API servers (tests/unit/test_widget_fleet.py).

A Widget runs until ``status.phase`` is Done; ``spec.size`` follows the manager; ``spec.owner``
names the controller that manages it (as ``spec.managedBy`` does for a Job); ``spec.paused``
holds it. Nothing in ``mirror/`` knows it exists.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from kruntime.resources import Obj, Resource
from mirror.identity import stamp
from mirror.kinds import CopyPods, MirroredKind, PodDemand

WIDGETS = Resource("example.dev", "v1", "widgets", "Widget")


class WidgetKind:
    """A Widget runs until ``status.phase`` is Done; ``spec.size`` follows the manager."""

    resource = WIDGETS
    pods: CopyPods | None = None  # a Widget's pods are not followed

    @property
    def name(self) -> str:
        return self.resource.kind

    def managed_by(self, obj: Obj) -> str | None:
        return (obj.get("spec") or {}).get("owner")

    def build_copy(self, manager: Obj, *, origin: str, origin_cluster: str, remote_name: str) -> Obj:
        labels, annotations = stamp(self.name, manager, origin=origin, origin_cluster=origin_cluster)
        return {"apiVersion": "example.dev/v1", "kind": "Widget",
                "metadata": {"name": remote_name, "namespace": manager["metadata"]["namespace"],
                             "labels": labels, "annotations": annotations},
                "spec": {"size": manager["spec"].get("size", 1)}}

    def spec_patch(self, manager: Obj, remote: Obj) -> Obj | None:
        size = manager["spec"].get("size", 1)
        return None if remote["spec"].get("size") == size else {"spec": {"size": size}}

    def desired_status(self, manager: Obj, remote: Obj | None, now: datetime) -> Obj:
        if remote is None:
            return copy.deepcopy(manager.get("status") or {})
        return {"phase": (remote.get("status") or {}).get("phase", "Pending")}

    def recreate_when_refused(self, patch: Obj) -> bool:
        return False

    def dropped_fields(self, sent: Obj, created: Obj) -> list[str]:
        return []

    def decided_status(self, manager: Obj, now: datetime) -> Obj | None:
        return None  # a Widget has no interim outcome

    def status_differs(self, current: Obj | None, desired: Obj | None) -> bool:
        return (current or {}) != (desired or {})

    def outcome(self, copy: Obj) -> str | None:
        return "Done" if self.is_finished(copy) else None

    def is_finished(self, obj: Obj) -> bool:
        return (obj.get("status") or {}).get("phase") == "Done"

    def is_suspended(self, obj: Obj) -> bool:
        return bool(obj["spec"].get("paused"))

    def state(self, obj: Obj) -> str | None:
        return "Done" if self.is_finished(obj) else None

    def pod_demand(self, obj: Obj) -> list[PodDemand]:
        return []  # room not judged for a Widget


WIDGET: MirroredKind = WidgetKind()


def make_widget(name: str, *, namespace: str = "default", owner: str, size: int = 1, paused: bool = False,
                annotations: dict[str, str] | None = None) -> Obj:
    """A manager Widget as a user writes it, claimed by ``owner`` (a controller name)."""
    md: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": dict(annotations or {})}
    return {"apiVersion": "example.dev/v1", "kind": "Widget", "metadata": md,
            "spec": {"owner": owner, "size": size, "paused": paused}}
