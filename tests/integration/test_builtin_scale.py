"""Scale: 1000 completions at parallelism 100 on an API-server-only cluster.

Pods are finished in bulk straight from Pending (one status write each, from the shared
informer cache), so the test measures the controller, not the test's own kubelet role.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from builtin_controller import fields
from clusterbed import kubelet
from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import PODS, Obj
from tests.conformance.harness import ClusterView, driver, ensure_controller, ensure_view, job_spec, stop_controllers
from tests.conftest import APISERVER_ONLY

pytestmark = pytest.mark.integration

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]


@pytest.fixture(scope="session")
async def scale_view(client_for: ClientFor, cluster: Callable[[ClusterSpec], LocalCluster]
                     ) -> AsyncIterator[ClusterView]:
    client = await client_for(APISERVER_ONLY)
    lc = await asyncio.to_thread(cluster, APISERVER_ONLY)
    await ensure_controller(APISERVER_ONLY.name, str(lc.kubeconfig))
    yield await ensure_view(client)
    await stop_controllers()


async def _succeed(client: ClusterClient, pod: Obj) -> None:
    try:
        await kubelet.write_status(client, pod, kubelet.terminated_status(pod, succeeded=True))
    except ApiError as exc:
        if exc.conflict:
            fresh = await client.get(PODS, fields.namespace(pod), fields.name(pod))
            await kubelet.write_status(client, fresh, kubelet.terminated_status(fresh, succeeded=True))
        elif not exc.not_found:
            raise


async def test_thousand_completions_at_parallelism_hundred(scale_view: ClusterView) -> None:
    completions, parallelism = 1000, 100
    async with driver(scale_view) as d:
        d.autopilot = False
        started = time.monotonic()
        await d.create_job(job_spec(completions=completions, parallelism=parallelism))
        handled: set[str] = set()
        most_active = 0
        gate = asyncio.Semaphore(50)

        async def one(p: Obj) -> None:
            async with gate:
                await _succeed(d.client, p)

        deadline = time.monotonic() + 150
        while not d.cond("Complete"):
            assert time.monotonic() < deadline, f"not complete in time: {(d.job or {}).get('status')}"
            active = d.active()
            most_active = max(most_active, len(active))
            batch = [p for p in active if fields.uid(p) not in handled]
            handled.update(fields.uid(p) for p in batch)
            if batch:
                await asyncio.gather(*(one(p) for p in batch))
            await asyncio.sleep(0.1)
        elapsed = time.monotonic() - started
        await d.wait_settled(1.0)
        snap = await d.snapshot()
    job = snap["job"]
    print(f"\n1000 completions / parallelism 100: Complete after {elapsed:.1f}s")
    assert job["terminal"] == "Complete"
    assert (job["succeeded"], job["failed"], job["active"], job["uncounted"]) == (completions, 0, 0, (0, 0))
    assert snap["pods_created"] == completions  # no duplicates, no extras
    assert snap["pods_with_finalizer"] == 0
    assert most_active <= parallelism
    assert [c[0] for c in job["conditions"]] == ["SuccessCriteriaMet", "Complete"]
