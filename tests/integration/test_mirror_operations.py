"""Operations: health/metrics endpoints, Lease-based leader election with two replicas."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp
import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import LEASES
from mirror.config import LeaderElection
from mirror.controller import MirrorController
from tests.conftest import wait_for
from tests.integration.mirror_env import make_job, mirror_env

pytestmark = pytest.mark.integration

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]


async def _get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}{path}") as r:
        return r.status, await r.text()


async def test_health_readiness_and_metrics(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns, metrics_address="127.0.0.1:0") as env:
        ctrl = MirrorController(env.config)
        task = asyncio.create_task(ctrl.run())
        try:
            await wait_for(lambda: asyncio.sleep(0, ctrl.health_server is not None and ctrl.health_server.port),
                           timeout=20, what="health server")
            assert ctrl.health_server is not None
            port = ctrl.health_server.port
            assert (await _get(port, "/healthz"))[0] == 200

            async def ready() -> bool:
                return (await _get(port, "/readyz"))[0] == 200

            await wait_for(ready, timeout=20, what="/readyz 200")
            await env.create(make_job("m"))
            await env.wait_condition("m", "Complete", timeout=60)
            _, text = await _get(port, "/metrics")
            for name in ("jobmirror_dispatches_total", "jobmirror_status_writes_total", "jobmirror_worker_up",
                         "jobmirror_sync_duration_seconds_bucket", "jobmirror_runtime_queue_depth",
                         "jobmirror_reconcile_errors_total", "jobmirror_redispatches_total",
                         "jobmirror_gc_deletions_total"):
                assert name in text, name
            assert 'jobmirror_worker_up{worker="worker-1"} 1.0' in text
            assert 'jobmirror_status_writes_total{result="ok"}' in text
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await ctrl.stop()


async def test_two_replicas_one_leader_and_failover(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    le = LeaderElection(enabled=True, namespace=ns, lease_name="jobmirror", lease_duration=4,
                        renew_deadline=3, retry_period=1)
    async with mirror_env(client_for, cluster, ns, leader_election=le) as env:
        a = await env.start()
        b = await env.start()

        async def one_leader() -> bool:
            return [a.leading, b.leading].count(True) == 1

        await wait_for(one_leader, timeout=30, what="exactly one leader")
        leader, standby = (a, b) if a.leading else (b, a)
        lease = await env.manager.get(LEASES, ns, "jobmirror")
        holder = lease["spec"]["holderIdentity"]
        await env.create(make_job("before"))
        await env.wait_condition("before", "Complete", timeout=60)
        assert not standby.leading  # the standby never reconciled while the leader lived

        await env.stop(leader)  # a stop: the standby takes over (released Lease, or after leaseDuration)
        await wait_for(lambda: asyncio.sleep(0, standby.leading), timeout=30, what="standby takes over")
        lease = await env.manager.get(LEASES, ns, "jobmirror")
        assert lease["spec"]["holderIdentity"] != holder
        await env.create(make_job("after"))
        await env.wait_condition("after", "Complete", timeout=60)


async def test_graceful_stop_hands_the_lease_to_the_standby(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    """A leader that stops gracefully releases the Lease: the standby leads within a few retry
    periods, far below leaseDuration (15 s here), and the Lease names the new holder."""
    le = LeaderElection(enabled=True, namespace=ns, lease_name="jobmirror", lease_duration=15,
                        renew_deadline=10, retry_period=1)
    async with mirror_env(client_for, cluster, ns, leader_election=le) as env:
        a = await env.start()
        await wait_for(lambda: asyncio.sleep(0, a.leading), timeout=30, what="the first replica leads")
        b = await env.start()
        await asyncio.sleep(2)
        assert not b.leading
        old = (await env.manager.get(LEASES, ns, "jobmirror"))["spec"]["holderIdentity"]
        t0 = asyncio.get_running_loop().time()
        await env.stop(a)
        await wait_for(lambda: asyncio.sleep(0, b.leading), timeout=30, interval=0.1, what="the standby takes over")
        took = asyncio.get_running_loop().time() - t0
        assert took < 6, f"takeover after a graceful stop took {took:.1f}s (leaseDuration 15 s: not released?)"
        spec = (await env.manager.get(LEASES, ns, "jobmirror"))["spec"]
        assert spec["holderIdentity"] not in ("", None, old), spec
        await env.create(make_job("after-handover"))
        await env.wait_condition("after-handover", "Complete", timeout=60)
