"""The mirror controller end to end on real API servers: manager + two kwok workers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import JOBS, PODS, Obj
from mirror.naming import (
    ANNOTATION_CLUSTER,
    ANNOTATION_PIN,
    FIELD_MANAGER,
    FINALIZER,
    LABEL_ORIGIN,
    LABEL_ORIGIN_UID,
)
from testkit.copies import CopyRecorder
from tests.conftest import wait_for
from tests.integration.mirror_env import cond, make_job, mirror_env, wait_syncs

pytestmark = pytest.mark.integration

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]


def types_in_order(job: dict) -> list[str]:  # type: ignore[type-arg]
    conds = sorted(job["status"].get("conditions") or [], key=lambda c: c.get("lastTransitionTime", ""))
    return [c["type"] for c in conds if c["status"] == "True"]


async def test_plain_job_completes_with_counters_and_cleanup(client_for: ClientFor, cluster: ClusterFn,
                                                             ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        ctrl = await env.start()
        created = await env.create(make_job("plain", completions=3, parallelism=2))
        done = await env.wait_condition("plain", "Complete", timeout=90)
        st = done["status"]
        assert st["succeeded"] == 3
        assert st.get("failed", 0) == 0
        assert st["completionTime"] >= st["startTime"]
        assert cond(done, "SuccessCriteriaMet") == "True"
        worker = done["metadata"]["annotations"][ANNOTATION_CLUSTER]
        assert worker in env.workers

        # The finished Job's copy is deleted (background propagation: pods go too) and
        # the finalizer released.
        async def cleaned() -> bool:
            j = await env.get("plain")
            copies = await env.copies(created["metadata"]["uid"])
            return bool(j) and FINALIZER not in (j["metadata"].get("finalizers") or []) and not copies

        await wait_for(cleaned, timeout=30, what="copy deleted and finalizer released")
        # One copy was made, on the worker the annotation names; its routine cleanup writes no event.
        assert list((await env.copies_made(created["metadata"]["uid"])).values()) == [worker]
        assert "RemoteDeleted" not in {e["reason"] for e in await env.events("plain")}
        # Nothing is left to do for it: it leaves the controller's cache (issue 38). The cache never
        # held managedFields, and the status writes made without them kept the server's.
        cache = ctrl.jobs
        assert cache is not None

        async def dropped() -> bool:
            return cache.get(f"{ns}/plain") is None

        await wait_for(dropped, timeout=30, what="finished Job dropped from the cache")
        fields = (await env.get("plain"))["metadata"]["managedFields"]
        managers = {(m.get("manager"), m.get("subresource")) for m in fields}
        assert (FIELD_MANAGER, "status") in managers and any(sub is None for _, sub in managers), managers


async def test_remote_copy_is_sanitised(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        await env.start()
        job = make_job("copy", duration_ms=30000, annotations={ANNOTATION_PIN: "worker-2"},
                       extra_spec={"ttlSecondsAfterFinished": 5})
        job["metadata"]["labels"] = {"team": "a"}
        created = await env.create(job)
        uid = created["metadata"]["uid"]

        async def copy_exists() -> dict | None:  # type: ignore[type-arg]
            return (await env.copies(uid)).get("worker-2")

        remote = await wait_for(copy_exists, timeout=30, what="copy on pinned worker-2")
        md, spec = remote["metadata"], remote["spec"]
        assert md["name"] == "copy" and md["namespace"] == ns
        assert "managedBy" not in spec
        assert "ttlSecondsAfterFinished" not in spec
        assert md["uid"] != uid
        assert md["labels"]["team"] == "a"
        assert md["labels"][LABEL_ORIGIN] == env.origin
        assert md["labels"][LABEL_ORIGIN_UID] == uid
        assert md["annotations"]["jobmirror.dev/origin-job"] == f"{ns}/copy"
        # the worker generated its own selector from its own uid
        assert spec["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"] == md["uid"]
        assert not md.get("ownerReferences")


async def test_failing_job_ends_failed_with_failure_target_first(client_for: ClientFor, cluster: ClusterFn,
                                                                 ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        await env.start()
        await env.create(make_job("fails", outcome="fail", backoff_limit=1, duration_ms=200))
        done = await env.wait_condition("fails", "Failed", timeout=90)
        assert cond(done, "FailureTarget") == "True"
        assert cond(done, "Complete") is None
        assert done["status"]["failed"] >= 2
        assert "completionTime" not in done["status"]
        order = types_in_order(done)
        assert order.index("FailureTarget") <= order.index("Failed")
        failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
        assert failed["reason"] == "BackoffLimitExceeded"


async def test_indexed_job_with_success_policy(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    """The success policy, not the completion count, ends the Job: one pod at a time in index
    order, so when index 0 succeeds indexes 1-2 have not run; the worker's verdict (reason
    SuccessPolicy, completedIndexes "0", succeeded 1 of 3) is mirrored as is."""
    async with mirror_env(client_for, cluster, ns) as env:
        await env.start()
        policy = {"rules": [{"succeededIndexes": "0"}]}
        job = make_job("indexed", completions=3, parallelism=1, indexed=True, success_policy=policy,
                       duration_ms=2000)
        await env.create(job)
        done = await env.wait_condition("indexed", "Complete", timeout=90)
        scm = next(c for c in done["status"]["conditions"] if c["type"] == "SuccessCriteriaMet")
        assert scm["status"] == "True"
        assert scm["reason"] == "SuccessPolicy", scm
        complete = next(c for c in done["status"]["conditions"] if c["type"] == "Complete")
        assert complete["reason"] == "SuccessPolicy", complete
        assert done["status"]["completedIndexes"] == "0", done["status"]
        assert done["status"]["succeeded"] == 1, done["status"]
        assert types_in_order(done).index("SuccessCriteriaMet") <= types_in_order(done).index("Complete")


async def test_suspended_at_creation_gets_no_copy_until_resumed(client_for: ClientFor, cluster: ClusterFn,
                                                                ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        env.expect_errors("conflict")  # the test writes the manager Job while the controller does
        await env.start()
        created = await env.create(make_job("susp", suspend=True))
        uid = created["metadata"]["uid"]
        j = await env.wait_condition("susp", "Suspended", timeout=30)
        assert ANNOTATION_CLUSTER not in (j["metadata"].get("annotations") or {})
        async with CopyRecorder(env.workers, ns) as rec:
            await wait_syncs(3)  # the controller looked at it again (resync): still no copy anywhere
            assert await env.copies(uid) == {} and rec.copies_of(uid) == {}
        await env.manager.patch(JOBS, ns, "susp", {"spec": {"suspend": False}})
        done = await env.wait_condition("susp", "Complete", timeout=90)
        suspended = next(c for c in done["status"]["conditions"] if c["type"] == "Suspended")
        assert suspended["status"] == "False" and suspended["reason"] == "JobResumed"


async def test_suspend_mid_run_propagates_and_resumes(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        env.expect_errors("conflict")  # the test writes the manager Job while the controller does
        await env.start()
        created = await env.create(make_job("mid", duration_ms=4000, completions=2, parallelism=2))
        uid = created["metadata"]["uid"]

        async def running() -> bool:
            j = await env.get("mid")
            return bool(j and (j.get("status") or {}).get("active"))

        await wait_for(running, timeout=30, what="manager shows active pods")
        await env.manager.patch(JOBS, ns, "mid", {"spec": {"suspend": True}})

        async def remote_suspended() -> bool:
            copies = await env.copies(uid)
            return any(c["spec"].get("suspend") and cond(c, "Suspended") == "True" for c in copies.values())

        await wait_for(remote_suspended, timeout=30, what="remote copy suspended")
        await env.wait_condition("mid", "Suspended", timeout=30)

        async def none_active() -> bool:  # the copy's pods terminate asynchronously, then active drops to 0
            j = await env.get("mid")
            return bool(j) and cond(j, "Suspended") == "True" and not (j.get("status") or {}).get("active")

        await wait_for(none_active, timeout=60, what="manager shows Suspended with no active pods")
        await env.manager.patch(JOBS, ns, "mid", {"spec": {"suspend": False}})
        done = await env.wait_condition("mid", "Complete", timeout=90)
        assert done["status"]["succeeded"] == 2


async def test_a_burst_of_jobs_is_spread_over_both_workers(client_for: ClientFor, cluster: ClusterFn,
                                                          ns: str) -> None:
    """Jobs waiting before the controller starts are placed by concurrent passes at once;
    least-loaded placement must see the choices made a moment earlier, not pick one worker
    for all of them."""
    async with mirror_env(client_for, cluster, ns) as env:
        names = [f"burst{i}" for i in range(8)]
        for name in names:
            await env.create(make_job(name, duration_ms=20000))
        await env.start()

        async def all_placed() -> list[str] | None:
            placed = []
            for name in names:
                j = await env.get(name)
                w = ((j or {}).get("metadata", {}).get("annotations") or {}).get(ANNOTATION_CLUSTER)
                if w is None:
                    return None
                placed.append(w)
            return placed

        placed = await wait_for(all_placed, timeout=30, what="all 8 Jobs placed")
        assert sorted(placed.count(w) for w in ("worker-1", "worker-2")) == [4, 4], placed


async def test_parallelism_change_propagates(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    """A parallelism change is patched into the running copy (same copy, not a new one) and its
    effect, three active pods, comes back to the manager."""
    async with mirror_env(client_for, cluster, ns) as env, CopyRecorder(env.workers, ns) as rec:
        env.expect_errors("conflict")  # the test writes the manager Job while the controller does
        await env.start()
        created = await env.create(make_job("par", completions=4, parallelism=1, duration_ms=20000))
        uid = created["metadata"]["uid"]
        (_, first), = (await wait_for(lambda: env.copies(uid), timeout=30, what="copy")).items()
        assert first["spec"]["parallelism"] == 1
        await env.manager.patch(JOBS, ns, "par", {"spec": {"parallelism": 3}})

        async def remote_par() -> Obj | None:
            c = list((await env.copies(uid)).values())
            return c[0] if c and c[0]["spec"]["parallelism"] == 3 else None

        patched = await wait_for(remote_par, timeout=30, what="remote parallelism 3")
        assert patched["metadata"]["uid"] == first["metadata"]["uid"], "the copy was replaced, not patched"

        async def three_active() -> bool:
            j = await env.get("par")
            return bool(j) and (j.get("status") or {}).get("active") == 3

        await wait_for(three_active, timeout=30, what="manager active=3")
        assert list(rec.copies_of(uid)) == [first["metadata"]["uid"]], rec.copies_of(uid)


async def test_deleting_manager_job_deletes_remote_first(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        env.expect_errors("conflict")  # the test writes the manager Job while the controller does
        await env.start()
        created = await env.create(make_job("del", duration_ms=60000))
        uid = created["metadata"]["uid"]
        copies = await wait_for(lambda: env.copies(uid), timeout=30, what="copy")
        (wname, remote), = copies.items()
        await env.manager.delete(JOBS, ns, "del")
        await env.wait_gone("del", timeout=30)
        assert await env.copies(uid) == {}

        # background propagation: the remote's pods are garbage-collected, not orphaned
        async def pods_gone() -> bool:
            pods, _ = await env.workers[wname].list_all(
                PODS, ns, label_selector=f"batch.kubernetes.io/controller-uid={remote['metadata']['uid']}")
            return all(p["metadata"].get("deletionTimestamp") for p in pods)

        await wait_for(pods_gone, timeout=30, what="remote pods deleted")


async def test_remote_deleted_by_hand_is_recreated(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    """A copy deleted by hand is re-created once, on the same worker, and the Job completes there
    with the new copy's counts; the old and new copies never coexist."""
    async with mirror_env(client_for, cluster, ns) as env, CopyRecorder(env.workers, ns) as rec:
        await env.start()
        created = await env.create(make_job("again", duration_ms=3000))
        uid = created["metadata"]["uid"]
        copies = await wait_for(lambda: env.copies(uid), timeout=30, what="copy")
        (wname, remote), = copies.items()
        await env.workers[wname].delete(JOBS, ns, remote["metadata"]["name"])

        async def recreated() -> Obj | None:
            c = await env.copies(uid)
            return next((x for x in c.values() if x["metadata"]["uid"] != remote["metadata"]["uid"]), None)

        again = await wait_for(recreated, timeout=30, what="copy re-created")
        done = await env.wait_condition("again", "Complete", timeout=90)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == wname
        assert done["status"]["succeeded"] == 1 and not done["status"].get("failed"), done["status"]
        seen = rec.copies_of(uid)
        assert seen == {remote["metadata"]["uid"]: wname, again["metadata"]["uid"]: wname}, seen
        assert not rec.overlapping(uid), rec.overlapping(uid)


