"""podFailurePolicy and successPolicy matching, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from builtin_controller import failure_policy, success_policy
from jobapi.intervals import Intervals
from testkit.jobs import make_job


def failed_pod(*codes: int, init_codes: tuple[int, ...] = (), conditions: tuple[tuple[str, str], ...] = (),
               phase: str = "Failed", names: tuple[str, ...] | None = None, deleted: bool = False) -> dict[str, Any]:
    names = names or tuple(f"c{i}" for i in range(len(codes)))
    md: dict[str, Any] = {"name": "p1", "namespace": "ns"}
    if deleted:
        md["deletionTimestamp"] = "2026-11-23T10:00:00Z"
    return {
        "metadata": md,
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": n, "state": {"terminated": {"exitCode": c}}} for n, c in zip(names, codes,
                                                                                                          strict=True)],
            "initContainerStatuses": [{"name": f"i{i}", "state": {"terminated": {"exitCode": c}}}
                                      for i, c in enumerate(init_codes)],
            "conditions": [{"type": t, "status": s} for t, s in conditions],
        },
    }


def rule(action: str, *, op: str | None = None, values: list[int] | None = None, container: str | None = None,
         conditions: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {"action": action}
    if op is not None:
        r["onExitCodes"] = {"operator": op, "values": values or []}
        if container is not None:
            r["onExitCodes"]["containerName"] = container
    if conditions is not None:
        r["onPodConditions"] = [{"type": t, "status": s} for t, s in conditions]
    return r


@pytest.mark.parametrize(
    ("rules", "pod", "want_msg", "want_count", "want_action"),
    [
        pytest.param(None, failed_pod(1), None, True, None, id="no-policy"),
        pytest.param([], failed_pod(1), None, True, None, id="no-rules"),
        pytest.param([rule("FailJob", op="In", values=[42])], failed_pod(42),
                     "Container c0 for pod ns/p1 failed with exit code 42 matching FailJob rule at index 0",
                     True, "FailJob", id="failjob-exit-code"),
        pytest.param([rule("FailJob", op="In", values=[42])], failed_pod(1), None, True, None, id="no-match"),
        pytest.param([rule("Ignore", op="In", values=[1, 2])], failed_pod(2), None, False, "Ignore", id="ignore"),
        pytest.param([rule("Count", op="In", values=[3])], failed_pod(3), None, True, "Count", id="count"),
        pytest.param([rule("FailIndex", op="In", values=[3])], failed_pod(3), None, True, "FailIndex", id="failindex"),
        pytest.param([rule("FailJob", op="NotIn", values=[1, 2])], failed_pod(1), None, True, None, id="notin-miss"),
        pytest.param([rule("FailJob", op="NotIn", values=[1, 2])], failed_pod(5),
                     "Container c0 for pod ns/p1 failed with exit code 5 matching FailJob rule at index 0",
                     True, "FailJob", id="notin-hit"),
        pytest.param([rule("FailJob", op="NotIn", values=[1])], failed_pod(0), None, True, None,
                     id="exit-0-never-matches"),
        pytest.param([rule("Ignore", op="In", values=[5]), rule("FailJob", op="In", values=[5])], failed_pod(5),
                     None, False, "Ignore", id="first-rule-wins"),
        pytest.param([rule("Count", op="In", values=[9]), rule("FailJob", op="In", values=[5])], failed_pod(5),
                     "Container c0 for pod ns/p1 failed with exit code 5 matching FailJob rule at index 1",
                     True, "FailJob", id="second-rule-index-in-message"),
        pytest.param([rule("FailJob", op="In", values=[5], container="main")], failed_pod(5, names=("side",)),
                     None, True, None, id="container-name-mismatch"),
        pytest.param([rule("FailJob", op="In", values=[5], container="main")], failed_pod(0, 5, names=("a", "main")),
                     "Container main for pod ns/p1 failed with exit code 5 matching FailJob rule at index 0",
                     True, "FailJob", id="container-name-match"),
        pytest.param([rule("FailJob", op="In", values=[7])], failed_pod(0, init_codes=(7,)),
                     "Container i0 for pod ns/p1 failed with exit code 7 matching FailJob rule at index 0",
                     True, "FailJob", id="init-container"),
        pytest.param([rule("Ignore", conditions=[("DisruptionTarget", "True")])],
                     failed_pod(137, conditions=(("DisruptionTarget", "True"),)), None, False, "Ignore",
                     id="ignore-disruption"),
        pytest.param([rule("Ignore", conditions=[("DisruptionTarget", "True")])],
                     failed_pod(137, conditions=(("DisruptionTarget", "False"),)), None, True, None,
                     id="condition-status-must-match"),
        pytest.param([rule("FailJob", conditions=[("ConfigIssue", "True")])],
                     failed_pod(1, conditions=(("ConfigIssue", "True"),)),
                     "Pod ns/p1 has condition ConfigIssue matching FailJob rule at index 0", True, "FailJob",
                     id="failjob-condition"),
        pytest.param([rule("Bogus", op="In", values=[1]), rule("Count", op="In", values=[1])], failed_pod(1),
                     None, True, "Count", id="unknown-action-skipped"),
    ],
)
def test_match_pod_failure_policy(rules: list[dict[str, Any]] | None, pod: dict[str, Any], want_msg: str | None,
                                  want_count: bool, want_action: str | None) -> None:
    policy = None if rules is None else {"rules": rules}
    v = failure_policy.match(policy, pod)
    assert (v.fail_job_message, v.count_failed, v.action) == (want_msg, want_count, want_action)


def job(**spec: Any) -> dict[str, Any]:
    return make_job("j", namespace="ns", managed_by=None, kwok=False, extra_spec=spec)


@pytest.mark.parametrize(
    ("j", "pod", "want"),
    [
        (job(), failed_pod(1), True),
        (job(), failed_pod(phase="Running"), False),
        (job(), failed_pod(phase="Running", deleted=True), True),  # deleted before finishing counts as failed
        (job(), failed_pod(phase="Succeeded", deleted=True), False),
        (job(podReplacementPolicy="Failed"), failed_pod(phase="Running", deleted=True), False),
        (job(podFailurePolicy={"rules": []}), failed_pod(phase="Running", deleted=True), False),
        (job(podFailurePolicy={"rules": []}), failed_pod(1), True),
    ],
)
def test_is_pod_failed(j: dict[str, Any], pod: dict[str, Any], want: bool) -> None:
    assert failure_policy.is_pod_failed(pod, j) is want


def test_fail_job_message_only_from_failed_pods() -> None:
    j = job(podFailurePolicy={"rules": [rule("FailJob", op="In", values=[3])]})
    running = failed_pod(3, phase="Running")
    assert failure_policy.fail_job_message(j, [running]) is None
    assert failure_policy.fail_job_message(j, [running, failed_pod(3)]) is not None
    assert failure_policy.fail_job_message(job(), [failed_pod(3)]) is None


@pytest.mark.parametrize(
    ("rules", "completions", "succeeded", "want"),
    [
        pytest.param(None, 10, "0-9", None, id="no-policy"),
        pytest.param([{"succeededIndexes": "0-2"}], 10, "", None, id="nothing-succeeded"),
        pytest.param([{"succeededIndexes": "0-2"}], 10, "0,1", None, id="indexes-partial"),
        pytest.param([{"succeededIndexes": "0-2"}], 10, "0-3", "Matched rules at index 0", id="indexes-all"),
        pytest.param([{"succeededIndexes": "1,3,5"}], 10, "1-5", "Matched rules at index 0", id="indexes-sparse"),
        pytest.param([{"succeededIndexes": "0-4", "succeededCount": 2}], 10, "3,7", None, id="count-of-rule-short"),
        pytest.param([{"succeededIndexes": "0-4", "succeededCount": 2}], 10, "3,4,7", "Matched rules at index 0",
                     id="count-of-rule-met"),
        pytest.param([{"succeededCount": 3}], 10, "7-8", None, id="count-short"),
        pytest.param([{"succeededCount": 3}], 10, "1,7-8", "Matched rules at index 0", id="count-met"),
        pytest.param([{"succeededIndexes": "9"}, {"succeededCount": 1}], 10, "0", "Matched rules at index 1",
                     id="second-rule"),
        pytest.param([{"succeededIndexes": "12-14"}], 10, "0-9", None, id="rule-out-of-range-never-matches"),
        pytest.param([{"succeededIndexes": "8-14"}], 10, "8,9", "Matched rules at index 0",
                     id="rule-cut-at-completions"),
    ],
)
def test_match_success_policy(rules: list[dict[str, Any]] | None, completions: int, succeeded: str,
                              want: str | None) -> None:
    policy = None if rules is None else {"rules": rules}
    assert success_policy.match(policy, completions, Intervals.parse(succeeded, completions)) == want


@pytest.mark.parametrize(
    ("rule_text", "succeeded", "want"),
    [("0-9", "0-9", 10), ("0-9", "5-14", 5), ("2,4,6", "0-3", 1), ("0-2,6-8", "1-7", 4), ("5", "0-4,6", 0)],
)
def test_overlap_count(rule_text: str, succeeded: str, want: int) -> None:
    assert success_policy.overlap_count(Intervals.parse(rule_text, 100), Intervals.parse(succeeded, 100)) == want
