"""The cyclic garbage collector and a process that caches a fleet.

A controller's caches are large and long-lived: 20,000 cached pods are ~1M small objects, and
every full collection walks all of them (~0.2 s per 20,000 pods here, on the loop the Lease and
probes share) while it finds nothing: cached objects are JSON-shaped, without cycles, and are
freed by reference counting when evicted. After a cache has been filled, :func:`settle` moves
everything alive out of the collector's generations (``gc.freeze``); later collections walk only
what was made since. The young generations are collected first, so the cyclic garbage other
tasks left (an exception and its traceback) is not kept with it; only garbage that had already
survived two collections is.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Keep what is alive now out of later collections (call after a cache was filled)."""
    gc.collect(1)  # the young generations only: a few thousand objects, not the cache
    gc.freeze()

