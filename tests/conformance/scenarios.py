"""The differential scenarios: same Job, same pod outcomes, on both Job controllers.

Every scenario is deterministic by construction: pod outcomes depend only on the pod's
completion index and attempt number (or creation order), and every scripted step waits
for a well-defined state first, so the upstream controller and ours see the same world.
``covers`` names the issue bullet each scenario proves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from builtin_controller import fields
from kruntime.resources import PODS
from tests.conformance.harness import (
    HANG,
    SUCCEED,
    Driver,
    Outcome,
    PodInfo,
    Scenario,
    always,
    fail,
    job_spec,
    succeed,
)

Step = Callable[[Driver], Awaitable[None]]


def by_ordinal(*outcomes: Outcome, rest: Outcome = SUCCEED) -> Callable[[PodInfo], Outcome]:
    """The n-th pod created gets ``outcomes[n]``; later ones get ``rest``."""
    return lambda i: outcomes[i.ordinal] if i.ordinal < len(outcomes) else rest


def by_index(table: dict[tuple[int, int] | int, Outcome], rest: Outcome = SUCCEED) -> Callable[[PodInfo], Outcome]:
    """Keyed by ``(index, attempt)`` or just ``index`` (any attempt)."""
    def pick(i: PodInfo) -> Outcome:
        ix = -1 if i.index is None else i.index
        if (ix, i.attempt) in table:
            return table[(ix, i.attempt)]
        return table.get(ix, rest)
    return pick


async def succeed_running(d: Driver) -> None:
    for p in d.running():
        await d.succeed_pod(p)


def rule(action: str, codes: list[int] | None = None, *, op: str = "In",
         conditions: list[tuple[str, str]] | None = None) -> dict[str, object]:
    r: dict[str, object] = {"action": action}
    if codes is not None:
        r["onExitCodes"] = {"operator": op, "values": codes}
    if conditions is not None:
        r["onPodConditions"] = [{"type": t, "status": s} for t, s in conditions]
    return r


def indexed(**kw: object) -> dict[str, object]:
    return job_spec(completionMode="Indexed", **kw)


# -- steps ------------------------------------------------------------------------------------

def scale_up_parallelism(d: Driver) -> Awaitable[None]:
    async def go() -> None:
        await d.wait_running(1)
        await d.patch_job({"spec": {"parallelism": 3}})
        await d.wait_running(3)
        await succeed_running(d)
    return go()


def scale_down_parallelism(d: Driver) -> Awaitable[None]:
    async def go() -> None:
        await d.wait_running(3)
        await d.patch_job({"spec": {"parallelism": 1}})
        await d.wait_running(1)
        await d.wait_settled(1.0)
        await succeed_running(d)
    return go()


def elastic_down(d: Driver) -> Awaitable[None]:
    async def go() -> None:
        await d.wait_running(4)
        await d.patch_job({"spec": {"completions": 2, "parallelism": 2}})
        await d.wait_running(2)
        await d.wait_settled(1.0)
        await succeed_running(d)
    return go()


def elastic_up(d: Driver) -> Awaitable[None]:
    async def go() -> None:
        await d.wait_running(2)
        await d.patch_job({"spec": {"completions": 4, "parallelism": 4}})
        await d.wait(lambda: len(d.seen) == 4, what="two more indexes")
        await succeed_running(d)
    return go()


async def _create_orphan(d: Driver) -> None:
    labels = {"app": "adoptee", "batch.kubernetes.io/job-name": d.job_name}
    await d.client.create(PODS, d.ns, {"apiVersion": "v1", "kind": "Pod",
                                       "metadata": {"name": "orphan", "labels": labels},
                                       "spec": {"restartPolicy": "Never",
                                                "containers": [{"name": "main", "image": "busybox"}]}})
    await d.wait(lambda: any(fields.phase(p) == "Running" for p in d.pods()), what="orphan running")


def adopt_spec() -> dict[str, object]:
    spec = job_spec(manualSelector=True, selector={"matchLabels": {"app": "adoptee"}})
    spec["template"]["metadata"] = {"labels": {"app": "adoptee", "batch.kubernetes.io/job-name": "job"}}
    return spec


def release_pod(d: Driver) -> Awaitable[None]:
    async def go() -> None:
        [p] = await d.wait_running(1)
        await d.client.patch(PODS, d.ns, fields.name(p), {"metadata": {"labels": {"app": "someone-else"}}})
    return go()


def delete_running_pod(d: Driver) -> Awaitable[None]:
    async def go() -> None:
        [p] = await d.wait_running(1)
        await d.delete_pod(p)
    return go()


def delete_index_zero(d: Driver) -> Awaitable[None]:
    async def go() -> None:
        await d.wait(lambda: len(d.running(0)) == 1 and (d.job or {}).get("status", {}).get("succeeded") == 1,
                     what="index 0 running, index 1 done")
        await d.delete_pod(d.running(0)[0])
    return go()


def delete_job(propagation: str) -> Step:
    def step(d: Driver) -> Awaitable[None]:
        async def go() -> None:
            await d.wait_running(2)
            await d.delete_job(propagation)
        return go()
    return step


def delete_job_foreground(d: Driver) -> Awaitable[None]:
    async def go() -> None:
        await d.wait(lambda: len(d.running()) == 2 and (d.job or {}).get("status", {}).get("succeeded") == 1,
                     what="one done, two running")
        await d.delete_job("Foreground")
    return go()


def resume_after_suspended(wait: float = 0.0) -> Step:
    def step(d: Driver) -> Awaitable[None]:
        async def go() -> None:
            await d.wait_condition("Suspended")
            await d.wait_settled(1.0)
            await asyncio.sleep(wait)
            await d.patch_job({"spec": {"suspend": False}})
        return go()
    return step


def suspend_running_then_resume(n: int) -> Step:
    def step(d: Driver) -> Awaitable[None]:
        async def go() -> None:
            await d.wait_running(n)
            await d.patch_job({"spec": {"suspend": True}})
            await d.wait_condition("Suspended")
            await d.wait(lambda: not d.active(), what="pods deleted on suspend")
            await d.wait_settled(1.0)
            await d.patch_job({"spec": {"suspend": False}})
        return go()
    return step


def suspend_running(n: int) -> Step:
    """Run, suspend, and stay suspended (from 1.36 the controller clears startTime)."""
    def step(d: Driver) -> Awaitable[None]:
        async def go() -> None:
            await d.wait_running(n)
            await d.patch_job({"spec": {"suspend": True}})
            await d.wait_condition("Suspended")
            await d.wait(lambda: not d.active(), what="pods deleted on suspend")
        return go()
    return step


def suspend_indexed_partial(d: Driver) -> Awaitable[None]:
    async def go() -> None:
        await d.wait(lambda: (d.job or {}).get("status", {}).get("succeeded") == 1 and len(d.running()) == 2,
                     what="index 0 done, 1 and 2 running")
        await d.wait_settled(1.0)
        await d.patch_job({"spec": {"suspend": True}})
        await d.wait_condition("Suspended")
        await d.wait(lambda: not d.active(), what="pods deleted on suspend")
        await d.wait_settled(1.0)
        await d.patch_job({"spec": {"suspend": False}})
    return go()


def suspend_past_deadline_then_resume(d: Driver) -> Awaitable[None]:
    """Run, suspend for longer than the deadline, resume: the deadline clock restarts."""
    async def go() -> None:
        await d.wait_running(1)
        await d.patch_job({"spec": {"suspend": True}})
        await d.wait_condition("Suspended")
        await d.wait(lambda: not d.active(), what="pods deleted on suspend")
        await asyncio.sleep(9)
        await d.patch_job({"spec": {"suspend": False}})
    return go()


def started(d: Driver) -> bool:
    return "startTime" in ((d.job or {}).get("status") or {})


def suspended(d: Driver) -> bool:
    return d.cond("Suspended") == "True"


def suspended_and_drained(d: Driver) -> bool:
    """Suspended, every pod gone and the status saying so (under load kcm 1.35 may take more
    than the 3 s of quiet to write ``terminating: 0`` after the last pod left)."""
    st = (d.job or {}).get("status") or {}
    return suspended(d) and not d.pods() and not st.get("active") and not st.get("terminating")


def shorten_deadline(d: Driver) -> Awaitable[None]:
    async def go() -> None:
        await d.wait_running(1)
        await asyncio.sleep(2.5)
        await d.patch_job({"spec": {"activeDeadlineSeconds": 2}})
    return go()


def terminal_waits_for_terminating(d: Driver) -> Awaitable[None]:
    """The sibling sits on a node no kubelet serves: after the controller deletes it, it stays
    terminating (graceful deletion) until force-deleted; Failed must wait for that."""
    async def go() -> None:
        await d.wait_condition("FailureTarget")
        await d.wait(lambda: (d.job or {}).get("status", {}).get("terminating") == 1, what="terminating=1")
        await asyncio.sleep(2)
        assert d.cond("Failed") is None, "Failed while a pod is still terminating"
        for p in d.pods():
            if fields.deletion_timestamp(p) is not None:
                await d.client.request("DELETE", PODS.path(d.ns, fields.name(p)),
                                       body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    return go()


def with_node(spec: dict[str, object], node: str = "ghost-node") -> dict[str, object]:
    spec["template"]["spec"]["nodeName"] = node  # type: ignore[index]
    return spec


def on_failure(spec: dict[str, object]) -> dict[str, object]:
    spec["template"]["spec"]["restartPolicy"] = "OnFailure"  # type: ignore[index]
    return spec


def with_subdomain(spec: dict[str, object]) -> dict[str, object]:
    spec["template"]["spec"]["subdomain"] = "workers"  # type: ignore[index]
    return spec


FAILJOB_42 = {"rules": [rule("FailJob", [42])]}

SCENARIOS: list[Scenario] = [
    # -- managedBy (KEP-4368) ---------------------------------------------------------------
    Scenario("managed-by-foreign-is-left-alone", job_spec(managedBy="example.com/mirror"), end="settled", quiet=4,
             covers="managedBy"),
    Scenario("managed-by-job-controller-value", job_spec(managedBy="kubernetes.io/job-controller", completions=2,
                                                         parallelism=2), covers="managedBy"),
    # -- NonIndexed, completions, parallelism ----------------------------------------------
    Scenario("nonindexed-single-pod", job_spec(), covers="NonIndexed"),
    Scenario("nonindexed-3-completions-2-parallel", job_spec(completions=3, parallelism=2), covers="NonIndexed"),
    Scenario("nonindexed-parallelism-above-completions", job_spec(completions=2, parallelism=5),
             covers="parallelism"),
    Scenario("workqueue-all-succeed", job_spec(completions=None, parallelism=3),
             outcome=by_ordinal(succeed(0.3), succeed(2.5), succeed(2.5)), covers="completions nil"),
    Scenario("workqueue-failure-then-success", job_spec(completions=None, parallelism=2),
             outcome=by_ordinal(fail(1, delay=0.3), succeed(3.0)), covers="completions nil"),
    Scenario("parallelism-zero", job_spec(completions=2, parallelism=0), end="settled", settled_when=started,
             covers="parallelism"),
    Scenario("completions-zero", job_spec(completions=0, parallelism=1), covers="completions"),
    Scenario("completions-zero-while-suspended", job_spec(completions=0, parallelism=1, suspend=True),
             covers="completions"),
    Scenario("nonindexed-failures-within-limit", job_spec(completions=3, parallelism=3, backoffLimit=3),
             outcome=by_ordinal(SUCCEED, fail(1), SUCCEED), covers="backoffLimit"),
    Scenario("scale-up-parallelism", job_spec(completions=4, parallelism=1),
             outcome=by_ordinal(HANG, HANG, HANG), steps=scale_up_parallelism, covers="parallelism"),
    Scenario("scale-down-parallelism", job_spec(completions=4, parallelism=3),
             outcome=by_ordinal(HANG, HANG, HANG), steps=scale_down_parallelism, covers="parallelism scale down"),
    Scenario("many-pods-tracked", job_spec(completions=20, parallelism=20), covers="tracking"),
    # -- Indexed ------------------------------------------------------------------------------
    Scenario("indexed-basic", with_subdomain(indexed(completions=3, parallelism=3)), covers="Indexed pods"),
    Scenario("indexed-sequential", indexed(completions=4, parallelism=1), covers="Indexed"),
    Scenario("indexed-retry-one-index", indexed(completions=3, parallelism=3, backoffLimit=3),
             outcome=by_index({(1, 0): fail(1)}), covers="Indexed + backoffLimit"),
    Scenario("elastic-indexed-scale-down", indexed(completions=4, parallelism=4),
             outcome=always(HANG), steps=elastic_down, covers="elastic Indexed"),
    Scenario("elastic-indexed-scale-up", indexed(completions=2, parallelism=2),
             outcome=by_ordinal(HANG, HANG), steps=elastic_up, covers="elastic Indexed"),
    Scenario("indexed-deleted-pod-replaced-in-its-index", indexed(completions=2, parallelism=2, backoffLimit=2),
             outcome=by_index({(0, 0): HANG, (1, 0): succeed(0.3)}), steps=delete_index_zero,
             covers="Indexed + deleted pods"),
    # -- adoption / release --------------------------------------------------------------
    Scenario("adopts-matching-orphan", adopt_spec(), before=_create_orphan,
             outcome=by_ordinal(succeed(3.0)), covers="adoption"),
    Scenario("releases-non-matching-pod", adopt_spec(), outcome=by_ordinal(HANG), steps=release_pod,
             covers="release"),
    # -- tracking with finalizers (KEP-2307) --------------------------------------------------
    Scenario("deleted-pod-counts-as-failed", job_spec(backoffLimit=2), outcome=by_ordinal(HANG),
             steps=delete_running_pod, covers="deleted pods counted as failed"),
    Scenario("job-deleted-background", job_spec(completions=2, parallelism=2), outcome=always(HANG),
             steps=delete_job("Background"), end="deleted", covers="finalizers removed on Job deletion"),
    Scenario("job-deleted-foreground", job_spec(completions=3, parallelism=3), outcome=by_ordinal(SUCCEED, HANG, HANG),
             steps=delete_job_foreground, end="deleted", covers="finalizers removed on Job deletion"),
    Scenario("job-deleted-orphan", job_spec(completions=2, parallelism=2), outcome=always(HANG),
             steps=delete_job("Orphan"), end="deleted", covers="finalizers removed on Job deletion"),
    # -- suspend / resume (KEP-2322) --------------------------------------------------------
    Scenario("created-suspended", job_spec(suspend=True), end="settled", settled_when=suspended, covers="suspend"),
    Scenario("created-suspended-then-resumed", job_spec(suspend=True, completions=2, parallelism=2),
             steps=resume_after_suspended(), covers="resume"),
    Scenario("suspend-running-then-resume", job_spec(completions=2, parallelism=2),
             outcome=by_ordinal(HANG, HANG), steps=suspend_running_then_resume(2), covers="suspend deletes pods"),
    Scenario("suspend-running-stays-suspended", job_spec(completions=2, parallelism=2),
             outcome=by_ordinal(HANG, HANG), steps=suspend_running(2), end="settled",
             settled_when=suspended_and_drained, covers="suspend clears startTime (1.36+)"),
    Scenario("suspended-time-does-not-count-for-deadline", job_spec(activeDeadlineSeconds=8),
             outcome=by_ordinal(HANG), steps=suspend_past_deadline_then_resume,
             covers="activeDeadlineSeconds timer reset"),
    Scenario("suspend-indexed-partially-done", indexed(completions=3, parallelism=3),
             outcome=by_index({(1, 0): HANG, (2, 0): HANG}), steps=suspend_indexed_partial,
             covers="suspend Indexed"),
    # -- backoffLimit -----------------------------------------------------------------------
    Scenario("backoff-limit-exceeded", job_spec(backoffLimit=1), outcome=always(fail(1, delay=0.2)),
             covers="backoffLimit + exponential delay"),
    Scenario("backoff-limit-zero", job_spec(backoffLimit=0), outcome=always(fail(1)), covers="backoffLimit"),
    Scenario("backoff-limit-parallel-pods", job_spec(completions=4, parallelism=2, backoffLimit=2),
             outcome=by_ordinal(fail(1, delay=0.3), fail(1, delay=2.0), fail(1, delay=0.3), HANG),
             covers="backoffLimit"),
    Scenario("restart-on-failure-counts-restarts", on_failure(job_spec(backoffLimit=2)),
             outcome=always(Outcome("restarts", restarts=2)), covers="backoffLimit OnFailure"),
    # -- backoffLimitPerIndex / maxFailedIndexes -----------------------------------------------
    Scenario("per-index-failed-indexes", indexed(completions=3, parallelism=3, backoffLimitPerIndex=1,
                                                 backoffLimit=None),
             outcome=by_index({1: fail(1, delay=0.2)}), covers="backoffLimitPerIndex"),
    Scenario("per-index-max-failed-indexes", indexed(completions=4, parallelism=4, backoffLimitPerIndex=0,
                                                     maxFailedIndexes=1, backoffLimit=None),
             outcome=by_index({0: fail(1), 1: fail(1)}, rest=HANG), covers="maxFailedIndexes"),
    Scenario("per-index-retry-then-succeed", indexed(completions=2, parallelism=2, backoffLimitPerIndex=1,
                                                     backoffLimit=None),
             outcome=by_index({(0, 0): fail(1)}), covers="backoffLimitPerIndex"),
    Scenario("per-index-fail-index-rule", indexed(completions=3, parallelism=3, backoffLimitPerIndex=2,
                                                  backoffLimit=None,
                                                  podFailurePolicy={"rules": [rule("FailIndex", [42])]}),
             outcome=by_index({0: fail(42)}), covers="podFailurePolicy FailIndex"),
    Scenario("per-index-ignore-rule", indexed(completions=2, parallelism=2, backoffLimitPerIndex=0,
                                              backoffLimit=None, podFailurePolicy={"rules": [rule("Ignore", [7])]}),
             outcome=by_index({(1, 0): fail(7)}), covers="podFailurePolicy Ignore per index"),
    # -- podFailurePolicy ---------------------------------------------------------------------
    Scenario("pfp-fail-job-on-exit-code", job_spec(podFailurePolicy=FAILJOB_42), outcome=always(fail(42)),
             covers="podFailurePolicy FailJob"),
    Scenario("pfp-fail-job-deletes-running-sibling", job_spec(completions=2, parallelism=2,
                                                              podFailurePolicy=FAILJOB_42),
             outcome=by_ordinal(fail(42), HANG), covers="podFailurePolicy FailJob"),
    Scenario("pfp-ignore-disruption", job_spec(podFailurePolicy={"rules": [
        rule("Ignore", conditions=[("DisruptionTarget", "True")])]}),
             outcome=by_ordinal(fail(137, ("DisruptionTarget", "True"))), covers="podFailurePolicy Ignore"),
    Scenario("pfp-count-rule", job_spec(backoffLimit=0, podFailurePolicy={"rules": [rule("Count", [5])]}),
             outcome=always(fail(5)), covers="podFailurePolicy Count"),
    Scenario("pfp-fail-job-on-pod-condition", job_spec(podFailurePolicy={"rules": [
        rule("FailJob", conditions=[("ConfigIssue", "True")])]}),
             outcome=always(fail(1, ("ConfigIssue", "True"))), covers="podFailurePolicy on conditions"),
    Scenario("pfp-no-match-counts", job_spec(backoffLimit=0, podFailurePolicy=FAILJOB_42),
             outcome=always(fail(1)), covers="podFailurePolicy"),
    Scenario("pfp-not-in-operator", job_spec(podFailurePolicy={"rules": [rule("FailJob", [0, 1], op="NotIn")]}),
             outcome=by_ordinal(fail(1), fail(3)), covers="podFailurePolicy NotIn"),
    # -- podReplacementPolicy --------------------------------------------------------------
    Scenario("replacement-policy-failed", job_spec(backoffLimit=2, podReplacementPolicy="Failed"),
             outcome=by_ordinal(HANG), steps=delete_running_pod, on_delete="fail", covers="podReplacementPolicy"),
    Scenario("replacement-policy-terminating-or-failed", job_spec(backoffLimit=2,
                                                                  podReplacementPolicy="TerminatingOrFailed"),
             outcome=by_ordinal(HANG), steps=delete_running_pod, covers="podReplacementPolicy"),
    # -- activeDeadlineSeconds ------------------------------------------------------------------
    Scenario("deadline-exceeded", job_spec(activeDeadlineSeconds=3), outcome=always(HANG),
             covers="activeDeadlineSeconds"),
    Scenario("deadline-shortened-while-running", job_spec(activeDeadlineSeconds=300), outcome=always(HANG),
             steps=shorten_deadline, covers="activeDeadlineSeconds update"),
    # -- successPolicy (KEP-3998) ----------------------------------------------------------
    Scenario("success-policy-indexes", indexed(completions=5, parallelism=5,
                                               successPolicy={"rules": [{"succeededIndexes": "0,1"}]}),
             outcome=by_index({0: SUCCEED, 1: SUCCEED}, rest=HANG), covers="successPolicy"),
    Scenario("success-policy-count", indexed(completions=4, parallelism=4,
                                             successPolicy={"rules": [{"succeededCount": 2}]}),
             outcome=by_index({2: SUCCEED, 3: SUCCEED}, rest=HANG), covers="successPolicy"),
    Scenario("success-policy-indexes-with-count", indexed(completions=6, parallelism=6, successPolicy={
        "rules": [{"succeededIndexes": "0-3", "succeededCount": 2}]}),
             outcome=by_index({1: SUCCEED, 5: SUCCEED, 3: succeed(1.5)}, rest=HANG), covers="successPolicy"),
    Scenario("success-policy-with-a-failed-index", indexed(
        completions=3, parallelism=3, backoffLimitPerIndex=0, backoffLimit=None,
        successPolicy={"rules": [{"succeededIndexes": "0"}]}),
             outcome=by_index({0: succeed(2.0), 1: fail(1, delay=0.3)}, rest=HANG),
             covers="successPolicy + backoffLimitPerIndex"),
    # -- terminal conditions wait for terminating pods ------------------------------------------
    Scenario("terminal-condition-waits-for-terminating-pod",
             with_node(job_spec(completions=2, parallelism=2, podFailurePolicy=FAILJOB_42)),
             outcome=by_ordinal(fail(42), HANG), steps=terminal_waits_for_terminating,
             covers="terminal only without terminating pods"),
]

BY_NAME = {s.name: s for s in SCENARIOS}
assert len(BY_NAME) == len(SCENARIOS), "duplicate scenario names"
