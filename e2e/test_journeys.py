"""User journeys, end to end: a Job submitted to the manager runs in a worker and looks local.

The controller runs with its ServiceAccount identity (manager) and the jobmirror-worker
identity (workers); pods are run by kwok (local) or by real kubelets (kind).
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from e2e.harness import (
    POD_RES,
    E2EEnv,
    condition_true,
    conditions,
    job_manifest,
    remote_copies,
)
from e2e.steps import (
    assert_sanitized_copy,
    cleanup,
    is_gone,
    namespace,
    pin_round_robin,
    placed,
    wait_condition,
    wait_no_copies,
)
from jobapi.intervals import Intervals
from kruntime.resources import EVENTS, JOBS, Obj
from testkit.waiting import wait_for

pytestmark = pytest.mark.e2e


def _order(job: Obj) -> list[str]:
    return [c["type"] for c in job["status"].get("conditions", [])]


async def test_journey_plain_job_completes(controller: E2EEnv) -> None:
    """plain Job → dispatched, runs in a worker, Complete on the manager with counters"""
    env = controller
    ns = await namespace(env, "plain")
    created = await env.manager.create(JOBS, ns, job_manifest("plain", image=env.pod_image, seconds=3,
                                                                completions=2, parallelism=2))
    uid = created["metadata"]["uid"]
    job, worker, copy = await placed(env, ns, "plain", uid)
    assert_sanitized_copy(env, job, worker, copy)

    done = await wait_condition(env, ns, "plain", "Complete")
    st = done["status"]
    assert st.get("succeeded") == 2 and not st.get("failed") and not st.get("active"), st
    assert st.get("startTime") and st.get("completionTime"), st
    assert st["completionTime"] >= st["startTime"]
    order = _order(done)
    assert order.index("SuccessCriteriaMet") < order.index("Complete"), order
    assert not condition_true(done, "Failed")
    # Finished: the copy is deleted (keepFinishedRemote: false) and the Job keeps its final status.
    await wait_no_copies(env, ns, uid)
    after = await env.manager.get(JOBS, ns, "plain")
    assert after["status"]["succeeded"] == 2 and condition_true(after, "Complete")
    # The normal path writes no Event on the manager Job (issue 23: the placement annotations say
    # where and why, the conditions say how it ended); nothing else writes Events for a Job kcm skips.
    items, _ = await env.manager.list_all(EVENTS, ns, field_selector=f"involvedObject.uid={uid}")
    assert not [e for e in items if e["reason"] in ("Dispatched", "RemoteDeleted")], items
    assert after["metadata"]["annotations"].get("jobmirror.dev/cluster") and \
        after["metadata"]["annotations"].get("jobmirror.dev/placement-reason"), after["metadata"]
    await cleanup(env, ns)


async def test_journey_indexed_job_with_success_policy(controller: E2EEnv) -> None:
    """Indexed Job with successPolicy → SuccessCriteriaMet (SuccessPolicy) + Complete"""
    env = controller
    ns = await namespace(env, "indexed")
    policy = {"rules": [{"succeededIndexes": "0-1"}]}
    pin = pin_round_robin(env, 1)
    created = await env.manager.create(JOBS, ns, job_manifest("indexed", image=env.pod_image, seconds=2, completions=4,
                                                                parallelism=2, indexed=True, success_policy=policy,
                                                                pin=pin))
    uid = created["metadata"]["uid"]
    job, worker, copy = await placed(env, ns, "indexed", uid, pin=pin)
    assert_sanitized_copy(env, job, worker, copy)
    assert copy["spec"]["successPolicy"] == policy and copy["spec"]["completionMode"] == "Indexed"

    done = await wait_condition(env, ns, "indexed", "Complete")
    conds = conditions(done)
    assert conds["SuccessCriteriaMet"]["status"] == "True"
    assert conds["SuccessCriteriaMet"]["reason"] == "SuccessPolicy", conds["SuccessCriteriaMet"]
    assert _order(done).index("SuccessCriteriaMet") < _order(done).index("Complete")
    st = done["status"]
    assert {0, 1} <= set(Intervals.parse_lenient(st.get("completedIndexes", "")).indexes()), st
    assert st.get("succeeded", 0) >= 2 and st.get("completionTime"), st
    assert not condition_true(done, "Failed")
    await wait_no_copies(env, ns, uid)
    await cleanup(env, ns)


async def test_journey_failing_job_fails(controller: E2EEnv) -> None:
    """failing Job (backoffLimit 1, pods fail) → FailureTarget then Failed on the manager"""
    env = controller
    ns = await namespace(env, "failing")
    pin = pin_round_robin(env, 0)
    created = await env.manager.create(JOBS, ns, job_manifest("failing", image=env.pod_image, outcome="fail",
                                                                completions=2, parallelism=2, backoff_limit=1, pin=pin))
    uid = created["metadata"]["uid"]
    await placed(env, ns, "failing", uid, pin=pin)

    done = await wait_condition(env, ns, "failing", "Failed")
    conds = conditions(done)
    assert conds["FailureTarget"]["status"] == "True", conds
    assert conds["FailureTarget"]["reason"] == "BackoffLimitExceeded", conds["FailureTarget"]
    assert conds["Failed"]["reason"] == "BackoffLimitExceeded", conds["Failed"]
    assert _order(done).index("FailureTarget") < _order(done).index("Failed")
    st = done["status"]
    assert st.get("failed", 0) >= 2 and not st.get("succeeded") and not st.get("active"), st
    assert not st.get("completionTime") and not condition_true(done, "Complete"), st
    await wait_no_copies(env, ns, uid)
    await cleanup(env, ns)


async def test_journey_suspended_then_resumed(controller: E2EEnv) -> None:
    """suspended at creation → Suspended=True and no copy anywhere; resume → dispatched and Complete"""
    env = controller
    ns = await namespace(env, "suspend")
    pin = pin_round_robin(env, 1)
    created = await env.manager.create(JOBS, ns, job_manifest("suspended", image=env.pod_image, suspend=True, pin=pin))
    uid = created["metadata"]["uid"]
    await wait_condition(env, ns, "suspended", "Suspended", timeout=45)
    # Give the controller time to do the wrong thing: still no copy in any worker.
    t_end = time.monotonic() + 3
    while time.monotonic() < t_end:
        copies = await remote_copies(env, ns, uid)
        assert not copies, f"a suspended Job was dispatched: {[(w, c['metadata']['name']) for w, c in copies]}"
        await asyncio.sleep(0.3)
    job = await env.manager.get(JOBS, ns, "suspended")
    assert not job["status"].get("startTime"), job["status"]

    await env.manager.patch(JOBS, ns, "suspended", {"spec": {"suspend": False}})
    _, _, copy = await placed(env, ns, "suspended", uid, pin=pin)
    assert not copy["spec"].get("suspend"), copy["spec"]
    done = await wait_condition(env, ns, "suspended", "Complete")
    assert done["status"].get("succeeded") == 1, done["status"]
    assert not condition_true(done, "Suspended"), conditions(done).get("Suspended")
    await wait_no_copies(env, ns, uid)
    await cleanup(env, ns)


async def test_journey_delete_running_job(controller: E2EEnv) -> None:
    """delete a running manager Job → its copy and the copy's pods are gone from the worker, then the Job"""
    env = controller
    ns = await namespace(env, "delete")
    pin = pin_round_robin(env, 0)
    created = await env.manager.create(JOBS, ns, job_manifest("running", image=env.pod_image, outcome="hang", pin=pin))
    uid = created["metadata"]["uid"]
    _, worker, copy = await placed(env, ns, "running", uid, pin=pin)
    wclient = env.workers[worker]
    cname = copy["metadata"]["name"]

    async def running() -> Obj | None:
        c = await wclient.get(JOBS, ns, cname)
        m = await env.manager.get(JOBS, ns, "running")
        return m if (c.get("status") or {}).get("active") and (m.get("status") or {}).get("active") else None

    await wait_for(running, timeout=60, what="the copy running and active mirrored to the manager")
    copy_uid = (await wclient.get(JOBS, ns, cname))["metadata"]["uid"]

    await env.manager.delete(JOBS, ns, "running", propagation="Background")
    await wait_for(lambda: is_gone(env, ns, "running"), timeout=60, what="the manager Job to be deleted")
    # The finalizer held the manager Job until its copy was deleted.
    leftover = [(w, c["metadata"]["name"]) for w, c in await remote_copies(env, ns, uid)
                if not c["metadata"].get("deletionTimestamp")]
    assert not leftover, f"manager Job gone but copies remain: {leftover}"
    await wait_no_copies(env, ns, uid)

    async def pods_gone() -> bool:
        items, _ = await wclient.list_all(POD_RES, ns, label_selector=f"batch.kubernetes.io/controller-uid={copy_uid}")
        return not items

    # Background propagation: the worker's garbage collector removes the pods (no orphans).
    await wait_for(pods_gone, timeout=60, what=f"the copy's pods in {worker} to be deleted")
    await cleanup(env, ns)


