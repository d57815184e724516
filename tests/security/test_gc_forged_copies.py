"""A user who may create Jobs in one worker namespace cannot turn garbage collection off for every
worker, nor push placement away with forged "copies" (issue 32 item 4), on real API servers: the
forged Jobs are created on a worker as such a user can, and the controller runs in-process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, NAMESPACES, Obj
from mirror import metrics
from mirror.jobs.kind import JOB_KIND
from mirror.naming import ANNOTATION_ORIGIN_JOB, ANNOTATION_PIN, LABEL_ORIGIN, LABEL_ORIGIN_UID
from tests.conftest import MANAGER, wait_for
from tests.integration.mirror_env import MirrorEnv, make_job, mirror_env, wait_gc_rounds

pytestmark = [pytest.mark.integration, pytest.mark.security]

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]
FORGED = 100  # as many as one GC round could confirm before: the whole budget


def forged(env: MirrorEnv, name: str, origin_job: str) -> Obj:
    """A Job a worker-namespace user writes to look like our copy: our origin label (seen on real
    copies), an origin uid and annotation of their choosing, no manager-cluster identity."""
    job = make_job(name, suspend=True, managed_by=None)
    job["metadata"]["labels"] = {LABEL_ORIGIN: env.origin, LABEL_ORIGIN_UID: f"forged-{name}"}
    job["metadata"]["annotations"] = {ANNOTATION_ORIGIN_JOB: origin_job}
    return job


async def orphan(env: MirrorEnv, manager_cluster: str) -> Obj:
    """A real copy of ours whose manager Job is gone (deleted while the controller was down)."""
    ghost = make_job("ghost", suspend=True)
    ghost["metadata"].update(namespace=env.ns, uid="ghost-uid")
    body = JOB_KIND.build_copy(ghost, origin=env.origin, origin_cluster=manager_cluster, remote_name="ghost")
    return await env.workers["worker-2"].create(JOBS, env.ns, body)


def manager_reads() -> float:
    return next(s.value for m in metrics.GC_MANAGER_READS.collect() for s in m.samples if s.name.endswith("_total"))


async def test_forged_copies_on_one_worker_stop_neither_gc_nor_placement(client_for: ClientFor,
                                                                         cluster: ClusterFn, ns: str) -> None:
    """on worker-1 a copy naming ``<ns>/..`` and 100 forged copies; on worker-2 a real orphan: GC
    rounds complete, the orphan is collected, the forged copies are read once each and not again,
    and none of them counts as worker-1's load"""
    manager_cluster = (await (await client_for(MANAGER)).get(NAMESPACES, None, "kube-system"))["metadata"]["uid"]
    async with mirror_env(client_for, cluster, ns) as env:
        w1 = env.workers["worker-1"]
        await w1.create(JOBS, ns, forged(env, "dotdot", f"{ns}/.."))
        for first in range(0, FORGED, 25):
            await asyncio.gather(*(w1.create(JOBS, ns, forged(env, f"forged-{i:03d}", f"{ns}/missing-{i:03d}"))
                                   for i in range(first, first + 25)))
        lost = await orphan(env, manager_cluster)
        ctrl = await env.start()

        async def collected() -> bool:
            try:
                await env.workers["worker-2"].get(JOBS, ns, lost["metadata"]["name"])
            except ApiError as exc:
                return exc.not_found
            return False

        await wait_for(collected, timeout=60, what="the orphan on worker-2 collected by GC")
        await wait_gc_rounds(2)  # the forged copy that waited for the first round's budget is read too
        reads = manager_reads()
        await wait_gc_rounds(3)
        assert manager_reads() == reads, "unchanged forged copies were read again"
        for name in ("dotdot", "forged-000", f"forged-{FORGED - 1:03d}"):
            await w1.get(JOBS, ns, name)  # unproven copies are kept, never deleted on their word

        worker = ctrl.workers["worker-1"]
        await wait_for(lambda: asyncio.sleep(0, len(worker.copies(JOB_KIND)) == FORGED + 1), timeout=30,
                       what="the forged copies in worker-1's cache")
        assert worker.unfinished() == 0, "forged copies counted as load"
        # A real copy does count.
        await env.create(make_job("real", outcome="hang", annotations={ANNOTATION_PIN: "worker-1"}))
        await env.wait_copy("real")
        await wait_for(lambda: asyncio.sleep(0, worker.unfinished() == 1), timeout=30, what="worker-1's load 1")
