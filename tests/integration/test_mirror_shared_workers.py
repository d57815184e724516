"""Several jobmirror installations on one worker (issue 11, item 4).

Manager A is the ``manager`` cluster, manager B is worker-2's API server; both place on
worker-1 only. Neither may garbage-collect the other's running copies: every Job runs
exactly once, across many GC rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import EVENTS, JOBS
from mirror import metrics
from mirror.naming import LABEL_ORIGIN_UID
from tests.conftest import WORKER_1, WORKER_2, ensure_namespace, wait_for
from tests.integration.mirror_env import cond, make_job, mirror_env

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]

GC_INTERVAL = 1.0
RUN_MS = 8000  # each Job runs for ~8 GC rounds of each manager


def _gc_deletions(worker: str) -> float:
    return sum(metrics.GC_DELETIONS.labels(worker, r)._value.get() for r in ("orphan", "stale"))


@pytest.mark.integration
@pytest.mark.parametrize("origin", [None, "shared"], ids=["default-config", "both-ship-one-origin"])
async def test_two_installations_never_collect_each_others_copies(
    client_for: ClientFor, cluster: ClusterFn, ns: str, origin: str | None
) -> None:
    shared = f"{origin}-{ns}" if origin else None
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1,), origin=shared,
                          gc_interval=GC_INTERVAL) as env:
        b_manager = await client_for(WORKER_2)
        await ensure_namespace(b_manager, ns)
        a_ctrl = await env.start()
        b_ctrl = await env.start(env.config_with(manager_kubeconfig=cluster(WORKER_2).kubeconfig))
        deleted_before = _gc_deletions("worker-1")

        async def submit(prefix: str, client: ClusterClient) -> dict[str, str]:
            made = [await env.create(make_job(f"{prefix}-{i}", duration_ms=RUN_MS), client) for i in range(3)]
            return {j["metadata"]["uid"]: j["metadata"]["name"] for j in made}

        uids = {"a": await submit("a", env.manager), "b": await submit("b", b_manager)}
        seen: dict[str, set[str]] = defaultdict(set)  # manager uid -> copy uids ever seen on worker-1
        max_unproven = 0.0

        async def watch_copies() -> None:
            nonlocal max_unproven
            while True:
                items, _ = await env.workers["worker-1"].list_all(JOBS, ns, label_selector=LABEL_ORIGIN_UID)
                for it in items:
                    seen[it["metadata"]["labels"][LABEL_ORIGIN_UID]].add(it["metadata"]["uid"])
                max_unproven = max(max_unproven, metrics.GC_UNPROVEN.labels("worker-1")._value.get())
                await asyncio.sleep(0.3)

        watcher = asyncio.create_task(watch_copies())
        try:
            for side, client in (("a", env.manager), ("b", b_manager)):
                for name in uids[side].values():
                    async def complete(name: str = name, client: ClusterClient = client) -> bool:
                        return cond(await env.get(name, client), "Complete") == "True"

                    await wait_for(complete, timeout=120, what=f"{side}: {name} Complete")
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

        assert a_ctrl.origin != b_ctrl.origin if origin is None else a_ctrl.origin == b_ctrl.origin
        assert a_ctrl.manager_cluster != b_ctrl.manager_cluster
        for side, client in (("a", env.manager), ("b", b_manager)):
            for uid, name in uids[side].items():
                job = await env.get(name, client)
                assert job is not None and job["status"].get("succeeded") == 1 and not job["status"].get("failed")
                # Exactly one run: one copy ever existed (polled), and one was ever created (watched).
                assert len(seen[uid]) == 1, f"{side}/{name} had copies {seen[uid]}"
                made = await env.copies_made(uid)
                assert list(made.values()) == ["worker-1"], f"{side}/{name} had copies {made}"
                evs, _ = await client.list_all(EVENTS, ns, field_selector=f"involvedObject.name={name}")
                assert not [e for e in evs if e["reason"] in ("Redispatched", "NameCollision")]
        assert _gc_deletions("worker-1") == deleted_before
        if origin is not None:
            # Each GC saw the other's copies under the shared origin and refused to delete them.
            assert max_unproven > 0
