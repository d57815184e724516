"""A worker that refuses the copy, its spec change or its deletion (issue 11, item 1).

Real refusals from real API servers: a ResourceQuota ``count/jobs.batch: 0`` in the worker
namespace, and a ValidatingAdmissionPolicy that denies changing a copy's parallelism and
deleting it. Never silent (a WorkerRefused event at once + a metric); an unpinned Job runs
elsewhere; a pinned one retries with bounded backoff; status mirroring never stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import JOBS, Resource
from mirror import metrics
from mirror.controller import MirrorController
from mirror.naming import ANNOTATION_CLUSTER, ANNOTATION_PIN, FINALIZER, LABEL_ORIGIN
from tests.conftest import wait_for
from tests.integration.mirror_env import cond, make_job, mirror_env

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]

QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
VAP = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy",
               namespaced=False)
VAP_BINDING = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
                       "ValidatingAdmissionPolicyBinding", namespaced=False)


async def _no_jobs_quota(worker: ClusterClient, ns: str) -> None:
    """``count/jobs.batch: 0`` in ``ns``, once the quota controller has computed its status."""
    await worker.create(QUOTAS, ns, {"metadata": {"name": "no-jobs"}, "spec": {"hard": {"count/jobs.batch": "0"}}})

    async def computed() -> bool:
        q = await worker.get(QUOTAS, ns, "no-jobs")
        return bool((q.get("status") or {}).get("hard"))

    await wait_for(computed, timeout=30, what="quota status computed")


def _load(ctrl: MirrorController, worker: str) -> int:
    views = {v.name: v for v in ctrl.placer.views()}
    return views[worker].unfinished


def _refusals(worker: str, verb: str) -> float:
    return float(metrics.WORKER_REFUSALS.labels(worker, verb)._value.get())


@pytest.mark.integration
async def test_unpinned_job_refused_by_worker_quota_runs_on_another_worker(client_for: ClientFor, cluster: ClusterFn,
                                                                           ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        w1 = env.workers["worker-1"]
        await _no_jobs_quota(w1, ns)
        before = _refusals("worker-1", "create")
        ctrl = await env.start()
        # LeastLoaded breaks the 0/0 tie by name: worker-1 first, where the quota refuses.
        uid = (await env.create(make_job("quota", duration_ms=1000)))["metadata"]["uid"]
        event = await env.wait_event("quota", "WorkerRefused", timeout=15)
        msg = event["message"]
        assert "worker worker-1 refused to create" in msg and "quota" in msg, msg
        assert "placed on worker-2 instead" in msg
        assert _refusals("worker-1", "create") > before
        assert _load(ctrl, "worker-1") == 0  # nothing of ours runs there: not load
        done = await env.wait_condition("quota", "Complete", timeout=60)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2"
        assert done["status"]["succeeded"] == 1
        assert list((await env.copies_made(uid)).values()) == ["worker-2"]  # the refused create made none


@pytest.mark.integration
async def test_pinned_job_refused_retries_with_bounded_backoff_then_runs(client_for: ClientFor, cluster: ClusterFn,
                                                                         ns: str) -> None:
    async with mirror_env(client_for, cluster, ns, resync_period=1.0) as env:
        w1, w2 = env.workers["worker-1"], env.workers["worker-2"]
        await _no_jobs_quota(w1, ns)
        before = _refusals("worker-1", "create")
        ctrl = await env.start()
        await env.create(make_job("pinned", annotations={ANNOTATION_PIN: "worker-1"}, duration_ms=500))
        event = await env.wait_event("pinned", "WorkerRefused", timeout=15)
        assert "worker worker-1 refused to create" in event["message"]
        assert "pinned to worker-1" in event["message"] and "backoff" in event["message"]
        await asyncio.sleep(8)
        # Backoff 1, 2, 4 s ...: a handful of tries in 8 s, not one per resync or per event.
        tries = _refusals("worker-1", "create") - before
        assert 2 <= tries <= 6, tries
        assert _load(ctrl, "worker-1") == 0
        assert await env.get("pinned", w2) is None
        job = await env.get("pinned")
        assert job is not None and job["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-1"
        # The retries stay visible in events (a count patch on one event, written asynchronously).
        async def retries_evented() -> bool:
            evs = [e for e in await env.events("pinned") if e["reason"] == "WorkerRefused"]
            return sum(int(e.get("count") or 1) for e in evs) >= 2 or any(e.get("series") for e in evs)

        await wait_for(retries_evented, timeout=20, what="the refusal retries visible in WorkerRefused events")
        await w1.delete(QUOTAS, ns, "no-jobs")
        done = await env.wait_condition("pinned", "Complete", timeout=60)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-1"


@asynccontextmanager
async def _deny_copy_changes(worker: ClusterClient, name: str, origin: str) -> AsyncIterator[None]:
    """A VAP on the worker that refuses changing a copy's parallelism, and deleting a copy."""
    await worker.create(VAP, None, {
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["v1"],
                                                    "operations": ["UPDATE", "DELETE"], "resources": ["jobs"]}]},
            "validations": [{"expression": "request.operation != 'DELETE' && "
                                           "object.spec.parallelism == oldObject.spec.parallelism",
                             "message": "test policy: copies are frozen"}],
        },
    })
    await worker.create(VAP_BINDING, None, {
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"objectSelector": {"matchLabels": {LABEL_ORIGIN: origin}}}},
    })
    try:
        await asyncio.sleep(2)  # policies take effect asynchronously
        yield
    finally:
        await worker.delete(VAP_BINDING, None, name)
        await worker.delete(VAP, None, name)


