"""A worker that already has a same-named Job that is not our copy (issue 11, item 7).

Unpinned: the Job is placed on another worker at once, with a NameCollision event, and
runs there. Pinned: it stays, keeps saying so (bounded backoff), and nothing is touched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from mirror import metrics
from mirror.naming import ANNOTATION_CLUSTER, ANNOTATION_PIN
from tests.integration.mirror_env import make_job, mirror_env

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]


@pytest.mark.integration
async def test_unpinned_job_colliding_on_its_worker_runs_elsewhere(client_for: ClientFor, cluster: ClusterFn,
                                                                   ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        w1, w2 = env.workers["worker-1"], env.workers["worker-2"]
        foreign = await env.create(make_job("clash", managed_by=None, duration_ms=60000), client=w1)
        await env.start()
        # LeastLoaded breaks the 0/0 tie by name: worker-1 first, where "clash" is taken.
        uid = (await env.create(make_job("clash", duration_ms=1000)))["metadata"]["uid"]
        event = await env.wait_event("clash", "NameCollision")
        assert "worker-1" in event["message"] and "placed on worker-2 instead" in event["message"]
        done = await env.wait_condition("clash", "Complete", timeout=60)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2"
        assert done["status"]["succeeded"] == 1
        still = await env.get("clash", w1)
        assert still is not None and still["metadata"]["uid"] == foreign["metadata"]["uid"]
        assert not (still.get("status") or {}).get("succeeded")  # the foreign Job still runs its own course
        assert list((await env.copies_made(uid)).values()) == ["worker-2"]  # created once, never on worker-1
        await env.wait_gone("clash", w2)  # our finished copy is cleaned up; the foreign one stays
        assert await env.get("clash", w1) is not None


@pytest.mark.integration
async def test_pinned_job_colliding_keeps_reporting_with_backoff(client_for: ClientFor, cluster: ClusterFn,
                                                                 ns: str) -> None:
    async with mirror_env(client_for, cluster, ns, resync_period=1.0) as env:
        w1, w2 = env.workers["worker-1"], env.workers["worker-2"]
        foreign = await env.create(make_job("pinned", managed_by=None, duration_ms=60000), client=w1)
        before = metrics.NAME_COLLISIONS.labels("worker-1")._value.get()
        await env.start()
        await env.create(make_job("pinned", annotations={ANNOTATION_PIN: "worker-1"}))
        event = await env.wait_event("pinned", "NameCollision")
        assert "pinned to worker-1" in event["message"] and "backoff" in event["message"]
        await asyncio.sleep(8)
        # Backoff 1, 2, 4 s ...: a handful of looks in 8 s, not one per resync forever.
        looks = metrics.NAME_COLLISIONS.labels("worker-1")._value.get() - before
        assert 2 <= looks <= 6, looks
        job = await env.get("pinned")
        assert job is not None and job["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-1"
        assert await env.get("pinned", w2) is None
        still = await env.get("pinned", w1)
        assert still is not None and still["metadata"]["uid"] == foreign["metadata"]["uid"]
