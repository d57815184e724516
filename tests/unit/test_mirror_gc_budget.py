"""GC reads the manager cache first and confirms only deletions live (issue 11 item 11), and
conditions that hold every pass are evented once, not per pass."""

from __future__ import annotations

import pytest

from kruntime.resources import Obj
from mirror.decisions import says_something_new
from mirror.gc import CopyVerdict, collect_once, needs_confirmation
from mirror.jobs.kind import JOB_KIND
from testkit.gcfakes import MANAGER_CLUSTER, ORIGIN, FakeManager, FakeWorker, manager_job, worker_copy

CLUSTER, WORKER = MANAGER_CLUSTER, "w1"


class _Cache(dict[str, Obj]):
    pass


@pytest.mark.parametrize(("verdict", "confirm"), [
    (CopyVerdict.KEEP, False), (CopyVerdict.ORPHAN, True), (CopyVerdict.STALE, True), (CopyVerdict.UNPROVEN, True)])
def test_only_a_keep_is_final_from_the_cache(verdict: CopyVerdict, confirm: bool) -> None:
    assert needs_confirmation(verdict) is confirm


def _setup(n_live: int, n_orphans: int, n_stale: int) -> tuple[FakeManager, FakeWorker, _Cache]:
    live = {f"ns/live-{i}": manager_job(f"live-{i}", WORKER) for i in range(n_live)}
    stale = {f"ns/stale-{i}": manager_job(f"stale-{i}", worker="w2") for i in range(n_stale)}
    copies = [worker_copy(f"live-{i}") for i in range(n_live)] + [worker_copy(f"orphan-{i}") for i in range(n_orphans)]
    copies += [worker_copy(f"stale-{i}") for i in range(n_stale)]
    return FakeManager(live | stale), FakeWorker(WORKER, copies), _Cache(live | stale)


async def test_copies_the_cache_keeps_cost_no_manager_request() -> None:
    manager, worker, cache = _setup(500, 3, 2)
    deleted = await collect_once(manager, [worker, FakeWorker("w2", [])], ORIGIN, JOB_KIND, CLUSTER, cache=cache)  # type: ignore[arg-type, list-item]
    assert manager.gets == 5  # only the copies to delete were confirmed
    assert deleted == 5 and sorted(worker.client.deleted) == [*(f"orphan-{i}" for i in range(3)),
                                                              *(f"stale-{i}" for i in range(2))]


async def test_a_lagging_cache_never_deletes_a_live_copy() -> None:
    manager, worker, cache = _setup(3, 0, 0)
    cache.clear()  # the cache has not seen the manager Jobs yet
    assert await collect_once(manager, [worker], ORIGIN, JOB_KIND, CLUSTER, cache=cache) == 0  # type: ignore[arg-type, list-item]
    assert manager.gets == 3 and worker.client.deleted == []


async def test_confirmations_per_round_are_budgeted() -> None:
    manager, worker, cache = _setup(10, 5, 0)
    assert await collect_once(manager, [worker], ORIGIN, JOB_KIND, CLUSTER, cache=cache, budget=2) == 2  # type: ignore[arg-type, list-item]
    assert manager.gets == 2


async def test_without_a_cache_every_copy_is_read_live() -> None:
    manager, worker, _ = _setup(4, 1, 0)
    assert await collect_once(manager, [worker], ORIGIN, JOB_KIND, CLUSTER) == 1  # type: ignore[arg-type, list-item]
    assert manager.gets == 5


async def test_a_copy_naming_another_namespaces_job_is_never_collected_or_read() -> None:
    """A user who may edit Jobs in one worker namespace points a copy at another namespace's
    Job: GC neither reads that Job for it nor deletes anything on its word (kept, unproven)."""
    manager, worker, _ = _setup(1, 0, 0)
    forged = worker_copy("live-0")
    forged["metadata"]["namespace"] = "other"
    forged["metadata"]["name"] = "mine"
    worker._copies.append(forged)
    assert await collect_once(manager, [worker], ORIGIN, JOB_KIND, CLUSTER) == 0  # type: ignore[arg-type, list-item]
    assert manager.gets == 1 and worker.client.deleted == []


@pytest.mark.parametrize(("previous", "message", "event"), [
    (None, "cannot dispatch: no healthy worker", True),
    ("cannot dispatch: no healthy worker", "cannot dispatch: no healthy worker", False),
    ("cannot dispatch: no healthy worker", "cannot dispatch: pinned worker 'w9' is not configured", True),
])
def test_a_standing_condition_is_evented_once_per_reason(previous: str | None, message: str, event: bool) -> None:
    assert says_something_new(previous, message) is event



async def test_a_round_over_many_copies_lets_the_loop_run() -> None:
    """The Lease and the probes share the loop: judging the copies yields while it goes, counted
    over every worker's together (a fleet is many workers of a few hundred copies each)."""
    import asyncio

    names = [f"w{i}" for i in range(10)]
    live = {f"ns/j-{w}-{k}": manager_job(f"j-{w}-{k}", w) for w in names for k in range(500)}
    workers = [FakeWorker(w, [worker_copy(f"j-{w}-{k}") for k in range(500)]) for w in names]
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    assert await collect_once(FakeManager(live), workers, ORIGIN, JOB_KIND, CLUSTER, cache=_Cache(live)) == 0  # type: ignore[arg-type]
    during = ticks - before
    task.cancel()
    assert during >= 4  # 5,000 copies, a turn of the loop every 1,000
