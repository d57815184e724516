"""Which watch events of a copy need a pass of its manager object (issue 38: passes per Job).

A pass re-reads everything, so an event only needs one when it may change what a pass would do.
Three never do: the echo of a create this process sent (the pass that sent it went on with the
answer; the copy has no status yet), the echo of a deletion a pass of this process sent on its way
to releasing the finalizer (it went on as if the copy were gone), and a copy's deletion once the
manager object no longer carries our finalizer (it is finished and let go, or gone: nothing is left
to mirror or clean up).
"""

from __future__ import annotations

from kruntime.resources import Obj
from mirror.naming import holds_finalizer


def needs_pass(etype: str, copy: Obj, *, created_here: bool, manager: Obj | None,
               deleted_here: bool = False) -> bool:
    """Whether this event of ``copy`` should queue its manager object (``manager``: as cached;
    ``deleted_here``: a pass of ours deleted this copy on its way to releasing the finalizer)."""
    if etype == "ADDED" and created_here and not copy.get("status"):
        return False
    if etype == "DELETED":
        return not deleted_here and manager is not None and holds_finalizer(manager)
    return True
