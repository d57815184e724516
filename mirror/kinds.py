"""The kind seam: what the mirror needs to know about a kind of workload it mirrors.

Shaped after Kueue MultiKueue's adapters: the reconciler, the worker caches, the GC, the
controller wiring and the ``status`` command work on a :class:`MirroredKind` and never on a
concrete kind. ``batch/v1`` Job (``mirror/jobs/kind.py``) is the one implementation today; a
second kind is a new module implementing this protocol, listed in ``mirror.controller.KINDS``,
plus its RBAC in ``deploy/``.

Everything a kind contributes is a pure function over raw JSON; the reconciler's decisions
(``mirror.decisions``) are pure too, so a kind can be tested without a cluster
(``tests/unit/test_mirror_kinds.py`` drives them with a fake kind).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from datetime import datetime
from typing import NamedTuple, Protocol

from kruntime.resources import Obj, Resource


class CopyPods(Protocol):
    """How a worker's controller of the kind names and labels the pods it runs for a copy."""

    def selector(self, copy: Obj) -> str:
        """The label selector of ``copy``'s pods."""
        ...

    def owner_uid(self, pod: Obj) -> str:
        """The uid of the copy ``pod``'s labels name as its owner ("" when none)."""
        ...

    def owner_candidates(self, pod_name: str, copy_named: Callable[[str], Obj | None]) -> list[Obj]:
        """The copies (looked up by name in the pod's namespace) that could own a pod so named."""
        ...


class PodDemand(NamedTuple):
    """Pods made from one template: how many of them a manager object runs at once at most."""

    template: Obj  # a pod template (``spec.template`` of a Job)
    pods: int


class MirroredKind(Protocol):
    """One kind of manager object mirrored into workers as a copy of the same kind."""

    #: The API resource, in the manager and in every worker.
    resource: Resource
    #: Its copies' pods, for worker-side events and waits (None: not followed for this kind).
    pods: CopyPods | None

    @property
    def name(self) -> str:
        """The kind's name (``resource.kind``): part of queue keys and of the origin annotation."""
        ...

    def managed_by(self, obj: Obj) -> str | None:
        """The controller ``obj`` names as its manager (``spec.managedBy`` for a Job); see ``mirror.claim``."""
        ...

    def build_copy(self, manager: Obj, *, origin: str, origin_cluster: str, remote_name: str) -> Obj:
        """The object to create in a worker, stamped by :func:`mirror.identity.stamp`."""
        ...

    def spec_patch(self, manager: Obj, remote: Obj) -> Obj | None:
        """A merge patch bringing the copy's mutable spec in line with the manager's, or None."""
        ...

    def recreate_when_refused(self, patch: Obj) -> bool:
        """Whether a worker's refusal of ``patch`` (from :meth:`spec_patch`) is met by deleting the
        copy for re-creation from the manager (the patch only applies to a copy running nothing)."""
        ...

    def dropped_fields(self, sent: Obj, created: Obj) -> list[str]:
        """Paths of fields in ``sent`` missing from the worker's ``created`` answer (version skew)."""
        ...

    def desired_status(self, manager: Obj, remote: Obj | None, now: datetime) -> Obj:
        """The manager's status given its copy (None: no copy yet, or its worker is unreachable)."""
        ...

    def decided_status(self, manager: Obj, now: datetime) -> Obj | None:
        """The terminal status of an object whose outcome is decided but not yet written, else None.

        Its copy vanished (deleted on the worker, worker lost): a decided outcome is final,
        so the object is finished from its last mirrored status, never run again.
        """
        ...

    def status_differs(self, current: Obj | None, desired: Obj | None) -> bool:
        """Whether writing ``desired`` would change the stored ``current`` status."""
        ...

    def outcome(self, copy: Obj) -> Hashable | None:
        """What the worker has decided about ``copy`` (comparable; None while undecided): a copy
        whose outcome just changed is mirrored ahead of queued dispatches."""
        ...

    def is_finished(self, obj: Obj) -> bool:
        """Terminal: its copy is no longer needed (manager) / no longer counts as load (copy)."""
        ...

    def pod_demand(self, obj: Obj) -> list[PodDemand]:
        """Its pods by template, for room-aware placement (empty: room not judged for it)."""
        ...

    def is_suspended(self, obj: Obj) -> bool:
        """Held back by the user: a suspended object gets no copy until resumed."""
        ...

    def state(self, obj: Obj) -> str | None:
        """A one-word terminal or held state for the ``status`` command (None: running/pending)."""
        ...


class QueueKey(NamedTuple):
    """A work-queue key: a Job and another kind with the same name are different keys."""

    kind: str
    key: str  # namespace/name

    def __str__(self) -> str:
        return f"{self.kind}:{self.key}"
