"""JobSet through the kind seam on real API servers: JobSet v0.12.0's controller in the manager and in
both workers (clusterbed/jobset.py), the mirror with ``kinds: [Job, JobSet]``.

The manager's JobSet controller runs too: it must leave a JobSet whose ``managedBy`` names jobmirror
alone (it would otherwise create child Jobs in the manager), while the worker's runs the copy."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, PODS, Obj
from mirror.jobsets.kind import JOBSETS
from mirror.naming import ANNOTATION_CLUSTER, ANNOTATION_PIN, DEFAULT_CONTROLLER_NAME, LABEL_ORIGIN_UID
from testkit.invariants import InvariantChecker
from testkit.jobsets import jobset_controllers as start_jobsets
from testkit.jobsets import make_jobset
from tests.conftest import MANAGER, WORKER_1, WORKER_2, wait_for
from tests.integration.inspect_env import (
    expose_through_service_proxy,
    host_address,
    plugin,
    proxied,
    service_account,
)
from tests.integration.mirror_env import mirror_env, wait_syncs

pytestmark = [pytest.mark.integration, pytest.mark.built_beside]

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]


@pytest.fixture(scope="module")
def jobset_controllers(cluster: ClusterFn, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """JobSet's controller in the manager and both workers for this module; stopped (and its webhooks
    unregistered) after it, so the session's other tests run on the clusters as they were."""
    work = Path(tmp_path_factory.mktemp("jobset"))
    with start_jobsets([cluster(spec) for spec in (MANAGER, WORKER_1, WORKER_2)], work) as started:
        yield [c.cluster.name for c in started]


def _true(obj: Obj | None, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in ((obj or {}).get("status") or {}).get("conditions") or [])


async def test_a_jobset_completes_on_a_worker_and_on_the_manager(
        client_for: ClientFor, cluster: ClusterFn, ns: str, jobset_controllers: list[str]) -> None:
    async with mirror_env(client_for, cluster, ns, kinds=["Job", "JobSet"]) as env:
        await env.start()
        created = await env.manager.create(JOBSETS, ns, make_jobset("train"))
        uid = created["metadata"]["uid"]

        async def finished() -> Obj | None:
            js = await env.manager.get(JOBSETS, ns, "train")
            return js if (js.get("status") or {}).get("terminalState") else None

        done = await wait_for(finished, timeout=120, what="the manager JobSet finished")
        assert done["status"]["terminalState"] == "Completed" and _true(done, "Completed")
        by_name = {r["name"]: r for r in done["status"].get("replicatedJobsStatus") or []}
        assert (by_name["leader"]["succeeded"], by_name["workers"]["succeeded"]) == (1, 2)
        worker = done["metadata"]["annotations"][ANNOTATION_CLUSTER]
        assert worker in env.workers
        # The manager's JobSet controller skipped it: no child Job in the manager, ever.
        jobs, _ = await env.manager.list_all(JOBS, ns)
        assert [j["metadata"]["name"] for j in jobs] == []

        async def copy_gone() -> bool:
            items, _ = await env.workers[worker].list_all(JOBSETS, ns, label_selector=f"{LABEL_ORIGIN_UID}={uid}")
            return not items

        await wait_for(copy_gone, timeout=60, what="the finished copy deleted from its worker")


async def _terminal(env: Any, name: str, timeout: float = 120) -> Obj:
    async def finished() -> Obj | None:
        js = await env.manager.get(JOBSETS, env.ns, name)
        return js if (js.get("status") or {}).get("terminalState") else None

    return await wait_for(finished, timeout=timeout, what=f"the manager JobSet {name} finished")  # type: ignore[no-any-return]


async def _copies(env: Any, uid: str) -> dict[str, Obj]:
    out = {}
    for wname, c in env.workers.items():
        items, _ = await c.list_all(JOBSETS, env.ns, label_selector=f"{LABEL_ORIGIN_UID}={uid}")
        if items:
            out[wname] = items[0]
    return out


