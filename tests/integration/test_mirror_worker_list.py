"""Worker-list changes between controller runs (issue 11 item 2), against the real cluster bed.

A renamed entry for the same cluster keeps the running copy; a removed worker is a lost
worker (nothing re-dispatched before workerLostTimeout, events say why); its stale copy is
deleted once the worker is configured again.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import JOBS
from mirror.config import Worker
from mirror.naming import ANNOTATION_CLUSTER
from tests.conftest import wait_for
from tests.integration.mirror_env import MirrorEnv, make_job, mirror_env

pytestmark = pytest.mark.integration

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]


async def _running_copy(env: MirrorEnv, name: str) -> tuple[str, str, str]:
    """Create a long Job; wait until it runs. Returns (manager uid, worker, copy uid)."""
    created = await env.create(make_job(name, duration_ms=120_000))
    uid = created["metadata"]["uid"]

    async def running() -> tuple[str, str] | None:
        j = await env.get(name)
        copies = await env.copies(uid)
        if not j or not (j.get("status") or {}).get("active") or len(copies) != 1:
            return None
        worker, copy = next(iter(copies.items()))
        return worker, copy["metadata"]["uid"]

    worker, copy_uid = await wait_for(running, timeout=60, what=f"{name} running")
    return uid, worker, copy_uid


def _workers(env: MirrorEnv, names: dict[str, str]) -> list[Worker]:
    """Config entries: ``names`` maps a bed worker to the entry name it is configured under."""
    return [Worker(name=entry, kubeconfig=env.clusters[bed].kubeconfig) for bed, entry in names.items()]


async def test_renamed_worker_keeps_the_running_copy(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        ctrl = await env.start()
        uid, worker, copy_uid = await _running_copy(env, "renamed")
        await env.stop(ctrl)
        other = next(w for w in env.workers if w != worker)
        await env.start(env.config_with(workers=_workers(env, {worker: f"{worker}-new", other: other})))

        async def moved() -> bool:
            j = await env.get("renamed")
            return bool(j and j["metadata"]["annotations"][ANNOTATION_CLUSTER] == f"{worker}-new")

        await wait_for(moved, timeout=30, what="placement moved to the new name")
        await env.wait_event("renamed", "PlacementMoved")
        copies = await env.copies(uid)
        assert list(copies) == [worker], copies  # one copy, on the same cluster
        assert copies[worker]["metadata"]["uid"] == copy_uid  # the same copy: never re-created
        assert not [e for e in await env.events("renamed") if e["reason"] in ("WorkerLost", "Redispatched")]


async def test_removed_worker_waits_for_worker_lost_timeout(client_for: ClientFor, cluster: ClusterFn,
                                                            ns: str) -> None:
    timeout = 8.0
    async with mirror_env(client_for, cluster, ns, worker_lost_timeout=timeout) as env:
        ctrl = await env.start()
        uid, worker, _ = await _running_copy(env, "removed")
        await env.stop(ctrl)
        other = next(w for w in env.workers if w != worker)
        started = time.monotonic()
        await env.start(env.config_with(workers=_workers(env, {other: other})))
        await env.wait_event("removed", "WorkerNotConfigured", timeout=15)
        assert set(await env.copies(uid)) == {worker}  # not re-dispatched at once
        await env.wait_event("removed", "Redispatched", timeout=60)
        assert time.monotonic() - started >= timeout  # never before workerLostTimeout
        lost = await env.wait_event("removed", "WorkerLost")
        assert "not in the configuration" in lost["message"]
        j = await env.get("removed")
        assert j is not None and j["metadata"]["annotations"][ANNOTATION_CLUSTER] == other
        # Configured again: its stale copy is deleted, the moved one keeps running.
        await env.stop()
        await env.start(env.config_with(workers=_workers(env, {worker: worker, other: other})))

        async def stale_gone() -> bool:
            return set(await env.copies(uid)) == {other}

        await wait_for(stale_gone, timeout=30, what="stale copy deleted on the re-added worker")
        # a removed worker's WorkerNotConfigured event is written once per Job, not per pass
        noted = [e for e in await env.events("removed") if e["reason"] == "WorkerNotConfigured"]
        assert len(noted) == 1 and noted[0].get("count", 1) == 1, noted


async def test_deleting_a_job_placed_on_a_removed_worker_says_its_copy_is_left(
        client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        ctrl = await env.start()
        uid, worker, _ = await _running_copy(env, "deleted")
        await env.stop(ctrl)
        other = next(w for w in env.workers if w != worker)
        await env.start(env.config_with(workers=_workers(env, {other: other})))
        await env.wait_event("deleted", "WorkerNotConfigured", timeout=15)
        await env.manager.delete(JOBS, ns, "deleted")
        left = await env.wait_event("deleted", "CopyLeftForGC")
        assert f"worker {worker} is not in the configuration" in left["message"]
        await env.wait_gone("deleted")
        assert set(await env.copies(uid)) == {worker}  # left, unwatched, as the event says
        await env.stop()
        await env.start(env.config_with(workers=_workers(env, {worker: worker, other: other})))

        async def collected() -> bool:
            return await env.copies(uid) == {}

        await wait_for(collected, timeout=30, what="the left copy garbage-collected once configured again")
