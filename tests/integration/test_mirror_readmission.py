"""Spec changes a user expects on the copy (issue 11 item 8): Kueue's re-admission pattern.

Suspend a running manager Job, rewrite its pod template's scheduling directives and a
label, resume: the copy's new pods carry the new template, and a label added to the
manager Job reaches the copy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, PODS, Obj
from tests.conftest import WORKER_1, wait_for
from tests.integration.mirror_env import make_job, mirror_env

pytestmark = pytest.mark.integration

NODE_SELECTOR = {"example.com/pool": "b"}
TOLERATIONS = [{"key": "example.com/pool", "operator": "Exists", "effect": "NoSchedule"}]


async def test_suspend_rewrite_resume_runs_the_new_template_on_the_copy(
    client_for: Callable[[ClusterSpec], Awaitable[ClusterClient]],
    cluster: Callable[[ClusterSpec], LocalCluster],
    ns: str,
) -> None:
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1,), resync_period=1.0) as env:
        w1 = env.workers["worker-1"]
        await env.start()
        await env.create(make_job("readmit", duration_ms=120_000))

        async def pods() -> list[Obj]:
            items, _ = await w1.list_all(PODS, ns, label_selector="batch.kubernetes.io/job-name=readmit")
            return items

        old_pods = await wait_for(pods, timeout=30, what="the copy's first pod")
        old_uids = {p["metadata"]["uid"] for p in old_pods}

        await env.manager.patch(JOBS, ns, "readmit", {"spec": {"suspend": True}})

        async def suspended_copy() -> bool:
            copy = await env.get("readmit", w1)
            return bool(copy and copy["spec"].get("suspend"))

        await wait_for(suspended_copy, timeout=30, what="the copy suspended")

        async def rewrite() -> bool:
            # The manager's API server allows it once the Job is suspended and has no startTime.
            try:
                await env.manager.patch(JOBS, ns, "readmit", {
                    "metadata": {"labels": {"team": "x"}},
                    "spec": {"template": {"metadata": {"labels": {"queue": "b"}},
                                          "spec": {"nodeSelector": NODE_SELECTOR, "tolerations": TOLERATIONS}}}})
            except ApiError as exc:
                if exc.status != 422:
                    raise
                return False
            return True

        await wait_for(rewrite, timeout=30, what="template rewritten on the suspended manager Job")
        await env.manager.patch(JOBS, ns, "readmit", {"spec": {"suspend": False}})

        async def new_pods() -> list[Obj]:
            return [p for p in await pods() if p["metadata"]["uid"] not in old_uids
                    and not p["metadata"].get("deletionTimestamp")]

        fresh = await wait_for(new_pods, timeout=60, what="the resumed copy's pods")
        for pod in fresh:
            assert pod["spec"].get("nodeSelector") == NODE_SELECTOR, pod["spec"]
            assert TOLERATIONS[0] in pod["spec"].get("tolerations", []), pod["spec"]
            assert pod["metadata"]["labels"].get("queue") == "b"
        copy = await env.get("readmit", w1)
        assert copy is not None and not copy["spec"].get("suspend")
        assert copy["metadata"]["labels"].get("team") == "x"
        assert copy["spec"]["template"]["spec"]["nodeSelector"] == NODE_SELECTOR
        reasons = [e["reason"] for e in await env.events("readmit")]
        assert "WorkerRefused" not in reasons, reasons
