"""Proof the ground is real: built binaries, JobManagedBy on, kcm behaviour, strict status validation."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from functools import partial

import pytest

from clusterbed import versions
from clusterbed.cluster import ClusterSpec
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, PODS, Obj
from testkit.jobs import make_job
from tests.conftest import MANAGER, WORKER_1, ensure_namespace, wait_for

pytestmark = pytest.mark.integration

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]


#: a plain Job of the builtin controller's (no kwok stage inputs): each test says what differs
job = partial(make_job, managed_by=None, backoff_limit=2, kwok=False, container_name="c")


async def test_binaries_are_stamped_and_job_managed_by_is_on(client_for: ClientFor) -> None:
    c = await client_for(MANAGER)
    v = await c.request("GET", "/version")
    assert v["gitVersion"] == f"v{versions.KUBE_VERSION}"
    resp = await c._send("GET", "/metrics")
    text = (await resp.read()).decode()
    resp.release()
    assert 'kubernetes_feature_enabled{name="JobManagedBy",stage=""} 1' in text


async def test_kcm_runs_a_plain_job_to_complete_on_kwok(client_for: ClientFor, ns: str) -> None:
    c = await client_for(WORKER_1)
    await ensure_namespace(c, ns)
    await c.create(JOBS, ns, job("plain", completions=2, parallelism=2))

    async def complete() -> Obj | None:
        j = await c.get(JOBS, ns, "plain")
        conds = {x["type"]: x["status"] for x in j.get("status", {}).get("conditions", [])}
        return j if conds.get("Complete") == "True" else None

    done = await wait_for(complete, timeout=90, what="Job plain Complete")
    assert done["status"]["succeeded"] == 2
    assert done["status"]["completionTime"]
    types = [x["type"] for x in done["status"]["conditions"]]
    assert types.index("SuccessCriteriaMet") < types.index("Complete")


async def test_kcm_leaves_a_foreign_managed_by_job_untouched(client_for: ClientFor, ns: str) -> None:
    c = await client_for(WORKER_1)
    await ensure_namespace(c, ns)
    await c.create(JOBS, ns, job("foreign", managed_by="jobmirror.dev/controller"))
    # A control Job in the same namespace proves the Job controller was active meanwhile.
    await c.create(JOBS, ns, job("control"))

    async def control_done() -> bool:
        j = await c.get(JOBS, ns, "control")
        return any(x["type"] == "Complete" for x in j.get("status", {}).get("conditions", []))

    await wait_for(control_done, timeout=90, what="control Job Complete")
    foreign = await c.get(JOBS, ns, "foreign")
    assert foreign.get("status", {}) == {}
    pods, _ = await c.list_all(PODS, ns, label_selector="batch.kubernetes.io/job-name=foreign")
    assert pods == []


async def test_manager_rejects_invalid_status_and_accepts_a_valid_sequence(client_for: ClientFor, ns: str) -> None:
    c = await client_for(MANAGER)
    await ensure_namespace(c, ns)
    created = await c.create(JOBS, ns, job("strict", managed_by="jobmirror.dev/controller"))

    async def put_status(status: Obj) -> Obj:
        cur = await c.get(JOBS, ns, "strict")
        body = copy.deepcopy(cur)
        body["status"] = status
        return await c.replace(JOBS, ns, "strict", body, subresource="status")

    t0, t1 = "2026-11-23T10:00:00Z", "2026-11-23T10:01:00Z"
    # completionTime without Complete
    with pytest.raises(ApiError) as e1:
        await put_status({"startTime": t0, "completionTime": t1})
    assert e1.value.invalid and "completionTime" in e1.value.message
    # Complete without SuccessCriteriaMet
    bad_complete = {
        "startTime": t0, "completionTime": t1, "succeeded": 1,
        "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": t1}],
    }
    with pytest.raises(ApiError) as e2:
        await put_status(bad_complete)
    assert e2.value.invalid and "SuccessCriteriaMet" in e2.value.message
    # Failed without FailureTarget
    with pytest.raises(ApiError) as e3:
        await put_status({"startTime": t0, "failed": 3, "conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": t1}]})
    assert e3.value.invalid

    # The valid sequence: running -> SuccessCriteriaMet -> Complete.
    await put_status({"startTime": t0, "active": 1, "ready": 1})
    scm = {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": t1}
    await put_status({"startTime": t0, "active": 0, "ready": 0, "succeeded": 1, "conditions": [scm]})
    final = await put_status({
        "startTime": t0, "completionTime": t1, "succeeded": 1, "active": 0, "ready": 0,
        "conditions": [scm, {**scm, "type": "Complete"}],
    })
    assert {x["type"] for x in final["status"]["conditions"]} == {"SuccessCriteriaMet", "Complete"}
    assert created["metadata"]["uid"] == final["metadata"]["uid"]
    # Terminal conditions are final: removing Complete is rejected.
    with pytest.raises(ApiError) as e4:
        await put_status({"startTime": t0, "completionTime": t1, "succeeded": 1, "conditions": [scm]})
    assert e4.value.invalid
