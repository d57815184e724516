"""The manager cache holds the Jobs we claim, not the cluster's (issue 11 item 10).

Many Jobs nobody asked us to mirror, in the watched namespace and outside it: none of them
may be in the controller's cache, with a namespace allow-list (a watch per namespace) and
without one (every namespace, filtered as objects arrive).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import JOBS
from tests.conftest import ensure_namespace, wait_for
from tests.integration.mirror_env import make_job, mirror_env

pytestmark = pytest.mark.integration

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]

FOREIGN = "example.com/someone-else"


@pytest.mark.parametrize("allow_list", [True, False], ids=["namespaces", "all-namespaces"])
async def test_non_claimed_jobs_are_not_cached(client_for: ClientFor, cluster: ClusterFn, ns: str,
                                               allow_list: bool) -> None:
    controller = f"example.com/mem-{ns}"  # unique: without an allow-list we watch the whole shared cluster
    over: dict[str, Any] = {"controller_name": controller} | ({} if allow_list else {"namespaces": []})
    async with mirror_env(client_for, cluster, ns, **over) as env:
        elsewhere = f"{ns}-x"
        await ensure_namespace(env.manager, elsewhere)
        foreign = [make_job(f"foreign-{i}", managed_by=FOREIGN, suspend=True) for i in range(120)]
        await asyncio.gather(*(env.create(j) for j in foreign))
        await asyncio.gather(*(env.manager.create(JOBS, elsewhere, make_job(f"out-{i}", managed_by=controller,
                                                                              suspend=True)) for i in range(20)))
        ctrl = await env.start()
        claimed = [make_job(f"mine-{i}", managed_by=controller, suspend=True) for i in range(3)]
        for j in claimed:
            await env.create(j)
        # and a few non-claimed ones arriving by watch, after the list
        await asyncio.gather(*(env.create(make_job(f"late-{i}", managed_by=FOREIGN, suspend=True))
                               for i in range(10)))
        await env.wait_condition("mine-2", "Suspended")

        def cached() -> set[str]:
            assert ctrl.jobs is not None
            return {f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in ctrl.jobs.items()}

        want = {f"{ns}/mine-{i}" for i in range(3)}
        if not allow_list:
            want |= {f"{elsewhere}/out-{i}" for i in range(20)}  # claimed there too: every namespace is ours

        async def only_claimed() -> bool:
            return {k for k in cached() if k.startswith((f"{ns}/", f"{elsewhere}/"))} == want

        await wait_for(only_claimed, timeout=30, what="cache holds exactly the claimed Jobs")
        assert not [k for k in cached() if "/foreign-" in k or "/late-" in k]
        if allow_list:
            assert not [k for k in cached() if not k.startswith(f"{ns}/")]
        await env.stop(ctrl)
        await env.manager.request("DELETE", f"/api/v1/namespaces/{elsewhere}")
