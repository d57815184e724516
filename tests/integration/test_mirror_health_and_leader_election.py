"""Operating the controller: health/metrics endpoints, Lease-based leader election with two replicas."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import LEASES
from mirror.config import Config, LeaderElection
from mirror.controller import MirrorController
from mirror.kinds import QueueKey
from testkit.tcpproxy import FreezableProxy, route_kubeconfig, server_of
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
    # leaseDuration - renewDeadline >= requestTimeout, as the config requires (a write sent before a
    # lost renewal lands before a standby leads).
    le = LeaderElection(enabled=True, namespace=ns, lease_name="jobmirror", lease_duration=6,
                        renew_deadline=3, retry_period=1)
    async with mirror_env(client_for, cluster, ns, leader_election=le, request_timeout=3.0) as env:
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
    periods, far below leaseDuration (20 s here), and the Lease names the new holder."""
    le = LeaderElection(enabled=True, namespace=ns, lease_name="jobmirror", lease_duration=20,
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
        assert took < 6, f"takeover after a graceful stop took {took:.1f}s (leaseDuration 20 s: not released?)"
        spec = (await env.manager.get(LEASES, ns, "jobmirror"))["spec"]
        assert spec["holderIdentity"] not in ("", None, old), spec
        await env.create(make_job("after-handover"))
        await env.wait_condition("after-handover", "Complete", timeout=60)


async def test_frozen_leader_stops_before_the_standby_leads(client_for: ClientFor, cluster: ClusterFn, ns: str,
                                                            tmp_path: Path) -> None:
    """The leader's manager connection hangs (TCP open, nothing passes) while a standby runs.

    The frozen leader stops leading at its renew deadline, before the standby can take the
    Lease, and its last reconcile ends before the standby's first one starts (issue 11 item 5).
    """
    # Requests time out at 10 s, so the hang is ended by the lost Lease, not by a timeout; the
    # Lease outlasts such a request (13 - 3 >= 10), as the config requires.
    le = LeaderElection(enabled=True, namespace=ns, lease_name="jobmirror", lease_duration=13,
                        renew_deadline=3, retry_period=1)
    async with mirror_env(client_for, cluster, ns, leader_election=le, request_timeout=10.0) as env:
        kubeconfig = env.clusters["manager"].kubeconfig
        proxy = FreezableProxy(*server_of(kubeconfig))
        port = await proxy.start()
        intervals: dict[str, list[list[float]]] = {"a": [], "b": []}

        def instrumented(name: str, cfg: Config) -> MirrorController:
            ctrl = MirrorController(cfg)
            inner = ctrl._reconcile

            async def reconcile(key: QueueKey) -> float | None:
                span = [time.monotonic(), float("inf")]
                intervals[name].append(span)
                try:
                    return await inner(key)
                finally:
                    span[1] = time.monotonic()

            ctrl._reconcile = reconcile  # type: ignore[method-assign]
            env.controllers.append((ctrl, asyncio.create_task(ctrl.run(health=False))))
            return ctrl

        try:
            a = instrumented("a", env.config_with(
                manager_kubeconfig=route_kubeconfig(kubeconfig, tmp_path / "via-proxy.yaml", port)))
            await wait_for(lambda: asyncio.sleep(0, a.is_leader), timeout=30, what="the proxied replica leads")
            b = instrumented("b", env.config)
            names = [f"j{i}" for i in range(12)]
            for n in names[:4]:
                await env.create(make_job(n, duration_ms=300))
            await env.wait_condition(names[0], "Complete", timeout=60)
            assert intervals["a"] and not intervals["b"] and not b.is_leader

            proxy.freeze()
            for n in names[4:]:  # work arrives while the leader hangs
                await env.create(make_job(n, duration_ms=300))
            await wait_for(lambda: asyncio.sleep(0, b.is_leader), timeout=30, interval=0.05, what="standby leads")
            assert a._elector is not None and b._elector is not None
            assert a._elector.lost_at is not None and b._elector.acquired_at is not None
            assert a._elector.lost_at < b._elector.acquired_at, "two leaders at once"
            assert not a.is_leader
            for n in names:
                await env.wait_condition(n, "Complete", timeout=90)
            # Never two leaders reconciling at once: all of a's passes ended before b's first began.
            assert intervals["b"]
            assert max(end for _, end in intervals["a"]) < min(start for start, _ in intervals["b"])
        finally:
            await proxy.close()
