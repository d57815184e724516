"""Status computation: counters, the finished-condition decision, conditions, tracking plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from builtin_controller import fields, semantics, status, tracking
from jobapi.intervals import Intervals
from testkit.jobs import make_job

NOW = datetime(2026, 11, 23, 10, 0, 0, tzinfo=UTC)
T = fields.format_time(NOW)
#: the semantics of the differential suite's oracle
SEM = semantics.semantics_for(semantics.NEWEST_KNOWN)


Conds = tuple[tuple[str, str, str], ...] | list[tuple[str, str, str]]


def mkjob(conditions: Conds = (), st: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    job = make_job("j", namespace="ns", managed_by=None, kwok=False, container_name="c", image=None, extra_spec=spec)
    job["metadata"]["uid"] = "juid"
    s: dict[str, Any] = {"startTime": fields.format_time(NOW - timedelta(seconds=30))}
    s.update(st or {})
    if conditions:
        s["conditions"] = [{"type": t, "status": v, "reason": r, "message": "m", "lastTransitionTime": T}
                           for t, v, r in conditions]
    return {**job, "status": s}


def mkpod(uid: str, phase: str = "Running", *, index: int | None = None, finalizer: bool = True, deleted: bool = False,
          code: int = 1, conditions: tuple[tuple[str, str], ...] = (), ready: bool = False,
          failures: int | None = None) -> dict[str, Any]:
    ann = {} if index is None else {fields.COMPLETION_INDEX_KEY: str(index)}
    if failures is not None:
        ann[fields.INDEX_FAILURE_COUNT_KEY] = str(failures)
    md: dict[str, Any] = {"name": f"p-{uid}", "namespace": "ns", "uid": uid, "annotations": ann,
                          "finalizers": [fields.JOB_TRACKING_FINALIZER] if finalizer else [],
                          "creationTimestamp": T}
    if deleted:
        md["deletionTimestamp"] = T
    cs: dict[str, Any] = {"name": "c", "state": {}}
    if phase in ("Failed", "Succeeded"):
        cs["state"] = {"terminated": {"exitCode": 0 if phase == "Succeeded" else code, "finishedAt": T}}
    conds = [{"type": t, "status": s} for t, s in conditions]
    conds.append({"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": T})
    return {"metadata": md, "spec": {}, "status": {"phase": phase, "containerStatuses": [cs], "conditions": conds}}


def ctx_for(job: dict[str, Any], pods: list[dict[str, Any]], expected: frozenset[str] = frozenset()
            ) -> status.SyncContext:
    return status.new_context(job, "ns/j", pods, expected, SEM)


# -- counters ---------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("st", "pods", "policy", "want"),
    [
        ({}, [], None, (0, 0, 0, 0, 0)),
        ({"succeeded": 2, "failed": 1}, [], None, (2, 1, 0, 0, 0)),
        ({}, [mkpod("a"), mkpod("b", ready=True)], None, (0, 0, 2, 1, 0)),
        ({}, [mkpod("a", "Succeeded"), mkpod("b", "Failed")], None, (1, 1, 0, 0, 0)),
        ({}, [mkpod("a", "Succeeded", finalizer=False)], None, (0, 0, 0, 0, 0)),  # already counted
        ({"uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["x"]}}, [mkpod("a", "Succeeded")], None,
         (1, 1, 0, 0, 0)),  # uncounted UIDs count once
        ({}, [mkpod("a", deleted=True)], None, (0, 1, 0, 0, 1)),  # deleted before finishing: failed, terminating
        ({}, [mkpod("a", "Failed", code=3)], {"rules": [{"action": "Ignore", "onExitCodes": {
            "operator": "In", "values": [3]}}]}, (0, 0, 0, 0, 0)),  # ignored failure
        ({}, [mkpod("a", deleted=True)], {"rules": []}, (0, 0, 0, 0, 1)),  # with a policy: wait for Failed
    ],
)
def test_new_context_counters(st: dict[str, Any], pods: list[dict[str, Any]], policy: dict[str, Any] | None,
                              want: tuple[int, int, int, int, int]) -> None:
    job = mkjob(st=st)
    if policy is not None:
        job["spec"]["podFailurePolicy"] = policy
    ctx = ctx_for(job, pods)
    assert (ctx.succeeded, ctx.failed, len(ctx.active_pods), ctx.ready, ctx.terminating) == want


def test_new_context_skips_expected_finalizer_removals() -> None:
    ctx = ctx_for(mkjob(), [mkpod("a", "Succeeded"), mkpod("b", "Failed")], frozenset({"a", "b"}))
    assert (ctx.succeeded, ctx.failed) == (0, 0)


# -- the finished-condition decision ----------------------------------------------------------

FAILJOB_42 = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}


@pytest.mark.parametrize(
    ("job", "pods", "want"),
    [
        pytest.param(mkjob(), [mkpod("a")], None, id="running"),
        pytest.param(mkjob([("SuccessCriteriaMet", "True", "SuccessPolicy")]), [], ("SuccessCriteriaMet",
                     "SuccessPolicy"), id="existing-scm-stands"),
        pytest.param(mkjob([("SuccessCriteriaMet", "True", "CompletionsReached")], backoffLimit=0),
                     [mkpod("a", "Failed")], ("SuccessCriteriaMet", "CompletionsReached"), id="scm-beats-failures"),
        pytest.param(mkjob([("FailureTarget", "True", "DeadlineExceeded")]), [], ("Failed", "DeadlineExceeded"),
                     id="existing-failure-target-becomes-failed"),
        pytest.param(mkjob(podFailurePolicy=FAILJOB_42), [mkpod("a", "Failed", code=42)],
                     ("FailureTarget", "PodFailurePolicy"), id="failjob"),
        pytest.param(mkjob(backoffLimit=1, st={"failed": 1}), [mkpod("a", "Failed")],
                     ("FailureTarget", "BackoffLimitExceeded"), id="backoff-limit"),
        pytest.param(mkjob(backoffLimit=1), [mkpod("a", "Failed")], None, id="within-backoff-limit"),
        pytest.param(mkjob(backoffLimit=0), [mkpod("a", "Failed")], ("FailureTarget", "BackoffLimitExceeded"),
                     id="backoff-limit-0"),
        pytest.param(mkjob(podFailurePolicy=FAILJOB_42, backoffLimit=0), [mkpod("a", "Failed", code=42)],
                     ("FailureTarget", "PodFailurePolicy"), id="failjob-before-backoff"),
        pytest.param(mkjob(activeDeadlineSeconds=10), [mkpod("a")], ("FailureTarget", "DeadlineExceeded"),
                     id="deadline"),
        pytest.param(mkjob(activeDeadlineSeconds=10, suspend=True), [], None, id="deadline-ignored-when-suspended"),
        pytest.param(mkjob(activeDeadlineSeconds=60), [mkpod("a")], None, id="deadline-pending"),
        pytest.param(mkjob(completionMode="Indexed", completions=4, backoffLimitPerIndex=0, maxFailedIndexes=0),
                     [mkpod("a", "Failed", index=1)], ("FailureTarget", "MaxFailedIndexesExceeded"),
                     id="max-failed-indexes"),
        pytest.param(mkjob(completionMode="Indexed", completions=2, backoffLimitPerIndex=0),
                     [mkpod("a", "Failed", index=1), mkpod("b", "Succeeded", index=0)],
                     ("FailureTarget", "FailedIndexes"), id="failed-indexes"),
        pytest.param(mkjob(completionMode="Indexed", completions=3, backoffLimitPerIndex=0),
                     [mkpod("a", "Failed", index=1)], None, id="failed-index-others-pending"),
        pytest.param(mkjob(completionMode="Indexed", completions=3, backoffLimitPerIndex=1),
                     [mkpod("a", "Failed", index=1)], None, id="per-index-retry-left"),
        pytest.param(mkjob(completionMode="Indexed", completions=5, successPolicy={
            "rules": [{"succeededIndexes": "0,1"}]}), [mkpod("a", "Succeeded", index=0),
                                                         mkpod("b", "Succeeded", index=1), mkpod("c", index=2)],
                     ("SuccessCriteriaMet", "SuccessPolicy"), id="success-policy"),
        pytest.param(mkjob(completionMode="Indexed", completions=5, successPolicy={"rules": [{"succeededCount": 1}]},
                           podFailurePolicy=FAILJOB_42),
                     [mkpod("a", "Succeeded", index=0), mkpod("b", "Failed", index=1, code=42)],
                     ("FailureTarget", "PodFailurePolicy"), id="failure-beats-success-policy"),
    ],
)
def test_evaluate(job: dict[str, Any], pods: list[dict[str, Any]], want: tuple[str, str] | None) -> None:
    ctx = ctx_for(job, pods)
    ctx.apply(status.evaluate(ctx, NOW))
    got = None if ctx.finished_condition is None else (ctx.finished_condition["type"],
                                                       ctx.finished_condition["reason"])
    assert got == want


def test_evaluate_schedules_deadline_recheck() -> None:
    ctx = ctx_for(mkjob(activeDeadlineSeconds=100), [mkpod("a")])
    assert status.evaluate(ctx, NOW).recheck == pytest.approx(70)
    ctx = ctx_for(mkjob(), [mkpod("a")])
    assert status.evaluate(ctx, NOW).recheck is None


def test_evaluate_indexed_bookkeeping() -> None:
    job = mkjob(completionMode="Indexed", completions=4, backoffLimitPerIndex=1,
                st={"completedIndexes": "0", "failedIndexes": "3"})
    pods = [mkpod("a", "Succeeded", index=1), mkpod("b", "Failed", index=2, failures=1), mkpod("c", "Failed", index=2)]
    ctx = ctx_for(job, pods)
    ctx.apply(status.evaluate(ctx, NOW))
    assert str(ctx.prev_succeeded_indexes) == "0"
    assert str(ctx.succeeded_indexes) == "0,1"
    assert ctx.succeeded == 2
    assert str(ctx.failed_indexes) == "2,3"


# -- conditions -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("existing", "new", "want_changed", "want"),
    [
        ([], ("Suspended", "False", "JobResumed"), False, []),  # nothing -> False says nothing
        ([], ("Suspended", "True", "JobSuspended"), True, [("Suspended", "True", "JobSuspended")]),
        ([("Suspended", "True", "JobSuspended")], ("Suspended", "True", "JobSuspended"), False,
         [("Suspended", "True", "JobSuspended")]),
        ([("Suspended", "True", "JobSuspended")], ("Suspended", "False", "JobResumed"), True,
         [("Suspended", "False", "JobResumed")]),
        ([("A", "True", "x"), ("Suspended", "True", "JobSuspended")], ("Suspended", "True", "Other"), True,
         [("A", "True", "x"), ("Suspended", "True", "Other")]),
    ],
)
def test_ensure_condition(existing: list[tuple[str, str, str]], new: tuple[str, str, str], want_changed: bool,
                          want: list[tuple[str, str, str]]) -> None:
    conds = [{"type": t, "status": s, "reason": r, "message": "msg"} for t, s, r in existing]
    changed = status.ensure_condition(conds, new[0], new[1], new[2], "msg", NOW)
    assert changed is want_changed
    assert [(c["type"], c["status"], c["reason"]) for c in conds] == want


def test_suspend_and_resume_conditions() -> None:
    job = mkjob(suspend=True)
    later = NOW + timedelta(seconds=5)
    assert status.ensure_suspend_condition(job, NOW, SEM) == "Suspended"
    assert status.ensure_suspend_condition(job, NOW, SEM) is None
    job["spec"]["suspend"] = False
    assert status.ensure_suspend_condition(job, later, SEM) == "Resumed"
    assert job["status"]["startTime"] == fields.format_time(later)  # the deadline clock restarts
    cond = fields.condition(job, "Suspended")
    assert cond is not None and (cond["status"], cond["reason"], cond["message"]) == ("False", "JobResumed",
                                                                                      "Job resumed")
    assert status.ensure_suspend_condition(mkjob(), NOW, SEM) is None  # never suspended: no condition


@pytest.mark.parametrize(
    ("completions", "succeeded", "active", "want"),
    [(3, 2, 0, False), (3, 3, 1, False), (3, 3, 0, True), (3, 4, 0, True), (None, 0, 0, False), (None, 1, 2, False),
     (None, 1, 0, True), (0, 0, 0, True)],
)
def test_completions_reached(completions: int | None, succeeded: int, active: int, want: bool) -> None:
    assert status.completions_reached(mkjob(completions=completions), succeeded, active) is want


def test_promote_and_enact_failure() -> None:
    ctx = ctx_for(mkjob(backoffLimit=0), [mkpod("a", "Failed")])
    ctx.apply(status.evaluate(ctx, NOW))
    assert status.promote_interim(ctx, NOW)
    assert [c["type"] for c in ctx.job["status"]["conditions"]] == ["FailureTarget"]
    assert ctx.finished_condition is not None and ctx.finished_condition["type"] == "Failed"
    ctx.job["status"]["uncountedTerminatedPods"] = {"failed": ["a"]}
    assert not status.enact_finished(ctx, NOW)  # uncounted pods first
    ctx.job["status"]["uncountedTerminatedPods"] = {}
    ctx.terminating = 1
    assert not status.enact_finished(ctx, NOW)  # terminating pods first
    ctx.terminating = 0
    assert status.enact_finished(ctx, NOW)
    assert [(c["type"], c["reason"]) for c in ctx.job["status"]["conditions"]] == [
        ("FailureTarget", "BackoffLimitExceeded"), ("Failed", "BackoffLimitExceeded")]
    assert "completionTime" not in ctx.job["status"]


def test_promote_and_enact_success() -> None:
    ctx = ctx_for(mkjob(), [])
    ctx.finished_condition = status.completions_reached_condition(NOW)
    assert status.promote_interim(ctx, NOW)
    assert status.enact_finished(ctx, NOW)
    st = ctx.job["status"]
    assert [(c["type"], c["reason"], c["message"]) for c in st["conditions"]] == [
        ("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
        ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")]
    assert st["completionTime"] == T
    # an existing SuccessCriteriaMet is not appended twice
    ctx2 = ctx_for(mkjob([("SuccessCriteriaMet", "True", "SuccessPolicy")]), [])
    ctx2.apply(status.evaluate(ctx2, NOW))
    assert not status.promote_interim(ctx2, NOW)
    assert ctx2.finished_condition is not None and ctx2.finished_condition["type"] == "Complete"


# -- tracking ---------------------------------------------------------------------------------

def plan_for(job: dict[str, Any], pods: list[dict[str, Any]], finished: dict[str, Any] | None = None,
             expected: frozenset[str] = frozenset()) -> tuple[tracking.TrackingPlan, dict[str, Any]]:
    ctx = ctx_for(job, pods, expected)
    ctx.apply(status.evaluate(ctx, NOW))
    p = tracking.plan(job, sorted(pods, key=fields.completion_index), expected_rm=expected,
                      prev_uncounted_succeeded=ctx.uncounted_succeeded, prev_uncounted_failed=ctx.uncounted_failed,
                      prev_succeeded_indexes=ctx.prev_succeeded_indexes,
                      finished_condition=finished if finished is not None else ctx.finished_condition,
                      delayed=ctx.delayed_deletion)
    return p, job["status"]["uncountedTerminatedPods"]


@pytest.mark.parametrize(
    ("pods", "want_removed", "want_succ", "want_fail"),
    [
        ([mkpod("r")], [], [], []),  # running: keep the finalizer
        ([mkpod("s", "Succeeded")], ["s"], ["s"], []),
        ([mkpod("f", "Failed")], ["f"], [], ["f"]),
        ([mkpod("d", deleted=True)], ["d"], [], ["d"]),
        ([mkpod("s", "Succeeded", finalizer=False)], [], [], []),
    ],
)
def test_tracking_plan_non_indexed(pods: list[dict[str, Any]], want_removed: list[str], want_succ: list[str],
                                   want_fail: list[str]) -> None:
    p, u = plan_for(mkjob(completions=5, parallelism=5), pods)
    assert [fields.uid(x) for x in p.pods_to_remove_finalizer] == want_removed
    assert (u["succeeded"], u["failed"]) == (want_succ, want_fail)
    assert p.needs_flush is bool(want_succ or want_fail)


def test_tracking_plan_failing_job_counts_running_pods_as_failed() -> None:
    ft = status.new_condition("FailureTarget", "True", "BackoffLimitExceeded", "m", NOW)
    p, u = plan_for(mkjob(completions=5, parallelism=5), [mkpod("r"), mkpod("s", "Succeeded")], finished=ft)
    assert {fields.uid(x) for x in p.pods_to_remove_finalizer} == {"r", "s"}
    assert (u["succeeded"], u["failed"]) == (["s"], ["r"])


def test_tracking_plan_succeeding_job_releases_running_pods_uncounted() -> None:
    scm = status.completions_reached_condition(NOW)
    p, u = plan_for(mkjob(completions=5, parallelism=5), [mkpod("r")], finished=scm)
    assert [fields.uid(x) for x in p.pods_to_remove_finalizer] == ["r"]
    assert (u["succeeded"], u["failed"]) == ([], [])


def test_tracking_plan_ignored_failures_and_policy_actions() -> None:
    job = mkjob(completions=5, parallelism=5, podFailurePolicy={"rules": [
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}},
        {"action": "Count", "onExitCodes": {"operator": "In", "values": [4]}}]})
    p, u = plan_for(job, [mkpod("i", "Failed", code=3), mkpod("c", "Failed", code=4)])
    assert {fields.uid(x) for x in p.pods_to_remove_finalizer} == {"i", "c"}
    assert u["failed"] == ["c"]
    assert dict(p.policy_actions) == {"Ignore": 1, "Count": 1}


def test_tracking_plan_indexed() -> None:
    job = mkjob(completionMode="Indexed", completions=3, parallelism=3, st={"completedIndexes": "0"})
    pods = [mkpod("a", "Succeeded", index=0), mkpod("b", "Succeeded", index=2), mkpod("c", "Succeeded", index=7),
            mkpod("d", "Failed", index=1)]
    p, u = plan_for(job, pods)
    assert p.new_succeeded_indexes == [2]
    assert u["succeeded"] == []  # indexes, not UIDs
    assert u["failed"] == ["d"]
    assert {fields.uid(x) for x in p.pods_to_remove_finalizer} == {"a", "b", "c", "d"}


def test_tracking_plan_per_index_delays_finalizer_of_last_failure() -> None:
    job = mkjob(completionMode="Indexed", completions=2, parallelism=2, backoffLimitPerIndex=2)
    p, u = plan_for(job, [mkpod("f", "Failed", index=0)])
    assert p.pods_to_remove_finalizer == []  # its replacement must inherit the failure count first
    assert u["failed"] == []


def test_tracking_plan_caps_uncounted() -> None:
    pods = [mkpod(f"s{i}", "Succeeded") for i in range(tracking.MAX_UNCOUNTED_PODS + 20)]
    p, u = plan_for(mkjob(completions=1000, parallelism=1000), pods)
    assert p.reached_max_uncounted
    assert len(u["succeeded"]) == tracking.MAX_UNCOUNTED_PODS
    assert len(p.pods_to_remove_finalizer) == tracking.MAX_UNCOUNTED_PODS


def test_tracking_plan_skips_expected_removals() -> None:
    p, u = plan_for(mkjob(), [mkpod("s", "Succeeded")], expected=frozenset({"s"}))
    assert p.pods_to_remove_finalizer == [] and u["succeeded"] == []


@pytest.mark.parametrize(
    ("uncounted", "with_finalizer", "want_changed", "want_counts", "want_left"),
    [
        ({"succeeded": ["a"], "failed": ["b"]}, {"a", "b"}, False, (0, 0), (["a"], ["b"])),
        ({"succeeded": ["a"], "failed": ["b"]}, {"b"}, True, (1, 0), ([], ["b"])),
        ({"succeeded": ["a", "c"], "failed": ["b"]}, set(), True, (2, 1), ([], [])),
        ({}, set(), False, (0, 0), ([], [])),
    ],
)
def test_clean_uncounted(uncounted: dict[str, list[str]], with_finalizer: set[str], want_changed: bool,
                         want_counts: tuple[int, int], want_left: tuple[list[str], list[str]]) -> None:
    st: dict[str, Any] = {"uncountedTerminatedPods": dict(uncounted)}
    assert tracking.clean_uncounted_without_finalizers(st, with_finalizer) is want_changed
    assert (st.get("succeeded", 0), st.get("failed", 0)) == want_counts
    u = st["uncountedTerminatedPods"]
    assert (u["succeeded"], u["failed"]) == want_left


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        (mkpod("a", "Failed", index=0, failures=1), True),  # limit 1 reached
        (mkpod("a", "Failed", index=0, failures=0), False),
        (mkpod("a", "Running", index=0, failures=5), False),
    ],
)
def test_is_index_failed(pod: dict[str, Any], want: bool) -> None:
    job = mkjob(completionMode="Indexed", completions=2, backoffLimitPerIndex=1)
    assert tracking.is_index_failed(job, pod) is want


def test_is_index_failed_by_fail_index_rule() -> None:
    job = mkjob(completionMode="Indexed", completions=2, backoffLimitPerIndex=5, podFailurePolicy={
        "rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [9]}}]})
    assert tracking.is_index_failed(job, mkpod("a", "Failed", index=0, code=9))
    assert not tracking.is_index_failed(job, mkpod("a", "Failed", index=0, code=8))


def test_succeeded_indexes_ignore_counted_and_out_of_range() -> None:
    job = mkjob(completionMode="Indexed", completions=3, st={"completedIndexes": "1"})
    prev, now = tracking.succeeded_indexes(job, [mkpod("a", "Succeeded", index=0, finalizer=False),
                                                 mkpod("b", "Succeeded", index=2), mkpod("c", "Succeeded", index=5)])
    assert (str(prev), str(now)) == ("1", "1,2")
    assert Intervals.parse(str(now), 3).total() == 2
