"""A worker that accepts copies and never runs them (issue 36), on real API servers; and what the
fit catches before placing (a ServiceAccount the worker's namespace lacks, a PriorityClass it does not serve).

The worker is kube-controller-manager without its Job controller (``KCM_NO_JOBS``): a copy
there exists and nothing ever creates a pod or writes a status. The worker events' progress
check must name that cause on the manager Job (``CopyStuck``) and, with enough such copies,
mark the worker stalled until a copy there shows a Job controller at work. Pinned Jobs only get
the Warning; unpinned ones move (nothing of them ran) and complete on the other worker, as do
Jobs whose worker's ResourceQuota forbids their pods (FailedCreate).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import JOBS, PRIORITY_CLASSES, Resource
from mirror import metrics
from mirror.controller import MirrorController
from mirror.naming import ANNOTATION_CLUSTER, ANNOTATION_PIN
from mirror.progress import ProgressConfig
from mirror.room.view import SERVICE_ACCOUNTS
from testkit.waiting import ensure_namespace
from tests.conftest import KCM_NO_JOBS, WORKER_1, WORKER_2, wait_for
from tests.integration.inspect_env import direct, plugin, user
from tests.integration.mirror_env import make_job, mirror_env

pytestmark = pytest.mark.integration

SILENT = KCM_NO_JOBS.name
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")


async def test_a_worker_without_a_job_controller_is_told_and_stalled(
    client_for: Callable[[ClusterSpec], Awaitable[ClusterClient]],
    cluster: Callable[[ClusterSpec], LocalCluster],
    ns: str,
    tmp_path: Path,
) -> None:
    # LeastLoaded: the copies are pinned; the stuck memory (RoomAware's move) is the lead's wiring.
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1, KCM_NO_JOBS), placement="LeastLoaded",
                          unschedulable_timeout=2.0, inspect_address="127.0.0.1:0") as env:
        ctrl = await env.start()

        async def wired() -> bool:
            return ("Job", SILENT) in ctrl.worker_events

        await wait_for(wired, timeout=30, what="worker events wired")
        # What the lead's wiring passes from Config.progress; short deadlines for the test.
        ctrl.worker_events["Job", SILENT].progress = ProgressConfig.model_validate(
            {"podsCreatedTimeout": 3, "stalledCopies": 2})
        ctrl.worker_events["Job", WORKER_1.name].progress = ProgressConfig.model_validate({"podsCreatedTimeout": 3})

        await env.create(make_job("runs", duration_ms=3000, annotations={ANNOTATION_PIN: WORKER_1.name}))
        for name in ("p1", "p2"):
            await env.create(make_job(name, annotations={ANNOTATION_PIN: SILENT}))
        ev = await env.wait_event("p1", "CopyStuck", timeout=60)
        assert ev["type"] == "Warning"
        assert ev["message"] == (f"the copy {ns}/p1 on worker {SILENT} is stuck in phase created past "
                                 "podsCreatedTimeout (3s): no pod and no status from this worker's Job controller")
        await env.wait_event("p2", "CopyStuck", timeout=30)

        worker = ctrl.workers[SILENT]

        async def stalled() -> str | None:
            return worker.stalled

        reason = await wait_for(stalled, timeout=30, what=f"{SILENT} stalled")
        assert reason.startswith(f"2 copies on worker {SILENT} have had no pod"), reason
        assert metrics.WORKER_STALLED.labels(SILENT)._value.get() == 1
        assert ctrl.workers[WORKER_1.name].stalled is None

        # Shown to users (item 3): the inspect API's worker listing and `kubectl jobmirror status`, for a
        # user of this namespace with a real token (reviewed by the manager), as the controller sees it.
        assert ctrl.inspect_api is not None and ctrl.inspect_api.port
        address = f"127.0.0.1:{ctrl.inspect_api.port}"
        token, kubeconfig = await user(env.manager, ns, "alice", env.clusters["manager"].kubeconfig,
                                       tmp_path / "alice", may_get_jobs_in=ns)
        code, body = await direct(address, f"/v1/namespaces/{ns}/workers", token)
        assert code == 200, body
        rows = {r["name"]: r for r in body["items"]}
        assert rows[SILENT]["health"] == "STALLED" and rows[SILENT]["reason"] == reason, rows
        since = datetime.strptime(rows[SILENT]["since"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert abs((datetime.now(UTC) - since).total_seconds()) < 60, rows[SILENT]
        assert rows[WORKER_1.name]["health"] == "healthy"
        rc, out, err = await plugin("status", "--kubeconfig", str(kubeconfig), f"--inspect-url=https://{address}")
        assert rc == 0, err
        print(out)  # the report quotes a real one
        line = next(ln for ln in out.splitlines() if ln.startswith(SILENT))
        assert line.split()[1:3] == ["STALLED", rows[SILENT]["since"]] and line.endswith(reason), line

        # The worker with a Job controller: its Job completes and is never told stuck.
        await env.wait_condition("runs", "Complete", timeout=60)
        assert "CopyStuck" not in {e["reason"] for e in await env.events("runs")}

        # A Job controller at work again: it writes a status on a counted copy. (This one writes only that:
        # the copies stay without pods, so with stalledCopies 2 the next round, 1 s later, would find the
        # worker stalled again; a real controller makes their pods. Raised, the clear is what is seen.)
        ctrl.worker_events["Job", SILENT].progress = ProgressConfig.model_validate(
            {"podsCreatedTimeout": 3, "stalledCopies": 100})
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        await env.workers[SILENT].patch(JOBS, ns, "p1", {"status": {"startTime": now}}, subresource="status")

        async def cleared() -> bool:
            return worker.stalled is None

        await wait_for(cleared, timeout=30, what=f"{SILENT} no longer stalled")
        assert metrics.WORKER_STALLED.labels(SILENT)._value.get() == 0
        code, body = await direct(address, f"/v1/namespaces/{ns}/workers", token)
        assert code == 200 and {r["name"]: r["health"] for r in body["items"]}[SILENT] == "healthy", body
        rc, out, err = await plugin("status", "--kubeconfig", str(kubeconfig), f"--inspect-url=https://{address}")
        assert rc == 0 and "STALLED" not in out, (out, err)


async def both_healthy(ctrl: MirrorController, *workers: str) -> None:
    """Before the Jobs: a worker whose caches have not synced yet takes none (least loaded then sends
    them all to the other, and the test would test nothing)."""
    async def healthy() -> bool:
        return all(w in ctrl.workers and ctrl.workers[w].healthy for w in workers)

    await wait_for(healthy, timeout=30, what=f"{', '.join(workers)} healthy")


async def test_unpinned_jobs_leave_a_worker_without_a_job_controller_and_complete(
    client_for: Callable[[ClusterSpec], Awaitable[ClusterClient]],
    cluster: Callable[[ClusterSpec], LocalCluster],
    ns: str,
) -> None:
    """Item 2 on real servers: copies sent to the worker whose Job controller runs nothing are moved
    (nothing of them ran) and complete on the other worker; each moved Job says why in Replaced."""
    progress = ProgressConfig.model_validate({"podsCreatedTimeout": 3, "stalledCopies": 100})
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1, KCM_NO_JOBS), placement="LeastLoaded",
                          progress=progress) as env:
        await both_healthy(await env.start(), WORKER_1.name, SILENT)
        names = [f"u{i}" for i in range(4)]
        for name in names:  # least loaded: they alternate between the two workers
            await env.create(make_job(name, duration_ms=500))
        for name in names:
            done = await env.wait_condition(name, "Complete", timeout=120)
            assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == WORKER_1.name
        moved = []
        for name in names:
            made = await env.copies_made((await env.get(name) or {})["metadata"]["uid"], timeout=5)
            if SILENT in made.values():
                moved.append(name)
                replaced = [e["message"] for e in await env.events(name) if e["reason"] == "Replaced"]
                assert len(replaced) == 1, replaced
                assert replaced[0].startswith(f"moved from worker {SILENT} to {WORKER_1.name}"), replaced
                assert "no pod and no status from this worker's Job controller" in replaced[0]
        assert moved, "no Job was placed on the silent worker first: nothing was tested"


async def test_jobs_leave_a_worker_whose_quota_forbids_their_pods(
    client_for: Callable[[ClusterSpec], Awaitable[ClusterClient]],
    cluster: Callable[[ClusterSpec], LocalCluster],
    ns: str,
) -> None:
    """Item 5: a ResourceQuota allowing no pod in worker-2's namespace. Its Job controller reports
    FailedCreate; the copies move to worker-1 and complete, the worker's words in Replaced."""
    w2 = await client_for(WORKER_2)
    await ensure_namespace(w2, ns)
    await w2.create(RESOURCE_QUOTAS, ns, {"metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}})
    progress = ProgressConfig.model_validate({"podsCreatedTimeout": 3})
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1, WORKER_2), placement="LeastLoaded",
                          progress=progress) as env:
        await both_healthy(await env.start(), WORKER_1.name, WORKER_2.name)
        names = [f"q{i}" for i in range(4)]
        for name in names:
            await env.create(make_job(name, duration_ms=500))
        for name in names:
            done = await env.wait_condition(name, "Complete", timeout=120)
            assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == WORKER_1.name
        replaced = [e["message"] for name in names for e in await env.events(name) if e["reason"] == "Replaced"]
        assert replaced, "no Job was placed on worker-2 first: nothing was tested"
        for message in replaced:
            assert message.startswith(f"moved from worker {WORKER_2.name} to {WORKER_1.name}"), message
            assert "FailedCreate" in message and "exceeded quota: no-pods" in message, message