async def test_foreign_managed_by_is_never_touched(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        await env.start()
        await env.create(make_job("other", managed_by="example.com/other-controller"))
        await env.create(make_job("ours"))
        await env.wait_condition("ours", "Complete", timeout=90)
        other = await env.get("other")
        assert other is not None
        assert other.get("status", {}) == {}
        assert FINALIZER not in (other["metadata"].get("finalizers") or [])
        assert ANNOTATION_CLUSTER not in (other["metadata"].get("annotations") or {})
        for c in env.workers.values():
            assert await env.get("other", c) is None


async def test_rejected_status_write_is_evented_counted_and_retried(client_for: ClientFor, cluster: ClusterFn,
                                                                    ns: str) -> None:
    """An admission policy on the manager refuses our status write: event + metric, then the
    retry with backoff lands it once the policy is gone. Never a silent stall."""
    from kruntime.resources import Resource
    from mirror import metrics

    vap = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
                   "ValidatingAdmissionPolicy", namespaced=False)
    binding = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
                       "ValidatingAdmissionPolicyBinding", namespaced=False)
    async with mirror_env(client_for, cluster, ns) as env:
        await env.manager.create(vap, None, {
            "metadata": {"name": f"deny-{ns}"},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["v1"],
                                                        "operations": ["UPDATE"], "resources": ["jobs/status"]}]},
                "validations": [{"expression": "!has(object.status.succeeded) || object.status.succeeded < 1",
                                 "message": "test policy refuses success", "reason": "Invalid"}],
            },
        })
        await env.manager.create(binding, None, {
            "metadata": {"name": f"deny-{ns}"},
            "spec": {"policyName": f"deny-{ns}", "validationActions": ["Deny"],
                     "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}},
        })
        try:
            await asyncio.sleep(2)  # policies take effect asynchronously
            before = metrics.STATUS_WRITES.labels("rejected")._value.get()
            env.expect_errors("status_rejected")
            await env.start()
            await env.create(make_job("refused"))
            ev = await env.wait_event("refused", "StatusRejected", timeout=60)
            assert "test policy refuses success" in ev["message"]
            assert metrics.STATUS_WRITES.labels("rejected")._value.get() > before
            assert cond(await env.get("refused"), "Complete") is None
        finally:
            await env.manager.delete(binding, None, f"deny-{ns}")
            await env.manager.delete(vap, None, f"deny-{ns}")
        done = await env.wait_condition("refused", "Complete", timeout=90)
        assert done["status"]["succeeded"] == 1
