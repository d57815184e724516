"""The cyclic garbage collector and a process that caches a fleet.

A controller's caches are large and long-lived: 20,000 cached pods are ~1M small objects, and
every full collection walks all of them (~0.2 s per 20,000 pods here, on the loop the Lease and
probes share) while it finds nothing: cached objects are JSON-shaped, without cycles, and are
freed by reference counting when evicted. After a cache has been filled, :func:`settle` moves
everything alive out of the collector's generations (``gc.freeze``); later collections walk only
what was made since. The young generations are collected first, so the cyclic garbage other
tasks left (an exception and its traceback) is not kept with it; only garbage that had already
survived two collections is.

What watch events add while the controller runs (20,000 Jobs and their copies dispatched in five
minutes) is settled the same way every ``interval`` seconds (:func:`keep_settled`): without it the
collector walked all of it each time it had grown by a quarter, 0.1-0.4 s at a time. Cyclic
garbage that was old when frozen is only found by a full collection, so one runs every
``full_every`` seconds over everything (logged with its length).

Between settles the collector still runs its own full collections, each over all that survived
since the last settle: in a 20,000-Job fill, 0.08-0.18 s at a time (bench fleet, stall reports at
50 ms, results/fleet-diag-54c4ddd.json). What a full collection found alive is frozen at once
(:func:`freeze_after_full`), so the next one walks only what came after it: no stall over 50 ms
was left in the fill (results/fleet-gc-4dd7b5d.json).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any

log = logging.getLogger(__name__)


def settle() -> None:
    """Keep what is alive now out of later collections (call after a cache was filled)."""
    gc.collect(1)  # the young generations only: a few thousand objects, not the cache
    gc.freeze()


def freeze_after_full(phase: str, info: dict[str, Any]) -> None:
    """A ``gc.callbacks`` hook: when a full collection ends, what it found alive is long-lived."""
    if phase == "stop" and info.get("generation") == 2:
        gc.freeze()


def collect_all() -> tuple[int, float]:
    """A full collection over everything, frozen objects included, then all that lives frozen again:
    the unreachable objects found and the seconds it took."""
    began = time.perf_counter()
    gc.unfreeze()
    found = gc.collect()
    gc.freeze()
    return found, time.perf_counter() - began


async def keep_settled(interval: float = 30.0, full_every: float = 3600.0) -> None:
    """Settle every ``interval`` seconds and after each full collection, and collect all every
    ``full_every``; runs until cancelled."""
    last_full = time.monotonic()
    gc.callbacks.append(freeze_after_full)
    try:
        while True:
            await asyncio.sleep(interval)
            if time.monotonic() - last_full >= full_every:
                found, took = collect_all()
                last_full = time.monotonic()
                log.info("full garbage collection: %d unreachable objects in %.2fs", found, took)
            else:
                settle()
    finally:
        gc.callbacks.remove(freeze_after_full)