async def test_a_job_goes_only_where_its_service_account_is(
    client_for: Callable[[ClusterSpec], Awaitable[ClusterClient]],
    cluster: Callable[[ClusterSpec], LocalCluster],
    ns: str,
) -> None:
    """Fit (item 4): worker-1's namespace lacks the ServiceAccount the Job's pods run as (its admission
    would refuse every pod); the Job is placed on worker-2, which has it, and completes there. A Job
    naming one no worker has waits in the manager with NoWorkerFits naming it, and is placed once
    it is created on a worker."""
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1, WORKER_2)) as env:
        await env.workers[WORKER_2.name].create(SERVICE_ACCOUNTS, ns, {"metadata": {"name": "builder"}})
        await env.start()
        await env.create(make_job("as-builder", pod_spec={"serviceAccountName": "builder"}))
        done = await env.wait_condition("as-builder", "Complete", timeout=90)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == WORKER_2.name

        await env.create(make_job("as-ghost", pod_spec={"serviceAccountName": "ghost"}))
        ev = await env.wait_event("as-ghost", "NoWorkerFits", timeout=30)
        assert ev["type"] == "Warning"
        assert ev["message"] == (
            f"cannot dispatch: no worker could ever run its pod: {WORKER_1.name}: has no ServiceAccount {ns}/ghost "
            f"(create it there); {WORKER_2.name}: has no ServiceAccount {ns}/ghost (create it there)")
        waiting = await env.get("as-ghost")
        assert waiting is not None and ANNOTATION_CLUSTER not in waiting["metadata"].get("annotations", {})
        assert not await env.copies(waiting["metadata"]["uid"])  # no copy sent anywhere to be refused

        await env.workers[WORKER_1.name].create(SERVICE_ACCOUNTS, ns, {"metadata": {"name": "ghost"}})
        done = await env.wait_condition("as-ghost", "Complete", timeout=90)  # placed at its next look (resync)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == WORKER_1.name


