"""What watch events add is settled out of the collector's walks; a full collection still finds
the cycles that were frozen (kruntime.heap)."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from kruntime import heap


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def unfrozen() -> object:
    yield None
    gc.unfreeze()  # the rest of the test process is not ours to freeze


async def test_keep_settled_freezes_what_was_added_since() -> None:
    gc.unfreeze()
    cache = [{"metadata": {"name": f"j{i}"}} for i in range(5000)]  # what watch events brought
    task = asyncio.create_task(heap.keep_settled(interval=0.01, full_every=3600))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gc.get_freeze_count() >= len(cache)


async def test_what_a_full_collection_found_alive_is_frozen_while_the_heap_is_kept_settled() -> None:
    gc.unfreeze()
    task = asyncio.create_task(heap.keep_settled(interval=3600, full_every=3600))
    await asyncio.sleep(0)  # the hook is installed
    cache = [{"metadata": {"name": f"j{i}"}} for i in range(5000)]
    gc.collect(1)
    assert gc.get_freeze_count() < len(cache)  # a young collection freezes nothing
    gc.collect(2)
    assert gc.get_freeze_count() >= len(cache)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert heap.freeze_after_full not in gc.callbacks  # nothing is frozen once the controller is gone
    gc.unfreeze()
    gc.collect(2)
    assert gc.get_freeze_count() == 0


def test_a_full_collection_finds_a_cycle_that_was_frozen_and_freezes_the_rest() -> None:
    gc.unfreeze()
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    heap.settle()
    del a, b
    gc.collect()
    assert gone() is not None  # frozen: the ordinary collections never see it
    found, took = heap.collect_all()
    assert gone() is None and found >= 2 and took >= 0
    assert gc.get_freeze_count() > 0
