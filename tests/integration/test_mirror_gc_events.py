"""GC leaves the manager's request budget to status writes; standing conditions do not spam events
(issue 11 item 11)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import JOBS
from mirror import metrics
from mirror.naming import ANNOTATION_PIN
from tests.conftest import wait_for
from tests.integration.mirror_env import make_job, mirror_env

pytestmark = pytest.mark.integration

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]


def _gc_reads() -> float:
    return float(metrics.GC_MANAGER_READS._value.get())


async def test_gc_reads_no_manager_object_for_copies_it_keeps(client_for: ClientFor, cluster: ClusterFn,
                                                              ns: str) -> None:
    n = 30
    async with mirror_env(client_for, cluster, ns, gc_interval=1.0) as env:
        ctrl = await env.start()
        jobs = await asyncio.gather(*(env.create(make_job(f"g{i}", duration_ms=120_000)) for i in range(n)))

        async def all_copied() -> bool:
            return sum(len(w.copies(ctrl.kinds["Job"])) for w in ctrl.workers.values()) >= n

        await wait_for(all_copied, timeout=90, what=f"{n} copies in the workers' caches")
        before = _gc_reads()
        await asyncio.sleep(4.5)  # four GC rounds over n copies: the old code made 4n manager GETs
        assert _gc_reads() - before == 0
        # An orphan is still found: its manager Job vanishes; GC confirms it with one read and deletes it.
        uid = jobs[0]["metadata"]["uid"]
        await env.stop(ctrl)
        await env.manager.delete(JOBS, ns, "g0")
        await env.manager.patch(JOBS, ns, "g0", {"metadata": {"finalizers": None}})
        await env.wait_gone("g0")
        await env.start()

        async def collected() -> bool:
            return await env.copies(uid) == {}

        await wait_for(collected, timeout=30, what="orphan copy garbage-collected")


async def test_no_worker_is_evented_once_not_every_pass(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns, resync_period=0.5) as env:
        await env.start()
        await env.create(make_job("nowhere", annotations={ANNOTATION_PIN: "no-such-worker"}))
        await env.wait_event("nowhere", "NoWorker")
        await asyncio.sleep(4)  # eight resyncs
        events = [e for e in await env.events("nowhere") if e["reason"] == "NoWorker"]
        assert len(events) == 1 and events[0].get("count", 1) == 1, events
