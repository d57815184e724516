"""A decided outcome is final (issue 11, item 3).

Once the manager Job carries SuccessCriteriaMet or FailureTarget, a vanished copy is not
created again: the Job is finished from its last mirrored status, with an event. The interim
condition is written on the manager by the test (as the mirror would copy it from the worker)
so that the window between "decided" and "terminal" is as long as the test needs; the
manager's API server judges every write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from clusterbed import kubelet
from clusterbed.cluster import ClusterSpec, LocalCluster
from jobapi.times import format_time
from kruntime.client import ClusterClient
from kruntime.resources import JOBS, PODS
from mirror.naming import ANNOTATION_CLUSTER, ANNOTATION_PIN, FINALIZER
from tests.conftest import wait_for
from tests.integration.mirror_env import MirrorEnv, cond, make_job, mirror_env

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]


async def _decide(env: MirrorEnv, name: str, ctype: str, reason: str, message: str) -> None:
    """Add the interim condition on the manager, as the mirror does when the worker decides."""
    job = await env.get(name)
    assert job is not None
    now = format_time(datetime.now(UTC))
    conds = [*((job.get("status") or {}).get("conditions") or []),
             {"type": ctype, "status": "True", "reason": reason, "message": message,
              "lastProbeTime": now, "lastTransitionTime": now}]
    await env.manager.patch(JOBS, env.ns, name, {"status": {"conditions": conds}}, subresource="status")

    # In production the mirror writes this condition itself, so it knows it; written here, a copy
    # deleted before the controller's cache has it is re-created like any undecided Job's (seen
    # once in bench versions under load: two copies made, the Job re-run, no FinishedWithoutCopy).
    async def seen() -> bool:
        return all(cond(c.jobs.get(f"{env.ns}/{name}") if c.jobs is not None else None, ctype) == "True"
                   for c, _ in env.controllers)

    await wait_for(seen, timeout=30, what=f"{ctype} in the controller's cache")


async def _progressing_on_worker_1(env: MirrorEnv, name: str) -> str:
    """A 5-completion Job pinned to worker-1, once one completion is mirrored; its uid."""
    created = await env.create(make_job(name, completions=5, parallelism=1, duration_ms=1500,
                                        annotations={ANNOTATION_PIN: "worker-1"}))

    async def probe() -> bool:
        st = ((await env.get(name)) or {}).get("status") or {}
        return bool(st.get("active")) and int(st.get("succeeded") or 0) >= 1

    await wait_for(probe, timeout=60, what=f"{name} running with 1+ succeeded")
    return str(created["metadata"]["uid"])


async def _succeed_running_pod(worker: ClusterClient, ns: str, job: str, index: int) -> None:
    """End a running (kwok 'hang') pod of one index with exit 0, as its kubelet would report it."""
    selector = f"batch.kubernetes.io/job-name={job},batch.kubernetes.io/job-completion-index={index}"
    running: list[dict[str, Any]] = []

    async def probe() -> bool:
        pods = (await worker.list(PODS, ns, label_selector=selector)).get("items") or []
        running[:] = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        return bool(running)

    await wait_for(probe, timeout=60, what=f"a running pod of {job} index {index}")
    await kubelet.finish_pod(worker, running[0], succeeded=True)


@pytest.mark.integration
async def test_decided_job_whose_copy_is_deleted_on_the_worker_is_finished_not_rerun(
        client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        w1 = env.workers["worker-1"]
        await env.start()
        uid = await _progressing_on_worker_1(env, "decided")
        await _decide(env, "decided", "SuccessCriteriaMet", "CompletionsReached", "decided by the test")
        await w1.delete(JOBS, ns, "decided")
        event = await env.wait_event("decided", "FinishedWithoutCopy", timeout=30)
        assert "gone from worker worker-1" in event["message"] and "Complete" in event["message"]
        done = await env.wait_condition("decided", "Complete", timeout=30)
        st = done["status"]
        assert int(st.get("succeeded") or 0) >= 1 and not st.get("active")  # counters as last mirrored
        assert st["completionTime"] and st["startTime"]
        await asyncio.sleep(4)  # two resyncs: nothing is created again anywhere
        assert await env.copies(uid) == {}
        assert list((await env.copies_made(uid)).values()) == ["worker-1"]  # the one copy ever made
        final = await env.get("decided")
        assert final is not None and FINALIZER not in (final["metadata"].get("finalizers") or [])
        assert final["status"]["succeeded"] == st["succeeded"]


@pytest.mark.integration
async def test_decided_job_on_a_lost_worker_is_finished_not_redispatched(client_for: ClientFor, cluster: ClusterFn,
                                                                         ns: str) -> None:
    async with mirror_env(client_for, cluster, ns, worker_lost_timeout=5.0) as env:
        w1 = env.clusters["worker-1"]
        await env.start()
        uid = await _progressing_on_worker_1(env, "lost")
        await env.manager.patch(JOBS, ns, "lost", {"metadata": {"annotations": {ANNOTATION_PIN: None}}})
        await _decide(env, "lost", "FailureTarget", "BackoffLimitExceeded", "decided by the test")
        w1.stop()
        try:
            await env.wait_event("lost", "WorkerLost", timeout=60)
            event = await env.wait_event("lost", "FinishedWithoutCopy", timeout=30)
            assert "worker worker-1 is lost" in event["message"] and "Failed" in event["message"]
            done = await env.wait_condition("lost", "Failed", timeout=30)
            assert cond(done, "Complete") is None and not done["status"].get("active")
            assert int(done["status"].get("succeeded") or 0) >= 1
            await asyncio.sleep(3)
            reasons = [e["reason"] for e in await env.events("lost")]
            assert "Redispatched" not in reasons
            # One copy was ever made, on worker-1 (stopped: its watch saw it before); none on worker-2.
            assert list((await env.copies_made(uid)).values()) == ["worker-1"]
            assert await env.get("lost", env.workers["worker-2"]) is None
            job = await env.get("lost")
            assert job is not None and job["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-1"
        finally:
            w1.start()
        # The returned worker's copy is deleted and the manager Job let go.
        await env.wait_gone("lost", env.workers["worker-1"], timeout=60)
        assert await env.copies(uid) == {}


@pytest.mark.integration
async def test_after_a_redispatch_indexes_are_the_deciding_runs(client_for: ClientFor, cluster: ClusterFn,
                                                               ns: str) -> None:
    """Run 1 completes index 0, its worker is lost, run 2 (elsewhere) fails index 0 and decides.

    The template changes between the runs the way a queueing layer does it (suspend, then
    rewrite, which the API server allows once the mirror dropped startTime), so run 2's pods fail.
    """
    async with mirror_env(client_for, cluster, ns, worker_lost_timeout=5.0) as env:
        env.expect_errors("transport", "conflict")  # worker-1 is stopped; the test rewrites the Job
        w1 = env.clusters["worker-1"]
        await env.start()
        # Pods hang until the test ends one: index 0 succeeds when the test says so and index 1
        # never does, however slowly a loaded machine mirrors status (a 2.5 s pod raced it).
        await env.create(make_job("runs", completions=2, parallelism=1, outcome="hang", indexed=True,
                                  annotations={ANNOTATION_PIN: "worker-1"},
                                  extra_spec={"backoffLimitPerIndex": 0, "backoffLimit": 10}))
        await _succeed_running_pod(env.workers["worker-1"], ns, "runs", index=0)
        seen: dict[str, object] = {}

        async def index0_done() -> bool:
            seen.update(((await env.get("runs")) or {}).get("status") or {})
            return seen.get("completedIndexes") == "0"

        await wait_for(index0_done, timeout=60, what=f"index 0 completed by run 1 (manager status {seen})")
        await env.manager.patch(JOBS, ns, "runs", {"metadata": {"annotations": {ANNOTATION_PIN: None}},
                                                   "spec": {"suspend": True}})

        async def held() -> bool:
            # From 1.36 the manager takes a template rewrite of a suspended Job only with no active
            # pod too (1.33-1.35: never started suffices), so wait for that as a queueing layer does.
            st = ((await env.get("runs")) or {}).get("status") or {}
            return ("startTime" not in st and cond({"status": st}, "Suspended") == "True"
                    and not st.get("active"))

        await wait_for(held, timeout=30, what="manager suspended without startTime and active pods")
        await env.manager.patch(JOBS, ns, "runs", {"spec": {"template": {"metadata": {
            "labels": {"jobmirror.dev/kwok-outcome": "fail"}}}}})
        w1.stop()
        try:
            await env.wait_event("runs", "Redispatched", timeout=60)
            await env.manager.patch(JOBS, ns, "runs", {"spec": {"suspend": False}})
            done = await env.wait_condition("runs", "Failed", timeout=90)
            st = done["status"]
            assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2"
            assert st.get("failedIndexes") == "0,1", st  # the deciding run failed index 0 ...
            assert not st.get("completedIndexes"), st  # ... so it is not reported as completed
            assert st["succeeded"] == 1  # counters never go down (API rule): run 1's success stays counted
        finally:
            w1.start()
        await env.wait_gone("runs", env.workers["worker-1"], timeout=60)


@pytest.mark.integration
async def test_stale_copy_that_finished_during_a_partition_decides_the_outcome(
        client_for: ClientFor, cluster: ClusterFn, ns: str, tmp_path: Path) -> None:
    """The controller loses sight of worker-2 (its connection frozen, the worker itself keeps
    running) while worker-2 finishes the copy; the Job is re-dispatched to worker-1, where
    nothing can run (its kwok stopped). When worker-2 is visible again, its finished copy
    decides: StaleCopyOutcomeUsed, Complete with that run's counters, both copies deleted."""
    async with mirror_env(client_for, cluster, ns, worker_lost_timeout=3.0) as env:
        proxy, routed = await env.worker_via_proxy("worker-2", tmp_path)
        target = env.clusters["worker-1"]  # where the Job is re-dispatched
        try:
            await env.start(routed)
            created = await env.create(make_job("stale", duration_ms=12000, annotations={ANNOTATION_PIN: "worker-2"}))
            uid = str(created["metadata"]["uid"])

            async def running() -> bool:
                return bool((((await env.get("stale")) or {}).get("status") or {}).get("active"))

            await wait_for(running, timeout=60, what="stale running on worker-2")
            await env.manager.patch(JOBS, ns, "stale", {"metadata": {"annotations": {ANNOTATION_PIN: None}}})
            target.stop("kwok-controller")  # worker-1 accepts the copy, but its pods never run
            proxy.freeze()
            try:
                await env.wait_event("stale", "Redispatched", timeout=90)

                async def finished_on_worker_2() -> bool:
                    copy = await env.get("stale", env.workers["worker-2"])
                    return copy is not None and cond(copy, "Complete") == "True"

                await wait_for(finished_on_worker_2, timeout=60, what="the stale copy Complete on worker-2")
                assert cond((await env.get("stale")) or {}, "Complete") is None  # not decided yet
            finally:
                proxy.thaw()
            event = await env.wait_event("stale", "StaleCopyOutcomeUsed", timeout=60)
            assert "worker-2" in event["message"], event["message"]
            done = await env.wait_condition("stale", "Complete", timeout=30)
            assert done["status"]["succeeded"] == 1 and not done["status"].get("active"), done["status"]

            async def no_copies() -> bool:
                return await env.copies(uid) == {}

            await wait_for(no_copies, timeout=60, what="both copies deleted")
        finally:
            if "kwok-controller" in target._stopped:
                target.start("kwok-controller")
            await proxy.close()
