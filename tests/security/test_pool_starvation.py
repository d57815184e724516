"""A namespaces allow-list of 200 entries never starves status writes or the Lease (issue 19 item 4),
on real API servers: the manager watches (one per listed namespace) hold connections of their own
pool, so the reconcile pool stays free and the leader keeps its Lease while Jobs run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from mirror.config import LeaderElection
from tests.conftest import MANAGER, ensure_namespace, wait_for
from tests.integration.mirror_env import make_job, mirror_env

pytestmark = [pytest.mark.integration, pytest.mark.security]

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]


def in_use(client: ClusterClient) -> int:
    """Connections of ``client``'s own pool held right now."""
    return len(client._session.connector._acquired)  # type: ignore[union-attr]


async def test_200_namespaces_hold_no_reconcile_connection_and_the_leader_keeps_its_lease(
        client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    """an allow-list of 200 namespaces (one watch each): all watching, Jobs mirrored to Complete, the
    reconcile pool nearly idle, the Lease held throughout"""
    await ensure_namespace(await client_for(MANAGER), ns)
    namespaces = [ns, *(f"{ns}-{i:03d}" for i in range(199))]
    le = LeaderElection(enabled=True, namespace=ns, lease_name="jobmirror", lease_duration=20, renew_deadline=10,
                        retry_period=2)
    async with mirror_env(client_for, cluster, ns, namespaces=namespaces, leader_election=le) as env:
        ctrl = await env.start()

        async def all_watching() -> bool:
            informer = ctrl.informers.get("Job")
            return informer is not None and informer.synced.is_set()

        await wait_for(all_watching, timeout=60, what="the 200 namespace watches listed")
        assert ctrl.manager is not None and ctrl.watches is not None
        watches = ctrl.watches
        await wait_for(lambda: asyncio.sleep(0, in_use(watches) >= 200), timeout=30,
                       what="200 watches open on the watch pool")
        for i in range(10):
            await env.create(make_job(f"j{i}"))
        peak = 0
        for _ in range(30):
            peak = max(peak, in_use(ctrl.manager))
            if all([await env.get(f"j{i}") for i in range(10)]):
                break
            await asyncio.sleep(0.2)
        for i in range(10):
            await env.wait_condition(f"j{i}", "Complete", timeout=60)
        assert peak < 32, f"the reconcile pool held {peak} connections"
        elector = ctrl._elector
        assert elector is not None and elector.is_leader() and elector.lost_at is None
