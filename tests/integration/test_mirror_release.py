"""Deletion never hangs forever (issue 11, item 6).

A deleted manager Job whose copy sits on an unreachable worker keeps its finalizer at most
``workerLostTimeout``; then it is released, evented, and GC deletes the copy when the worker
answers. Narrowing ``namespaces`` or changing ``controllerName`` releases our finalizer from
the Jobs this installation no longer claims.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from jobapi.names import JOB_NAME_LABELS
from kruntime.client import ApiError, ClusterClient
from kruntime.ratelimit import current_wait
from kruntime.resources import JOBS, PODS, Obj, Resource
from mirror import metrics
from mirror.naming import ANNOTATION_CLAIMED_BY, ANNOTATION_DELETE_PROPAGATION, ANNOTATION_PIN, FINALIZER
from tests.conftest import wait_for
from tests.integration.mirror_env import MirrorEnv, make_job, mirror_env

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]
JOB_NAME_LABEL = JOB_NAME_LABELS[1]


@pytest.mark.integration
async def test_deleted_job_on_an_unreachable_worker_is_released_after_worker_lost_timeout(
        client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns, worker_lost_timeout=8.0) as env:
        env.expect_errors("transport", "conflict")  # worker-2 is stopped; the test deletes the Job
        await env.start()
        created = await env.create(make_job("held", duration_ms=60000, annotations={ANNOTATION_PIN: "worker-2"}))
        uid = created["metadata"]["uid"]
        await wait_for(lambda: env.copies(uid), timeout=30, what="copy on worker-2")
        before = metrics.COPIES_LEFT_FOR_GC.labels("worker-2")._value.get()
        w2 = env.clusters["worker-2"]
        w2.stop()
        try:
            await env.manager.delete(JOBS, ns, "held")
            await asyncio.sleep(3)
            held = await env.get("held")  # within workerLostTimeout the finalizer still waits
            assert held is not None and FINALIZER in held["metadata"]["finalizers"]
            await env.wait_gone("held", timeout=30)
            event = await env.wait_event("held", "CopyLeftForGC", timeout=10)
            assert "worker-2" in event["message"] and "garbage collection" in event["message"]
            assert metrics.COPIES_LEFT_FOR_GC.labels("worker-2")._value.get() > before
        finally:
            w2.start()
        # The returned worker's copy belongs to a manager Job that is gone: GC deletes it.
        await env.wait_gone("held", env.workers["worker-2"], timeout=60)


async def _claimed_and_running(env: MirrorEnv, name: str) -> str:
    created = await env.create(make_job(name, duration_ms=60000))
    uid = str(created["metadata"]["uid"])

    async def stamped() -> bool:
        j = await env.get(name)
        md = (j or {}).get("metadata") or {}
        return FINALIZER in (md.get("finalizers") or []) and (md.get("annotations") or {}).get(
            ANNOTATION_CLAIMED_BY) == env.origin

    await wait_for(stamped, timeout=30, what=f"{name} claimed")
    await wait_for(lambda: env.copies(uid), timeout=30, what=f"copy of {name}")
    return uid


async def _released_and_deletable(env: MirrorEnv, name: str, uid: str) -> None:
    async def released() -> bool:
        j = await env.get(name)
        return j is not None and FINALIZER not in (j["metadata"].get("finalizers") or [])

    await wait_for(released, timeout=30, what=f"finalizer released from {name}")
    event = await env.wait_event(name, "FinalizerReleased", timeout=10)
    assert "no longer claimed" in event["message"] and "left as it is" in event["message"]
    assert await env.copies(uid) != {}  # the copy is not ours to touch any more
    await env.manager.delete(JOBS, env.ns, name)
    await env.wait_gone(name, timeout=10)  # deletion does not hang


@pytest.mark.integration
@pytest.mark.parametrize("change", ["narrowed-namespaces", "renamed-controller"])
async def test_jobs_no_longer_claimed_lose_the_finalizer(client_for: ClientFor, cluster: ClusterFn, ns: str,
                                                         change: str) -> None:
    """Restarted with ``namespaces`` narrowed, or another ``controllerName``: our finalizer goes."""
    async with mirror_env(client_for, cluster, ns) as env:
        await env.start()
        uid = await _claimed_and_running(env, "unclaimed")
        await env.stop()
        if change == "narrowed-namespaces":
            await env.start(env.config_with(namespaces=[f"{ns}-elsewhere"]))
        else:
            await env.start(env.config_with(controller_name="example.com/other-mirror"))
        await _released_and_deletable(env, "unclaimed", uid)


async def _copy_pods(env: MirrorEnv, name: str) -> list[str]:
    items, _ = await env.workers["worker-1"].list_all(PODS, env.ns, label_selector=f"{JOB_NAME_LABEL}={name}")
    return [p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")]


async def _running_on_worker_1(env: MirrorEnv, name: str, propagation: str) -> None:
    await env.create(make_job(name, completions=2, parallelism=2, duration_ms=60000,
                              annotations={ANNOTATION_PIN: "worker-1", ANNOTATION_DELETE_PROPAGATION: propagation}))

    async def pods_up() -> bool:
        return len(await _copy_pods(env, name)) == 2

    await wait_for(pods_up, timeout=60, what=f"two pods of {name} on worker-1")


@pytest.mark.integration
async def test_orphan_annotation_orphans_the_copys_pods_on_the_worker(client_for: ClientFor, cluster: ClusterFn,
                                                                          ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        await env.start()
        await _running_on_worker_1(env, "orphaned", "Orphan")
        pods = await _copy_pods(env, "orphaned")
        await env.manager.delete(JOBS, ns, "orphaned")
        await env.wait_gone("orphaned", timeout=30)
        await env.wait_gone("orphaned", env.workers["worker-1"], timeout=30)
        event = await env.wait_event("orphaned", "RemoteDeleted", timeout=10)
        assert "propagation Orphan" in event["message"]
        await asyncio.sleep(2)
        assert sorted(await _copy_pods(env, "orphaned")) == sorted(pods)  # still running, orphaned


@pytest.mark.integration
async def test_foreground_annotation_holds_the_manager_job_until_the_remote_pods_are_gone(
        client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        env.expect_errors("conflict")  # the test deletes the Job while the controller writes it
        await env.start()
        await _running_on_worker_1(env, "fg", "Foreground")
        await env.manager.delete(JOBS, ns, "fg")
        await env.wait_gone("fg", timeout=60)
        # Released only after the worker deleted the pods, then the copy.
        assert await env.get("fg", env.workers["worker-1"]) is None
        items, _ = await env.workers["worker-1"].list_all(PODS, ns, label_selector=f"{JOB_NAME_LABEL}=fg")
        assert items == []
        event = await env.wait_event("fg", "RemoteDeleted", timeout=10)
        assert "propagation Foreground" in event["message"]


@pytest.mark.integration
async def test_a_create_whose_answer_was_lost_is_deleted_before_the_moved_job_is_released(
        client_for: ClientFor, cluster: ClusterFn, ns: str, tmp_path: Path) -> None:
    """worker-1 carries out our create but its answer never arrives (found by the chaos tier's
    jobset-mix: the API server stopping mid-request). The Job moves to worker-2 and finishes there;
    worker-1's cache never showed the copy, yet it holds one. The finished Job keeps its finalizer
    until worker-1 answers and that copy is deleted: released earlier, nothing would be left to
    delete it but GC.

    The lost answer is made at the client's edge: the controller's connection to worker-1 is frozen
    (its watches and probes hear nothing from then on), the create is carried out on the real server
    through the test's own client, and the controller's call ends as a dropped connection does."""
    async with mirror_env(client_for, cluster, ns, worker_lost_timeout=3.0, request_timeout=2.0) as env:
        env.expect_errors("transport")
        proxy, routed = await env.worker_via_proxy("worker-1", tmp_path)
        w1 = env.workers["worker-1"]  # the test's own client: not through the proxy
        try:
            ctrl = await env.start(routed)

            async def both_healthy() -> bool:
                return len(ctrl.workers) == 2 and all(w.healthy for w in ctrl.workers.values())

            await wait_for(both_healthy, timeout=30, what="both workers healthy")
            client = ctrl.workers["worker-1"].client
            sent = client.create

            async def answer_lost(res: Resource, namespace: str | None, body: Obj, **kw: Any) -> Obj:
                if body["metadata"]["name"] != "unheard":
                    return await sent(res, namespace, body, **kw)
                proxy.freeze()
                if (wait := current_wait()) is not None:
                    wait.took_token(0.0)  # the request went out
                await w1.create(res, namespace, body)
                raise ApiError(0, "Transport", f"POST {res.path(namespace)}: ServerDisconnectedError "
                               "(the test dropped the answer)", cluster="worker-1")

            client.create = answer_lost  # type: ignore[method-assign]
            created = await env.create(make_job("unheard", duration_ms=3000, annotations={ANNOTATION_PIN: "worker-1"}))
            uid = str(created["metadata"]["uid"])
            await wait_for(lambda: env.get("unheard", w1), timeout=30, what="the create carried out on worker-1")
            await env.manager.patch(JOBS, ns, "unheard", {"metadata": {"annotations": {ANNOTATION_PIN: None}}})
            await env.wait_event("unheard", "Redispatched", timeout=60)
            await env.wait_condition("unheard", "Complete", timeout=60)
            for _ in range(8):  # four resyncs: worker-1 may hold a copy, so the finalizer stays
                job = await env.get("unheard")
                assert job is not None and FINALIZER in (job["metadata"].get("finalizers") or []), (
                    "released while worker-1, unheard from, may hold a copy")
                await asyncio.sleep(0.5)
            proxy.thaw()

            async def released() -> bool:
                job = await env.get("unheard")
                return job is not None and FINALIZER not in (job["metadata"].get("finalizers") or [])

            await wait_for(released, timeout=60, what="the finalizer released once worker-1 answers")
            left = await env.get("unheard", w1)
            assert left is None or left["metadata"].get("deletionTimestamp"), "worker-1's copy outlived the release"
            assert sorted((await env.copies_made(uid)).values()) == ["worker-1", "worker-2"]
        finally:
            await proxy.close()