async def test_a_job_goes_only_where_its_priority_class_is(
    client_for: Callable[[ClusterSpec], Awaitable[ClusterClient]],
    cluster: Callable[[ClusterSpec], LocalCluster],
    ns: str,
) -> None:
    """Fit (item 4, item 5's "a missing PriorityClass on one worker"): worker-2 serves no PriorityClass
    the Job's pods name (its Priority admission would refuse every pod); the Job runs on worker-1."""
    w1 = await client_for(WORKER_1)
    klass = f"jm-{ns}"  # cluster-scoped: a name of this test's own, deleted after
    await w1.create(PRIORITY_CLASSES, None, {"metadata": {"name": klass}, "value": 1000})
    try:
        async with mirror_env(client_for, cluster, ns, workers=(WORKER_1, WORKER_2)) as env:
            await env.start()
            # worker-1 busier: by load alone the next Job would go to worker-2
            await env.create(make_job("ballast", outcome="hang", annotations={ANNOTATION_PIN: WORKER_1.name}))
            await env.wait_copy("ballast")
            await env.create(make_job("urgent", pod_spec={"priorityClassName": klass}))
            done = await env.wait_condition("urgent", "Complete", timeout=90)
            assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == WORKER_1.name
            assert "NoWorkerFits" not in {e["reason"] for e in await env.events("urgent")}
    finally:
        await w1.delete(PRIORITY_CLASSES, None, klass)