def _api_counts(metrics_text: str) -> dict[tuple[str, str, str], float]:
    """``jobmirror_runtime_api_requests_total`` samples by (cluster, verb, code)."""
    out: dict[tuple[str, str, str], float] = {}
    for ln in metrics_text.splitlines():
        m = re.match(r'jobmirror_runtime_api_requests_total\{(.*)\} (\S+)$', ln)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            out[(labels["cluster"], labels["verb"], labels["code"])] = float(m.group(2))
    return out


async def test_controller_needed_no_more_than_its_rbac(controller: E2EEnv) -> None:
    """controller: a whole Job life (dispatch, status, finalizer, copy delete, events) needs no
    request that is Unauthorized/Forbidden (logs + metrics: RBAC sufficient), and it is still up"""
    env = controller
    # Its own Job life, so the check covers every kind of write whatever order the tests run in.
    before = {src: _api_counts(text) for src, text in (await env.controller_metrics()).items()}
    logged_before = set(env.controller_log().splitlines())
    ns = await namespace(env, "rbac")
    created = await env.manager.create(JOBS, ns, job_manifest("rbac", image=env.pod_image, seconds=1))
    uid = created["metadata"]["uid"]
    await placed(env, ns, "rbac", uid)
    await wait_condition(env, ns, "rbac", "Complete")
    await wait_no_copies(env, ns, uid)
    await env.manager.delete(JOBS, ns, "rbac", propagation="Background")
    await wait_for(lambda: is_gone(env, ns, "rbac"), timeout=60, what="the manager Job to be deleted")

    if env.controller is not None:
        assert env.controller.proc.poll() is None, f"controller exited:\n{env.controller.tail()}"
    # Only this Job's life counts: an earlier test's namespace deletion may still be answering
    # the controller's last Event for it with 403 NamespaceTerminating, which is not RBAC.
    logged = [ln for ln in env.controller_log().splitlines() if ln not in logged_before]
    bad = [ln for ln in logged if re.search(r"forbidden", ln, re.IGNORECASE)]
    terminating = sum("its namespace is being deleted" in ln for ln in logged)
    # Also what is not logged: every API answer is counted by cluster, verb and HTTP code.
    grew: set[tuple[str, str]] = set()
    denied = 0.0
    for source, metrics in (await env.controller_metrics()).items():
        for (cluster, verb, code), n in _api_counts(metrics).items():
            added = n - before.get(source, {}).get((cluster, verb, code), 0.0)
            if added > 0:
                grew.add((verb, code[0]))
                if code in ("401", "403"):
                    denied += added
                    bad.append(f"{source}: {cluster} {verb} {code} +{added:g} during this Job's life")
    if denied and denied <= terminating and not [ln for ln in bad if " during this Job's life" not in ln]:
        bad = []  # every refusal was an Event into a namespace being deleted, logged as such
    assert not bad, "the controller hit authentication/authorization errors:\n" + "\n".join(bad[:30])
    # Not vacuous: this Job's life made the controller create, patch/update and delete successfully.
    for verb in ("POST", "DELETE"):
        assert (verb, "2") in grew, f"no successful {verb} counted during the Job's life: {sorted(grew)}"
    assert {("PATCH", "2"), ("PUT", "2")} & grew, f"no successful PATCH/PUT counted: {sorted(grew)}"
    await cleanup(env, ns)