async def test_the_invariant_checker_follows_jobsets_their_copies_child_jobs_and_pods(
        client_for: ClientFor, cluster: ClusterFn, ns: str, jobset_controllers: list[str]) -> None:
    """What the chaos tier's jobset-mix relies on, on real objects and without a fault: the checker
    (testkit/invariants.py) sees each JobSet, its copy, the child Jobs the worker's JobSet made and their
    pods, and once the copies are cleaned up judges the run clean, the outcomes those meant."""
    async with mirror_env(client_for, cluster, ns, kinds=["Job", "JobSet"]) as env:
        checker = InvariantChecker({"manager": env.manager}, env.workers, [ns], managed_by=DEFAULT_CONTROLLER_NAME,
                                   origins={env.origin}, kinds=("Job", "JobSet"))
        await checker.start()
        rec = checker.recorder
        try:
            await env.start()
            rec.expect("JobSet", f"{ns}/fine", "Completed")
            rec.expect("JobSet", f"{ns}/broken", "Failed")
            await env.manager.create(JOBSETS, ns, make_jobset("fine", duration_ms=300))
            await env.manager.create(JOBSETS, ns, make_jobset("broken", outcome="fail", duration_ms=200,
                                                              failurePolicy={"maxRestarts": 1}))
            await _terminal(env, "fine")
            await _terminal(env, "broken")

            async def cleaned_up() -> bool:
                return bool(rec.copies) and all(c.gone for c in rec.copies.values()) and all(
                    ch.gone for ch in rec.children.values()) and all(p.gone for p in rec.pods.values())

            await wait_for(cleaned_up, timeout=90, what="the copies, their child Jobs and pods gone")
            v = checker.verdict()
        finally:
            await checker.stop()
        assert v.ok, v.explain()
        assert (v.jobs, v.jobsets, v.jobset_copies_seen) == (2, 2, 2), v.summary()
        assert v.jobset_outcomes == {"Completed": 1, "Failed": 1}
        # 3 child Jobs per attempt: fine ran once, broken twice (one restart)
        assert v.child_jobs_seen == 9, v.summary()
        assert 10 <= len(rec.pods) <= 15 and {p.copy_uid for p in rec.pods.values()} == set(rec.copies)


async def test_a_failing_jobset_fails_with_its_restarts_and_reason(
        client_for: ClientFor, cluster: ClusterFn, ns: str, jobset_controllers: list[str]) -> None:
    async with mirror_env(client_for, cluster, ns, kinds=["Job", "JobSet"]) as env:
        await env.start()
        await env.manager.create(JOBSETS, ns, make_jobset("broken", outcome="fail", duration_ms=200,
                                                          failurePolicy={"maxRestarts": 1}))
        done = await _terminal(env, "broken")
        assert done["status"]["terminalState"] == "Failed" and _true(done, "Failed") and not _true(done, "Completed")
        failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
        assert failed["reason"] == "ReachedMaxRestarts"
        assert done["status"]["restarts"] == 1


async def test_a_suspended_jobset_waits_in_the_manager_until_resumed(
        client_for: ClientFor, cluster: ClusterFn, ns: str, jobset_controllers: list[str]) -> None:
    async with mirror_env(client_for, cluster, ns, kinds=["Job", "JobSet"]) as env:
        await env.start()
        created = await env.manager.create(JOBSETS, ns, make_jobset("held", suspend=True))
        await wait_syncs(3)
        assert await _copies(env, created["metadata"]["uid"]) == {}
        await env.manager.patch(JOBSETS, ns, "held", {"spec": {"suspend": False}})
        done = await _terminal(env, "held")
        assert done["status"]["terminalState"] == "Completed"


async def test_deleting_a_running_jobset_deletes_its_copy(
        client_for: ClientFor, cluster: ClusterFn, ns: str, jobset_controllers: list[str]) -> None:
    async with mirror_env(client_for, cluster, ns, kinds=["Job", "JobSet"]) as env:
        await env.start()
        created = await env.manager.create(JOBSETS, ns, make_jobset("long", duration_ms=600_000))
        uid = created["metadata"]["uid"]
        await wait_for(lambda: _copies(env, uid), timeout=60, what="a copy on a worker")
        await env.manager.delete(JOBSETS, ns, "long")

        async def gone() -> bool:
            try:
                await env.manager.get(JOBSETS, ns, "long")
                return False
            except ApiError as exc:
                return exc.not_found and not await _copies(env, uid)

        await wait_for(gone, timeout=60, what="the JobSet and its copy deleted")


async def test_a_jobset_on_a_lost_worker_is_redispatched(
        client_for: ClientFor, cluster: ClusterFn, ns: str, jobset_controllers: list[str]) -> None:
    async with mirror_env(client_for, cluster, ns, kinds=["Job", "JobSet"], worker_lost_timeout=6.0) as env:
        env.expect_errors("transport", "conflict")  # worker-1 stopped; the test unpins the JobSet
        await env.start()
        w1 = env.clusters["worker-1"]
        js = make_jobset("moved", duration_ms=4000)
        js["metadata"]["annotations"] = {ANNOTATION_PIN: "worker-1"}
        created = await env.manager.create(JOBSETS, ns, js)
        uid = created["metadata"]["uid"]

        async def running_on_w1() -> bool:
            got = await env.manager.get(JOBSETS, ns, "moved")
            return any(r.get("active") for r in (got.get("status") or {}).get("replicatedJobsStatus") or [])

        await wait_for(running_on_w1, timeout=60, what="running on worker-1")
        await env.manager.patch(JOBSETS, ns, "moved", {"metadata": {"annotations": {ANNOTATION_PIN: None}}})
        w1.stop()
        try:
            await env.wait_event("moved", "WorkerLost", timeout=60)
            await env.wait_event("moved", "Redispatched", timeout=30)
            done = await _terminal(env, "moved")
            assert done["status"]["terminalState"] == "Completed"
            assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2"
        finally:
            w1.start()

        async def stale_removed() -> bool:
            items, _ = await env.workers["worker-1"].list_all(JOBSETS, ns, label_selector=f"{LABEL_ORIGIN_UID}={uid}")
            return not items

        await wait_for(stale_removed, timeout=60, what="the stale copy on the returned worker-1 deleted")