@pytest.mark.integration
async def test_refused_spec_patch_and_delete_keep_status_mirroring_and_are_retried(
        client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns, resync_period=1.0) as env:
        w1 = env.workers["worker-1"]
        patch_before, delete_before = _refusals("worker-1", "patch"), _refusals("worker-1", "delete")
        async with _deny_copy_changes(w1, f"frozen-{ns}", env.origin):
            await env.start()
            await env.create(make_job("frozen", completions=3, parallelism=1, duration_ms=2500,
                                      annotations={ANNOTATION_PIN: "worker-1"}))

            async def running() -> bool:
                j = await env.get("frozen")
                return bool((j or {}).get("status", {}).get("active"))

            await wait_for(running, timeout=30, what="frozen active on the manager")
            await env.manager.patch(JOBS, ns, "frozen", {"spec": {"parallelism": 2}})
            event = await env.wait_event("frozen", "WorkerRefused", timeout=15)
            assert "refused the spec change" in event["message"] and "copies are frozen" in event["message"]
            assert "status is still mirrored" in event["message"]
            assert _refusals("worker-1", "patch") > patch_before
            # The worker keeps running it at parallelism 1 and every step still reaches the manager.
            done = await env.wait_condition("frozen", "Complete", timeout=60)
            assert done["status"]["succeeded"] == 3

            async def delete_refused() -> bool:
                return any(e["reason"] == "WorkerRefused" and "refused to delete" in e["message"]
                           for e in await env.events("frozen"))

            await wait_for(delete_refused, timeout=20, what="refused delete evented")
            assert _refusals("worker-1", "delete") > delete_before
            assert await env.get("frozen", w1) is not None
            job = await env.get("frozen")
            assert job is not None and FINALIZER in job["metadata"]["finalizers"]
            assert cond(job, "Complete") == "True"
        # Policy gone: the retry deletes the copy and lets go of the manager Job.
        await env.wait_gone("frozen", w1, timeout=60)

        async def released() -> bool:
            j = await env.get("frozen")
            return j is not None and FINALIZER not in (j["metadata"].get("finalizers") or [])

        await wait_for(released, timeout=30, what="finalizer released")
