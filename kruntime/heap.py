"""The cyclic garbage collector and a process that caches a fleet.

A controller's caches are large and long-lived: 20,000 cached pods are ~1M small objects, and
every full collection walks all of them (~0.2 s per 20,000 pods here, on the loop the Lease and
probes share) while it finds nothing: cached objects are JSON-shaped, without cycles, and are
freed by reference counting when evicted. After a cache has been filled, :func:`settle` moves
everything alive out of the collector's generations (``gc.freeze``); later collections walk only
what was made since. Cyclic garbage alive at that moment is kept (a few objects per relist).
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Keep what is alive now out of later collections (call after a cache was filled)."""
    gc.freeze()


def settled_objects() -> int:
    """Objects kept out of collections so far."""
    return gc.get_freeze_count()
