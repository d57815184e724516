"""A worker that accepts copies and never runs them (issue 36), on real API servers.

The worker is kube-controller-manager without its Job controller (``KCM_NO_JOBS``): a copy
there exists and nothing ever creates a pod or writes a status. The worker events' progress
check must name that cause on the manager Job (``CopyStuck``) and, with enough such copies,
mark the worker stalled until a copy there shows a Job controller at work. The move itself is
the reconciler's (pinned Jobs here: they only get the Warning).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import JOBS
from mirror import metrics
from mirror.naming import ANNOTATION_PIN
from mirror.progress import ProgressConfig
from tests.conftest import KCM_NO_JOBS, WORKER_1, wait_for
from tests.integration.mirror_env import make_job, mirror_env

pytestmark = pytest.mark.integration

SILENT = KCM_NO_JOBS.name


async def test_a_worker_without_a_job_controller_is_told_and_stalled(
    client_for: Callable[[ClusterSpec], Awaitable[ClusterClient]],
    cluster: Callable[[ClusterSpec], LocalCluster],
    ns: str,
) -> None:
    # LeastLoaded: the copies are pinned; the stuck memory (RoomAware's move) is the lead's wiring.
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1, KCM_NO_JOBS), placement="LeastLoaded",
                          unschedulable_timeout=2.0) as env:
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

        # The worker with a Job controller: its Job completes and is never told stuck.
        await env.wait_condition("runs", "Complete", timeout=60)
        assert "CopyStuck" not in {e["reason"] for e in await env.events("runs")}

        # A Job controller at work again: it writes a status on a counted copy.
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        await env.workers[SILENT].patch(JOBS, ns, "p1", {"status": {"startTime": now}}, subresource="status")

        async def cleared() -> bool:
            return worker.stalled is None

        await wait_for(cleared, timeout=30, what=f"{SILENT} no longer stalled")
        assert metrics.WORKER_STALLED.labels(SILENT)._value.get() == 0
