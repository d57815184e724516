"""Fixtures for the differential suite: both clusters, our controller, all scenarios at once.

The scenarios selected for this session start together (each in its own namespace, the
same namespace name on both clusters) as soon as the first conformance test asks for its
result; every test then awaits and compares just its own pair. Wall time is therefore the
slowest scenario plus cluster start-up, not the sum.

Both clusters run the bed's Kubernetes release (``clusterbed.versions.KUBE_VERSION``);
``JOBMIRROR_DIFFERENTIAL_KUBE_VERSION=1.35.4`` runs them on another, and the builtin
controller then follows that release's semantics (it reads the API server's version).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import Obj
from tests.conformance.harness import (
    DIFFERENTIAL_VERSION_ENV,
    differential_specs,
    ensure_controller,
    ensure_view,
    new_namespace_name,
    run_scenario,
    stop_controllers,
)
from tests.conformance.scenarios import BY_NAME
from tests.conftest import KCM_JOBS, KCM_NO_JOBS

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
Pair = tuple[Obj, Obj]

#: kube-controller-manager's side and ours, at the release the differential runs against.
UPSTREAM, OURS = differential_specs(os.environ.get(DIFFERENTIAL_VERSION_ENV), KCM_JOBS, KCM_NO_JOBS)

#: Scenarios in flight at once (each is two Jobs); bounds the load on a 2-core machine.
MAX_CONCURRENT = 30


@pytest.fixture(scope="session")
async def differential(request: pytest.FixtureRequest, client_for: ClientFor,
                       cluster: Callable[[ClusterSpec], LocalCluster]) -> AsyncIterator[dict[str, asyncio.Task[Pair]]]:
    # One after the other: clusters created concurrently can be handed the same port.
    upstream_client = await client_for(UPSTREAM)
    ours_client = await client_for(OURS)
    ours_cluster = await asyncio.to_thread(cluster, OURS)
    await ensure_controller(OURS.name, str(ours_cluster.kubeconfig))
    upstream, ours = await ensure_view(upstream_client), await ensure_view(ours_client)
    gate = asyncio.Semaphore(MAX_CONCURRENT)

    async def pair(name: str) -> Pair:
        sc = BY_NAME[name]
        ns = new_namespace_name()
        async with gate:
            a, b = await asyncio.gather(run_scenario(upstream, sc, ns), run_scenario(ours, sc, ns),
                                        return_exceptions=True)
        if isinstance(a, BaseException):
            raise AssertionError(f"scenario {name} failed on kube-controller-manager ({ns}): {a}") from a
        if isinstance(b, BaseException):
            raise AssertionError(f"scenario {name} failed on the builtin controller ({ns}): {b}") from b
        return a, b

    selected = [item.callspec.params["scenario"] for item in request.session.items
                if item.get_closest_marker("conformance") and hasattr(item, "callspec")
                and "scenario" in item.callspec.params]
    tasks = {name: asyncio.create_task(pair(name), name=f"scenario-{name}") for name in dict.fromkeys(selected)}
    yield tasks
    for t in tasks.values():
        t.cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    await stop_controllers()
