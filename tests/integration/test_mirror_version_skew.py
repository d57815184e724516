"""A worker on an older Kubernetes minor (1.30): its Job controller writes Complete/Failed
without SuccessCriteriaMet/FailureTarget, which a manager on any supported release (1.33+) rejects verbatim.
The mirror must still land a valid, final status on the manager.

Below the supported floor, so not in ``make test`` (it cost a third full Kubernetes build, ~9 min
cold): no supported worker (1.33+) writes a terminal condition without its interim one or prunes
successPolicy. What it guards is also held by the unit tables of status translation and by the
status replay on every supported API server. Run it with ``pytest -m below_floor``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from clusterbed import versions
from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from tests.integration.mirror_env import cond, make_job, mirror_env

pytestmark = [pytest.mark.integration, pytest.mark.below_floor]

OLD_WORKER = ClusterSpec("worker-old", kube_version=versions.OLD_KUBE_VERSION, nodes=2)


async def test_old_worker_status_is_repaired_into_a_valid_manager_status(
    client_for: Callable[[ClusterSpec], Awaitable[ClusterClient]],
    cluster: Callable[[ClusterSpec], LocalCluster],
    ns: str,
) -> None:
    # Keep finished copies so the test can show what the old worker itself wrote.
    async with mirror_env(client_for, cluster, ns, workers=(OLD_WORKER,), keep_finished_remote=True) as env:
        old = env.workers["worker-old"]
        v = await old.request("GET", "/version")
        assert v["gitVersion"] == f"v{versions.OLD_KUBE_VERSION}"
        await env.start()
        ok = await env.create(make_job("ok", completions=2, parallelism=2))
        bad = await env.create(make_job("bad", outcome="fail", backoff_limit=0))

        # What the old worker itself wrote: terminal conditions without the interim ones.
        async def remote_terminal(uid: str, ctype: str) -> dict | None:  # type: ignore[type-arg]
            copies = await env.copies(uid)
            r = copies.get("worker-old")
            return r if r and cond(r, ctype) == "True" else None

        from tests.conftest import wait_for

        r_ok = await wait_for(lambda: remote_terminal(ok["metadata"]["uid"], "Complete"), timeout=60,
                              what="old worker completes its copy")
        assert cond(r_ok, "SuccessCriteriaMet") is None  # the 1.30 controller never writes it
        r_bad = await wait_for(lambda: remote_terminal(bad["metadata"]["uid"], "Failed"), timeout=60,
                               what="old worker fails its copy")
        assert cond(r_bad, "FailureTarget") is None

        done = await env.wait_condition("ok", "Complete", timeout=60)
        assert cond(done, "SuccessCriteriaMet") == "True"
        assert done["status"]["succeeded"] == 2 and done["status"]["completionTime"]
        failed = await env.wait_condition("bad", "Failed", timeout=60)
        assert cond(failed, "FailureTarget") == "True"
        assert "completionTime" not in failed["status"]
        assert not failed["status"].get("active")


async def test_copy_whose_fields_an_old_worker_drops_is_deleted_and_placed_elsewhere(
    client_for: Callable[[ClusterSpec], Awaitable[ClusterClient]],
    cluster: Callable[[ClusterSpec], LocalCluster],
    ns: str,
) -> None:
    """Issue 11 item 9: 1.30 prunes ``successPolicy`` (alpha, off there); the copy never runs there."""
    from mirror import metrics
    from mirror.naming import ANNOTATION_CLUSTER, ANNOTATION_PIN
    from tests.conftest import WORKER_1, wait_for

    def skews() -> float:
        return float(metrics.WORKER_REFUSALS.labels("worker-old", "skew")._value.get())

    policy = {"rules": [{"succeededIndexes": "0"}]}
    # LeastLoaded: the test is about the dropped fields, so the worker choice must not hang on how
    # soon each worker's room view shows the filler's pod (RoomAware's tie-break, flaky here once in 6).
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1, OLD_WORKER), resync_period=1.0,
                          placement="LeastLoaded") as env:
        old = env.workers["worker-old"]
        before = skews()
        await env.start()
        # Load worker-1 first, so LeastLoaded picks the old worker for the next Job.
        await env.create(make_job("filler", duration_ms=20_000))
        await env.wait_copy("filler", timeout=30)
        job = await env.create(make_job("policy", indexed=True, completions=2, parallelism=2,
                                        success_policy=policy, duration_ms=500))
        ev = await env.wait_event("policy", "WorkerDroppedFields", timeout=30)
        assert "worker worker-old dropped fields" in ev["message"] and "spec.successPolicy" in ev["message"], ev
        assert "deleted at once" in ev["message"] and "placed on worker-1 instead" in ev["message"], ev
        done = await env.wait_condition("policy", "Complete", timeout=60)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-1"
        assert cond(done, "SuccessCriteriaMet") == "True"
        copies = await env.copies(job["metadata"]["uid"])
        assert "worker-old" not in copies
        assert skews() - before == 1

        # Pinned to the old worker: kept pending (no copy there), said so, retried with backoff.
        pinned = await env.create(make_job("pinned", indexed=True, completions=2, parallelism=2,
                                           success_policy=policy, annotations={ANNOTATION_PIN: "worker-old"}))
        ev = await env.wait_event("pinned", "WorkerDroppedFields", timeout=30)
        assert "pinned to worker-old" in ev["message"] and "backoff" in ev["message"], ev
        await asyncio.sleep(3)

        # Each backoff retry creates a copy and deletes it at once, so one may exist for a moment.
        async def no_copy_there() -> bool:
            return await env.get("pinned", old) is None

        await wait_for(no_copy_there, timeout=15, interval=0.1, what="no copy of pinned left on worker-old")
        assert "worker-1" not in await env.copies(pinned["metadata"]["uid"])
        current = await env.get("pinned")
        assert current is not None and not (current.get("status") or {}).get("succeeded")


async def test_a_refused_template_rewrite_recreates_the_copy_only_after_its_pods_ended(
    client_for: Callable[[ClusterSpec], Awaitable[ClusterClient]],
    cluster: Callable[[ClusterSpec], LocalCluster],
    ns: str,
) -> None:
    """an old worker keeps startTime on a suspended copy and refuses the re-admitted template: the
    copy is re-created from the manager, but not while a pod of it has not ended (it could run beside
    the new copy's pod)"""
    from kruntime.resources import JOBS, PODS, Obj
    from tests.conftest import wait_for

    # LeastLoaded: the copy must exist although no node matches its pod (RoomAware, the default,
    # keeps such a Job in the manager once the worker's room view has synced).
    async with mirror_env(client_for, cluster, ns, workers=(OLD_WORKER,), resync_period=1.0,
                          placement="LeastLoaded") as env:
        old = env.workers["worker-old"]
        await env.start()
        # No node matches: the pod stays Pending and no (fake) kubelet ends it on its own.
        job = make_job("readmit", duration_ms=120_000, pod_spec={"nodeSelector": {"example.com/pool": "none"}})
        await env.create(job)

        async def pods() -> list[Obj]:
            items, _ = await old.list_all(PODS, ns, label_selector="batch.kubernetes.io/job-name=readmit")
            return items

        first = (await wait_for(pods, timeout=30, what="the copy's first pod"))[0]
        hold = "example.com/hold"  # keeps the pod from going away, as a long grace period would
        await old.patch(PODS, ns, first["metadata"]["name"], {"metadata": {"finalizers": [hold]}})
        copy_uid = (await env.get("readmit", old) or {})["metadata"]["uid"]
        await env.manager.patch(JOBS, ns, "readmit", {"spec": {"suspend": True}})

        async def terminating() -> bool:
            return any(p["metadata"].get("deletionTimestamp") for p in await pods())

        await wait_for(terminating, timeout=30, what="the copy's pod terminating")

        async def rewritable() -> bool:
            # A 1.36+ manager takes a suspended Job's template rewrite only once it says Suspended=True
            # with no startTime and no active pod (the mirrored counters may trail by statusBatchPeriod).
            st = ((await env.get("readmit")) or {}).get("status") or {}
            suspended = any(c.get("type") == "Suspended" and c.get("status") == "True"
                            for c in st.get("conditions") or [])
            return suspended and "startTime" not in st and not st.get("active")

        await wait_for(rewritable, timeout=30, what="the manager Job suspended with no active pod")
        await env.manager.patch(JOBS, ns, "readmit", {
            "spec": {"template": {"spec": {"nodeSelector": {"example.com/pool": "b"}}}}})
        await env.manager.patch(JOBS, ns, "readmit", {"spec": {"suspend": False}})
        await asyncio.sleep(6)  # several passes at resyncPeriod 1 s: each must wait for the pod
        copy = await env.get("readmit", old)
        if copy is None or copy["metadata"]["uid"] != copy_uid:
            # Re-created already: only right if the held pod had ended. The worker's pod GC marks an
            # unscheduled terminating pod Failed (every 20 s), which may fall into this window.
            held = await old.get(PODS, ns, first["metadata"]["name"])
            assert (held.get("status") or {}).get("phase") in ("Succeeded", "Failed"), (
                f"re-created while a pod had not ended: {held.get('status')}")
        else:
            assert "CopyRecreated" not in [e["reason"] for e in await env.events("readmit")]

        await old.patch(PODS, ns, first["metadata"]["name"], {"metadata": {"finalizers": None}})

        async def recreated() -> Obj | None:
            c = await env.get("readmit", old)
            return c if c is not None and c["metadata"]["uid"] != copy_uid else None

        fresh = await wait_for(recreated, timeout=60, what="the copy re-created once its pod ended")
        assert fresh["spec"]["template"]["spec"].get("nodeSelector") == {"example.com/pool": "b"}
        await env.wait_event("readmit", "CopyRecreated")
