"""Which manager objects this controller claims: ``managedBy`` naming us, in a namespace we serve.

The rule is the two settings it needs, not the whole configuration, so releasing a Job that
moved out of the allow-list asks :meth:`ClaimRule.anywhere` instead of rebuilding a Config.
Where a kind keeps its ``managedBy`` is the kind's business (``MirroredKind.managed_by``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kruntime.resources import Obj
from mirror.naming import holds_finalizer

if TYPE_CHECKING:
    from mirror.kinds import MirroredKind


@dataclass(frozen=True)
class ClaimRule:
    controller_name: str
    #: the namespaces served; empty = every namespace
    namespaces: frozenset[str] = frozenset()

    def claims(self, kind: MirroredKind, obj: Obj) -> bool:
        if kind.managed_by(obj) != self.controller_name:
            return False
        return not self.namespaces or (obj.get("metadata") or {}).get("namespace") in self.namespaces

    def anywhere(self) -> ClaimRule:
        """The same rule with no namespace allow-list (is it ours at all, wherever it is?)."""
        return replace(self, namespaces=frozenset())


def worth_caching(kind: MirroredKind, obj: Obj, *, claimed: bool) -> bool:
    """Whether the manager cache keeps ``obj``: one we claim that has not finished, or one holding our
    finalizer (its copies' cleanup or the finalizer's release is left to do, claimed or not).

    A claimed object that finished and was released has nothing left for us: dropping it keeps the
    cache (and the resync passes) to the work in flight, where otherwise every Job finished since
    the manager last deleted them would be held whole (~11 KB each, issue 38)."""
    if holds_finalizer(obj):
        return True
    return claimed and not kind.is_finished(obj)
