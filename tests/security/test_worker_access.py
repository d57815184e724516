"""Per-tenant worker access (issue 32 item 9), on real API servers: a tenant may create Jobs in their
namespace, pin them and select workers, yet reach only the workers ``workers[].access`` gives that
namespace; the rule is read by namespace name and by the manager namespace's labels (a watch).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import JOBS
from mirror.config import WorkerAccess
from mirror.naming import ANNOTATION_CLUSTER, ANNOTATION_PIN, ANNOTATION_WORKER_SELECTOR
from tests.conftest import MANAGER, ensure_namespace, wait_for
from tests.integration.mirror_env import make_job, mirror_env, wait_syncs

pytestmark = [pytest.mark.integration, pytest.mark.security]

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]


async def test_a_namespace_reaches_only_the_workers_its_access_gives(client_for: ClientFor, cluster: ClusterFn,
                                                                     ns: str) -> None:
    """worker-2 admits only namespaces labelled tenant=b: a Job of ``ns`` pinned to it, or selecting only it,
    waits with a NoWorker Warning naming the rule and no copy anywhere; its unpinned Jobs all land on
    worker-1; a Job of the labelled namespace pinned to worker-2 runs there"""
    other = f"{ns}-b"
    manager = await client_for(MANAGER)
    await ensure_namespace(manager, other, labels={"tenant": "b"})
    async with mirror_env(client_for, cluster, ns, namespaces=[ns, other]) as env:
        one, two = env.config.workers
        workers = [one, two.model_copy(update={
            "labels": {"pool": "b"},
            "access": WorkerAccess.model_validate({"namespaceSelector": {"matchLabels": {"tenant": "b"}}})})]
        ctrl = await env.start(env.config_with(workers=workers))

        async def namespaces_watched() -> bool:
            return ctrl.namespaces is not None and ctrl.namespaces.synced.is_set()

        await wait_for(namespaces_watched, timeout=30, what="the manager namespace watch synced")

        pinned = await env.create(make_job("pinned", annotations={ANNOTATION_PIN: "worker-2"}))
        selecting = await env.create(make_job("selecting", annotations={ANNOTATION_WORKER_SELECTOR: "pool=b"}))
        for i in range(4):
            await env.create(make_job(f"free-{i}"))
        theirs = await manager.create(JOBS, other, make_job("theirs", annotations={ANNOTATION_PIN: "worker-2"}))

        rule = "workers[worker-2].access admits only namespaceSelector {tenant=b}"
        ev = await env.wait_event("pinned", "NoWorker")
        assert ev["type"] == "Warning", ev
        assert ev["message"] == (f"cannot dispatch: worker access: namespace {ns} may not use worker 'worker-2' "
                                 f"named by {ANNOTATION_PIN}: {rule}"), ev
        ev = await env.wait_event("selecting", "NoWorker")
        assert ev["type"] == "Warning", ev
        assert ev["message"] == (f"cannot dispatch: worker access: {ANNOTATION_WORKER_SELECTOR} matches only "
                                 f"workers namespace {ns} may not use: {rule}"), ev

        placed = [await env.wait_condition(f"free-{i}", "Complete") for i in range(4)]
        assert {j["metadata"]["annotations"][ANNOTATION_CLUSTER] for j in placed} == {"worker-1"}
        for i in range(4):
            made = await env.copies_made(placed[i]["metadata"]["uid"])
            assert set(made.values()) == {"worker-1"}, made

        async def theirs_complete() -> bool:
            job = await manager.get(JOBS, other, "theirs")
            return any(c["type"] == "Complete" and c["status"] == "True"
                       for c in (job.get("status") or {}).get("conditions") or [])

        await wait_for(theirs_complete, timeout=60, what="the labelled namespace's Job pinned to worker-2 Complete")
        job = await manager.get(JOBS, other, "theirs")
        assert job["metadata"]["uid"] == theirs["metadata"]["uid"]
        assert job["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2", job["metadata"]

        # Still waiting after more passes: never placed, no copy made anywhere.
        await wait_syncs(10)
        for job in (pinned, selecting):
            now = await env.get(job["metadata"]["name"])
            assert now is not None and ANNOTATION_CLUSTER not in (now["metadata"].get("annotations") or {}), now
            assert await env.copies_made(job["metadata"]["uid"], timeout=5) == {}
    await manager.request("DELETE", f"/api/v1/namespaces/{other}")