async def test_the_managers_jobset_controller_runs_an_unclaimed_jobset(
        client_for: ClientFor, ns: str, jobset_controllers: list[str]) -> None:
    """The control: with managedBy unset, JobSet in the manager (no nodes) makes the child Jobs itself."""
    manager = await client_for(MANAGER)
    from tests.conftest import ensure_namespace

    await ensure_namespace(manager, ns)
    await manager.create(JOBSETS, ns, make_jobset("theirs", managed_by=None))

    async def children() -> list[str] | None:
        jobs, _ = await manager.list_all(JOBS, ns)
        names = sorted(j["metadata"]["name"] for j in jobs)
        return names if len(names) == 3 else None

    assert await wait_for(children, timeout=60, what="JobSet's child Jobs in the manager") == [
        "theirs-leader-0", "theirs-workers-0", "theirs-workers-1"]


async def test_kubectl_jobmirror_shows_a_jobset_and_reads_a_replicated_jobs_pod(
        client_for: ClientFor, cluster: ClusterFn, ns: str, jobset_controllers: list[str], tmp_path: Path) -> None:
    """status lists the JobSet; through the real service proxy a user who may get JobSets describes it and
    reads the logs of the pod of Job 1 of replicatedJob 'workers'; one who may get Jobs only is refused"""
    ip = host_address()
    async with mirror_env(client_for, cluster, ns, kinds=["Job", "JobSet"], inspect_address=f"{ip}:0") as env:
        ctrl = await env.start()
        admin = env.manager

        async def api_up() -> bool:
            return ctrl.inspect_api is not None and ctrl.inspect_api.port != 0

        await wait_for(api_up, timeout=30, what="inspect API listening")
        assert ctrl.inspect_api is not None
        await expose_through_service_proxy(admin, ns, ip, ctrl.inspect_api.port)
        mkc = env.clusters["manager"].kubeconfig
        reads_pods = [{"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
                      {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]
        _, dana = await service_account(admin, ns, "dana", mkc, tmp_path / "dana", {ns: [
            {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "list"]}, *reads_pods]})
        erin_token, _ = await service_account(admin, ns, "erin", mkc, tmp_path / "erin", {ns: [
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list"]}, *reads_pods]})

        js = make_jobset("probe", outcome="hang")
        js["metadata"]["annotations"] = {ANNOTATION_PIN: "worker-2"}
        await admin.create(JOBSETS, ns, js)

        async def pods_running() -> bool:
            pods = await env.workers["worker-2"].list(PODS, ns, label_selector="jobset.sigs.k8s.io/jobset-name=probe")
            running = [p for p in pods.get("items") or [] if (p.get("status") or {}).get("phase") == "Running"]
            return len(running) == 5  # leader 1 x 1, workers 2 x 2

        await wait_for(pods_running, timeout=90, what="the copy's 5 pods running on worker-2")

        rc, out, err = await plugin("status", "-n", ns, "--kubeconfig", str(mkc), "-o", "json")
        assert rc == 0, err
        (row,) = json.loads(out)["jobsets"]
        assert (row["jobset"], row["worker"], row["state"]) == (f"{ns}/probe", "worker-2", "Running"), row
        rc, out, err = await plugin("status", "-n", ns, "--kubeconfig", str(mkc))
        assert rc == 0 and "1 claimed JobSets, 1 unfinished" in out, (out, err)
        print(out)

        svc = f"--inspect-service={ns}/https:jobmirror-inspect:inspect"
        rc, out, err = await plugin("describe", "jobset/probe", "--kubeconfig", str(dana), svc)
        assert rc == 0, err
        print(out)  # the report quotes a real one
        assert "Kind:        JobSet (jobset.x-k8s.io/v1alpha2)" in out and f"Copy:        {ns}/probe on worker-2" in out
        assert sum(1 for ln in out.splitlines() if ln.strip().startswith("probe-workers-")) == 4, out
        rc, out, err = await plugin("logs", "jobset/probe", "--replicated-job", "workers", "--index", "1",
                                    "--kubeconfig", str(dana), svc)
        assert rc == 0 and "kwok fake container log line 3" in out, (out, err)
        rc, out, err = await plugin("logs", "jobset/probe", "--replicated-job", "workers", "--index", "7",
                                    "--kubeconfig", str(dana), svc)
        assert rc == 1 and "has no pod of replicatedJob workers Job index 7" in err, err

        status, body = await proxied(admin, ns, f"/v1/namespaces/{ns}/jobsets/probe/describe",
                                     {"Authorization": f"Bearer {erin_token}", "X-Jobmirror-Token": erin_token})
        assert status == 403, (status, body)
        assert body["error"] == (f"user 'system:serviceaccount:{ns}:erin' may not get jobsets.jobset.x-k8s.io "
                                 f"{ns}/probe on the manager")
