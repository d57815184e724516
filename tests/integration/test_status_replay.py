"""Every translated status, for generated worker histories, is accepted by a REAL API server.

The hypothesis strategy is the one the unit property tests use (new- and old-style
worker Job controllers, suspend/resume, unreachable workers, re-dispatch). Here each
step is written for real, through the status subresource, so the API server judges
each write against the previous one exactly as it will in production — on the default
release and on every other manager release ``make test`` builds (the matrix corners down to
the oldest we support): the rules are meant to be the same from 1.33 to 1.37, and this is
where a release that differs would show.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings

from clusterbed import versions
from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from testkit.status_sequences import WorkerSequence, replay, worker_sequences
from testkit.waiting import ensure_namespace
from tests.conftest import apiserver_at

pytestmark = [pytest.mark.integration, pytest.mark.built_beside]

NS = f"replay-{uuid.uuid4().hex[:6]}"


async def _replay(kubeconfig: str, seq: WorkerSequence) -> None:
    client = await ClusterClient.from_kubeconfig("manager", kubeconfig, qps=0)
    try:
        await ensure_namespace(client, NS)
        await replay(client, NS, seq, f"r-{uuid.uuid4().hex[:10]}")
    finally:
        await client.close()


@pytest.mark.parametrize("version", [versions.KUBE_VERSION, *versions.CORNER_KUBE_VERSIONS])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(seq=worker_sequences(max_steps=15))
def test_every_translated_status_is_accepted_by_the_real_api_server(
    cluster: Callable[[ClusterSpec], LocalCluster], version: str, seq: WorkerSequence
) -> None:
    kubeconfig = str(cluster(apiserver_at(version)).kubeconfig)
    asyncio.run(_replay(kubeconfig, seq))

