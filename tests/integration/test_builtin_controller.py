"""The builtin Job controller against a real API server (no kube-controller-manager at all).

Pods are driven through the status subresource as a kubelet would; the controller runs in
this process (see ``tests/conformance/harness.py``) and only touches ``bc-`` namespaces.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from prometheus_client import REGISTRY

from builtin_controller import fields
from builtin_controller.controller import JobController
from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import EVENTS, JOBS, PODS, Obj
from tests.conformance.harness import (
    HANG,
    SUCCEED,
    ClusterView,
    Driver,
    always,
    driver,
    ensure_controller,
    ensure_namespace,
    ensure_view,
    fail,
    job_spec,
    stop_controllers,
)
from tests.conftest import APISERVER_ONLY

pytestmark = pytest.mark.integration

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]


@pytest.fixture(scope="session")
async def api_only(client_for: ClientFor, cluster: Callable[[ClusterSpec], LocalCluster]
                   ) -> AsyncIterator[tuple[ClusterView, JobController]]:
    client = await client_for(APISERVER_ONLY)
    lc = await asyncio.to_thread(cluster, APISERVER_ONLY)
    ctl = await ensure_controller(APISERVER_ONLY.name, str(lc.kubeconfig))
    view = await ensure_view(client)
    yield view, ctl
    await stop_controllers()


@pytest.fixture
def view(api_only: tuple[ClusterView, JobController]) -> ClusterView:
    return api_only[0]


@pytest.fixture
def ctl(api_only: tuple[ClusterView, JobController]) -> JobController:
    return api_only[1]


def metric(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def events_of(d: Driver) -> list[tuple[str, str, str]]:
    """Job events, one entry per occurrence (repeats are folded into ``count`` on the server)."""
    items, _ = await d.client.list_all(EVENTS, d.ns)
    return [(e.get("type", ""), e.get("reason", ""), e.get("message", "")) for e in items
            if e.get("involvedObject", {}).get("kind") == "Job" for _ in range(int(e.get("count") or 1))]


# -- pods the controller creates --------------------------------------------------------------

async def test_indexed_pods_have_upstream_shape_and_complete(view: ClusterView) -> None:
    async with driver(view, outcome=always(HANG)) as d:
        spec = job_spec(completions=3, parallelism=3, completionMode="Indexed")
        spec["template"]["spec"]["subdomain"] = "workers"
        created = await d.create_job(spec)
        pods = await d.wait_running(3)
        uid = created["metadata"]["uid"]
        by_index = {fields.completion_index(p): p for p in pods}
        assert sorted(by_index) == [0, 1, 2]
        for ix, p in by_index.items():
            md = p["metadata"]
            assert md["name"].startswith(f"job-{ix}-") and md["generateName"] == f"job-{ix}-"
            assert md["labels"]["batch.kubernetes.io/job-name"] == "job"
            assert md["labels"]["batch.kubernetes.io/controller-uid"] == uid
            assert md["labels"][fields.COMPLETION_INDEX_KEY] == str(ix)
            assert md["annotations"][fields.COMPLETION_INDEX_KEY] == str(ix)
            assert md["finalizers"] == [fields.JOB_TRACKING_FINALIZER]
            assert md["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": uid,
                                              "controller": True, "blockOwnerDeletion": True}]
            assert p["spec"]["hostname"] == f"job-{ix}"
            assert p["spec"]["subdomain"] == "workers"
            env = p["spec"]["containers"][0]["env"]
            assert env == [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                "apiVersion": "v1", "fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}]
        for p in pods:
            await d.succeed_pod(p)
        await d.wait_finished()
        snap = await d.snapshot()
        job = snap["job"]
        assert job["terminal"] == "Complete"
        assert (job["succeeded"], job["failed"], job["completedIndexes"]) == (3, 0, "0-2")
        assert [c[:3] for c in job["conditions"]] == [("SuccessCriteriaMet", "True", "CompletionsReached"),
                                                      ("Complete", "True", "CompletionsReached")]
        assert job["completionTime"] and job["startTime"]
        assert snap["pods_with_finalizer"] == 0
        evs = await events_of(d)
        assert sum(1 for e in evs if e[1] == "SuccessfulCreate") == 3
        assert ("Normal", "Completed", "Job completed") in evs


async def test_expectations_prevent_duplicate_pods_under_event_storm(view: ClusterView, ctl: JobController) -> None:
    async with driver(view, outcome=always(HANG)) as d:
        await d.create_job(job_spec(completions=20, parallelism=5))
        key = f"{d.ns}/job"
        most = 0

        async def storm() -> None:
            for i in range(30):
                ctl.queue.add(key)
                await d.patch_job({"metadata": {"annotations": {"poke": str(i)}}})
                await asyncio.sleep(0.02)

        async def watch_count() -> None:
            nonlocal most
            for _ in range(60):
                most = max(most, len([p for p in d.pods() if not fields.is_terminal(p)]))
                await asyncio.sleep(0.05)

        await asyncio.gather(storm(), watch_count())
        await d.wait_running(5)
        await asyncio.sleep(2)
        assert most <= 5
        assert len(d.pods()) == 5
        assert len(d.seen) == 5


async def test_pods_are_counted_before_their_finalizer_goes(view: ClusterView) -> None:
    """KEP-2307: a UID is in uncountedTerminatedPods (or counted) before its finalizer is removed."""
    job_rv_of_uncounted: dict[str, int] = {}
    pod_rv_finalizer_gone: dict[str, int] = {}

    def on_job(etype: str, job: Obj) -> None:
        u = (job.get("status") or {}).get("uncountedTerminatedPods") or {}
        for x in (u.get("succeeded") or []) + (u.get("failed") or []):
            job_rv_of_uncounted.setdefault(x, int(fields.md(job)["resourceVersion"]))

    def on_pod(etype: str, pod: Obj) -> None:
        if not fields.has_tracking_finalizer(pod):
            pod_rv_finalizer_gone.setdefault(fields.uid(pod), int(fields.md(pod)["resourceVersion"]))

    outcome = lambda i: fail(3) if i.ordinal == 1 else SUCCEED  # noqa: E731
    async with driver(view, outcome=outcome) as d:
        d.job_listeners.append(on_job)
        d.pod_listeners.append(on_pod)
        await d.create_job(job_spec(completions=6, parallelism=3, backoffLimit=5))
        await d.wait_finished(timeout=90)
        await d.wait(lambda: len(pod_rv_finalizer_gone) == 7, what="all finalizer removals observed")
        snap = await d.snapshot()
    assert snap["job"]["terminal"] == "Complete"
    assert (snap["job"]["succeeded"], snap["job"]["failed"]) == (6, 1)
    assert len(pod_rv_finalizer_gone) == 7
    for pod_uid, rv in pod_rv_finalizer_gone.items():
        assert pod_uid in job_rv_of_uncounted, f"pod {pod_uid} lost its finalizer without being recorded"
        assert job_rv_of_uncounted[pod_uid] < rv


async def test_deleted_pod_counts_as_failed_and_is_replaced_after_backoff(view: ClusterView) -> None:
    async with driver(view, outcome=always(HANG)) as d:
        await d.create_job(job_spec(completions=1, backoffLimit=3))
        [first] = await d.wait_running(1)
        t0 = asyncio.get_running_loop().time()
        await d.delete_pod(first)
        await d.wait(lambda: (d.job or {}).get("status", {}).get("failed") == 1, what="failed=1")
        [second] = await d.wait_running(1, timeout=30)
        waited = asyncio.get_running_loop().time() - t0
        assert fields.uid(second) != fields.uid(first)
        assert waited >= 8.5, f"replacement after {waited:.1f}s, expected the 10 s pod-failure backoff"
        await d.succeed_pod(second)
        await d.wait_finished()
        job = (await d.snapshot())["job"]
        assert (job["succeeded"], job["failed"], job["terminal"]) == (1, 1, "Complete")


async def test_backoff_delay_doubles_and_limit_fails_the_job(view: ClusterView) -> None:
    async with driver(view, outcome=always(fail(1, delay=0.1))) as d:
        await d.create_job(job_spec(completions=1, backoffLimit=2))
        await d.wait_finished(timeout=90)
        pods = sorted(d.pods(), key=lambda p: fields.md(p)["creationTimestamp"])
        job = (await d.snapshot())["job"]
        assert job["terminal"] == "Failed"
        assert job["failed"] == 3
        assert [c[:3] for c in job["conditions"]] == [("FailureTarget", "True", "BackoffLimitExceeded"),
                                                      ("Failed", "True", "BackoffLimitExceeded")]
        assert not job["completionTime"]
    created = [fields.parse_time(fields.md(p)["creationTimestamp"]) for p in pods]
    assert len(created) == 3
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(created)]  # type: ignore[operator]
    assert gaps[0] >= 9 and gaps[1] >= 19, gaps


async def test_job_deletion_removes_tracking_finalizers(view: ClusterView) -> None:
    async with driver(view, outcome=always(HANG)) as d:
        await d.create_job(job_spec(completions=3, parallelism=3))
        await d.wait_running(3)
        await d.delete_job("Background")  # no garbage collector here: pods stay, as orphans-to-be
        await d.wait(lambda: d.job is None, what="Job gone")
        await d.wait(lambda: d.pods() and all(not fields.has_tracking_finalizer(p) for p in d.pods()),
                     what="finalizers removed")
        assert len(d.pods()) == 3


async def test_adopts_matching_orphans_and_releases_non_matching_pods(view: ClusterView) -> None:
    async with driver(view, outcome=always(HANG)) as d:
        labels = {"app": "adopt-me", "batch.kubernetes.io/job-name": "job"}
        orphan = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan", "labels": labels},
                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        await d.client.create(PODS, d.ns, orphan)
        await d.wait(lambda: any(fields.phase(p) == "Running" for p in d.pods()), what="orphan running")
        spec = job_spec(completions=3, parallelism=1, manualSelector=True,
                        selector={"matchLabels": {"app": "adopt-me"}})
        spec["template"]["metadata"] = {"labels": labels}
        await d.create_job(spec)

        def adopted() -> bool:
            p = view.pods.get(f"{d.ns}/orphan")
            ref = None if p is None else fields.controller_ref(p)
            return p is not None and ref is not None and ref["uid"] == fields.uid(d.job or {}) \
                and fields.has_tracking_finalizer(p)

        await d.wait(adopted, what="orphan adopted")
        await d.wait_running(1)  # the adopted pod is the Job's one active pod: nothing else created
        await asyncio.sleep(1.5)
        assert [fields.name(p) for p in d.pods()] == ["orphan"]
        await d.client.patch(PODS, d.ns, "orphan", {"metadata": {"labels": {"app": "elsewhere"}}})

        def released() -> bool:
            p = view.pods.get(f"{d.ns}/orphan")
            return p is not None and fields.controller_ref(p) is None and not fields.has_tracking_finalizer(p)

        await d.wait(released, what="non-matching pod released")
        await d.wait(lambda: any(fields.name(p) != "orphan" for p in d.active()), what="a replacement of its own")
        assert view.pods.get(f"{d.ns}/orphan") is not None  # released, not deleted
        job = (await d.snapshot())["job"]
        assert (job["failed"], job["succeeded"]) == (0, 0)


async def test_foreign_managed_by_is_skipped_and_counted_once(view: ClusterView) -> None:
    name = "example.com/other-controller"
    before = metric("job_controller_jobs_by_external_controller_total", {"controller_name": name})
    async with driver(view, job_name="foreign") as foreign, driver(view, ns=foreign.ns, job_name="ours") as ours, \
            driver(view, ns=foreign.ns, job_name="explicit") as explicit:
        await foreign.create_job(job_spec(managedBy=name))
        await ours.create_job(job_spec())
        await explicit.create_job(job_spec(managedBy="kubernetes.io/job-controller"))
        await ours.wait_finished()
        await explicit.wait_finished()
        await foreign.patch_job({"metadata": {"labels": {"touched": "yes"}}})
        await asyncio.sleep(2)
        j = await foreign.client.get(JOBS, foreign.ns, "foreign")
        assert j.get("status", {}) == {}
        assert foreign.pods() == []
    after = metric("job_controller_jobs_by_external_controller_total", {"controller_name": name})
    assert after - before == 1


async def test_suspend_resume_conditions_events_and_start_time(view: ClusterView) -> None:
    async with driver(view, outcome=always(HANG)) as d:
        await d.create_job(job_spec(completions=2, parallelism=2, suspend=True, activeDeadlineSeconds=600))
        await d.wait_condition("Suspended")
        job = d.job or {}
        assert "startTime" not in job["status"] and d.pods() == []
        await d.patch_job({"spec": {"suspend": False}})
        await d.wait_condition("Suspended", "False")
        await d.wait_running(2)
        start1 = (d.job or {})["status"]["startTime"]
        cond = fields.condition(d.job or {}, "Suspended") or {}
        assert (cond["reason"], cond["message"]) == ("JobResumed", "Job resumed")
        await d.patch_job({"spec": {"suspend": True}})
        await d.wait_condition("Suspended")
        await d.wait(lambda: d.pods() == [], what="pods deleted on suspend")
        await asyncio.sleep(1.1)
        await d.patch_job({"spec": {"suspend": False}})
        await d.wait_condition("Suspended", "False")
        await d.wait_running(2)
        start2 = (d.job or {})["status"]["startTime"]
        assert start2 > start1  # resuming restarts the activeDeadlineSeconds clock
        job = (await d.snapshot())["job"]
        assert job["failed"] == 0  # pods deleted by suspension are not failures
        reasons = [e[1] for e in await events_of(d)]
        assert reasons.count("Suspended") == 2 and reasons.count("Resumed") == 2
        assert reasons.count("SuccessfulDelete") == 2


async def test_parallelism_scale_down_deletes_without_counting(view: ClusterView) -> None:
    async with driver(view, outcome=always(HANG)) as d:
        await d.create_job(job_spec(completions=5, parallelism=4))
        await d.wait_running(4)
        await d.patch_job({"spec": {"parallelism": 1}})
        await d.wait_running(1)
        await d.wait_settled(1.5)
        job = (await d.snapshot())["job"]
        assert (job["active"], job["failed"], job["terminating"]) == (1, 0, 0)


async def test_per_index_failure_count_travels_to_the_replacement(view: ClusterView) -> None:
    outcome = lambda i: fail(1) if i.attempt == 0 else HANG  # noqa: E731
    async with driver(view, outcome=outcome) as d:
        await d.create_job(job_spec(completions=2, parallelism=2, completionMode="Indexed", backoffLimitPerIndex=2,
                                    backoffLimit=None))
        await d.wait(lambda: len(d.running()) == 2 and len(d.seen) == 4, timeout=60, what="replacements running")
        for p in d.running():
            ann = fields.annotations_of(p)
            assert ann[fields.INDEX_FAILURE_COUNT_KEY] == "1"
        await d.wait(lambda: all(not fields.has_tracking_finalizer(p) for p in d.pods() if fields.is_terminal(p)),
                     what="failed pods released once replaced")
        await d.wait(lambda: (d.job or {}).get("status", {}).get("failed") == 2, what="both failures counted")
        assert (d.job or {})["status"].get("failedIndexes") == ""


async def test_terminal_condition_waits_for_terminating_pods(view: ClusterView) -> None:
    hold = "jobmirror.dev/test-hold"
    outcome = lambda i: fail(42) if i.ordinal == 0 else HANG  # noqa: E731
    async with driver(view, outcome=outcome) as d:
        spec = job_spec(completions=2, parallelism=2, podFailurePolicy={"rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]})
        spec["template"]["metadata"] = {"finalizers": [hold]}
        await d.create_job(spec)
        await d.wait_condition("FailureTarget")
        await d.wait(lambda: (d.job or {}).get("status", {}).get("terminating") == 1, what="terminating=1")
        await asyncio.sleep(2)
        assert d.cond("Failed") is None  # a pod is still terminating
        for p in d.pods():
            await d.client.patch(PODS, d.ns, fields.name(p),
                                 {"metadata": {"$deleteFromPrimitiveList/finalizers": [hold]}}, patch_type="strategic")
        await d.wait_finished()
        job = (await d.snapshot())["job"]
        assert job["terminal"] == "Failed" and job["terminating"] == 0
        assert job["conditions"][0][2] == "PodFailurePolicy"


async def test_sync_metrics_are_exported(view: ClusterView) -> None:
    before = metric("job_controller_jobs_finished_total",
                    {"completion_mode": "NonIndexed", "result": "succeeded", "reason": "CompletionsReached"})
    async with driver(view) as d:
        await d.create_job(job_spec(completions=2, parallelism=2))
        await d.wait_finished()

    def finished_counted() -> float:
        return metric("job_controller_jobs_finished_total",
                      {"completion_mode": "NonIndexed", "result": "succeeded", "reason": "CompletionsReached"}) - before

    # The count follows the status write the driver saw: the controller's pass may still be between the two
    # (a CI run at load 30 read it before the increment).
    for _ in range(50):
        if finished_counted():
            break
        await asyncio.sleep(0.1)
    assert finished_counted() == 1
    assert metric("job_controller_job_syncs_total",
                  {"completion_mode": "NonIndexed", "result": "success", "action": "pods_created"}) >= 1
    assert metric("job_controller_job_pods_finished_total",
                  {"completion_mode": "NonIndexed", "result": "succeeded"}) >= 2
    assert metric("job_controller_job_pods_creation_total", {"reason": "new", "status": "succeeded"}) >= 2


# -- the CLI ----------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_cli_serves_metrics_and_shuts_down_on_sigterm(view: ClusterView,
                                                            cluster: Callable[[ClusterSpec], LocalCluster]) -> None:
    lc = await asyncio.to_thread(cluster, APISERVER_ONLY)
    ns = "cli-" + os.urandom(4).hex()  # outside the in-process controller's namespaces
    await ensure_namespace(view.client, ns)
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "builtin_controller.cli", "--kubeconfig", str(lc.kubeconfig), "--namespace", ns,
        "--metrics-address", f"127.0.0.1:{port}", "--workers", "2", cwd=str(Path(__file__).resolve().parents[2]),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        async with aiohttp.ClientSession() as http:
            async def get(path: str) -> tuple[int, str]:
                async with http.get(f"http://127.0.0.1:{port}{path}") as r:
                    return r.status, await r.text()

            async def ready() -> bool:
                try:
                    return (await get("/readyz"))[0] == 200
                except aiohttp.ClientError:
                    return False

            for _ in range(100):
                if await ready():
                    break
                await asyncio.sleep(0.2)
            else:
                raise AssertionError("CLI never became ready")
            assert (await get("/healthz"))[0] == 200
            c = view.client
            await c.create(JOBS, ns, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "cli"},
                                      "spec": job_spec()})
            from clusterbed import kubelet

            for _ in range(100):
                pods = await kubelet.job_pods(c, ns, "cli")
                if pods:
                    await kubelet.finish_pod(c, pods[0], succeeded=True)
                    break
                await asyncio.sleep(0.2)
            for _ in range(100):
                j = await c.get(JOBS, ns, "cli")
                if fields.condition_true(j, "Complete"):
                    break
                await asyncio.sleep(0.2)
            else:
                raise AssertionError(f"CLI-run Job never completed: {j.get('status')}")
            status, text = await get("/metrics")
            assert status == 200
            for name in ("job_controller_job_sync_duration_seconds_bucket", "job_controller_job_syncs_total",
                         "job_controller_jobs_finished_total", "job_controller_job_pods_finished_total",
                         "job_controller_job_pods_creation_total"):
                assert name in text, name
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.wait_for(proc.wait(), 20)
        out = (await proc.stdout.read()).decode() if proc.stdout else ""
        assert rc == 0, out
        assert "shutting down" in out
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

