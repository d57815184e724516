"""Creation/deletion and finalizer-removal expectations; metric helpers."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from builtin_controller import fields, metrics
from builtin_controller.expectations import ControllerExpectations, FinalizerExpectations


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize(
    ("add", "delete", "observed_adds", "observed_dels", "want"),
    [
        (0, 0, 0, 0, True),
        (3, 0, 2, 0, False),
        (3, 0, 3, 0, True),
        (0, 2, 0, 1, False),
        (0, 2, 0, 5, True),  # repeated deletion updates push below zero: still satisfied
    ],
)
def test_expectations(add: int, delete: int, observed_adds: int, observed_dels: int, want: bool) -> None:
    e = ControllerExpectations()
    e.set("k", add, delete)
    for _ in range(observed_adds):
        e.creation_observed("k")
    for _ in range(observed_dels):
        e.deletion_observed("k")
    assert e.satisfied("k") is want


def test_expectations_unknown_key_and_ttl() -> None:
    clock = FakeClock()
    e = ControllerExpectations(timeout=300, clock=clock)
    assert e.satisfied("nobody")
    e.creation_observed("nobody")  # no-op, no crash
    e.expect_creations("k", 2)
    assert not e.satisfied("k")
    clock.t += 301  # a lost watch event must not wedge the Job forever
    assert e.satisfied("k")
    e.expect_deletions("k", 1)  # a new expectation replaces the old one
    assert e.get("k") == (0, 1)
    e.delete("k")
    assert e.get("k") is None


def test_finalizer_expectations() -> None:
    f = FinalizerExpectations()
    assert f.expected("k") == frozenset()
    f.expect_removed("k", ["a", "b"])
    f.observed("k", "a")
    f.observed("other", "b")
    assert f.expected("k") == frozenset({"b"})
    f.delete("k")
    assert f.expected("k") == frozenset()


def _value(name: str, labels: dict[str, str]) -> float:
    v = REGISTRY.get_sample_value(name, labels)
    return v or 0.0


def _pod(phase: str, finalizer: bool) -> dict[str, Any]:
    finalizers = [fields.JOB_TRACKING_FINALIZER] if finalizer else []
    return {"metadata": {"finalizers": finalizers}, "status": {"phase": phase}}


def test_terminated_pods_tracking_finalizer_metric() -> None:
    name = "job_controller_terminated_pods_tracking_finalizer_total"
    add0, del0 = _value(name, {"event": "add"}), _value(name, {"event": "delete"})
    metrics.record_finished_pod_with_finalizer(_pod("Running", True), _pod("Succeeded", True))
    metrics.record_finished_pod_with_finalizer(_pod("Succeeded", True), _pod("Succeeded", True))
    metrics.record_finished_pod_with_finalizer(_pod("Succeeded", True), _pod("Succeeded", False))
    metrics.record_finished_pod_with_finalizer(_pod("Failed", True), None)
    assert _value(name, {"event": "add"}) - add0 == 1
    assert _value(name, {"event": "delete"}) - del0 == 2


def test_pods_finished_metric_indexed() -> None:
    job = {"spec": {"completionMode": "Indexed", "completions": 10, "backoffLimitPerIndex": 1},
           "status": {"completedIndexes": "0-4", "failedIndexes": "7,8", "failed": 3}}
    name = "job_controller_job_pods_finished_total"
    s0 = _value(name, {"completion_mode": "Indexed", "result": "succeeded"})
    f0 = _value(name, {"completion_mode": "Indexed", "result": "failed"})
    i0 = _value("job_controller_job_finished_indexes_total", {"status": "failed", "backoffLimit": "perIndex"})
    metrics.record_pods_finished(job, {"completedIndexes": "0,1", "failedIndexes": "7", "failed": 1})
    assert _value(name, {"completion_mode": "Indexed", "result": "succeeded"}) - s0 == 3
    assert _value(name, {"completion_mode": "Indexed", "result": "failed"}) - f0 == 2
    assert _value("job_controller_job_finished_indexes_total", {"status": "failed", "backoffLimit": "perIndex"}) \
        - i0 == 1


@pytest.mark.parametrize(
    ("spec", "failed", "terminating", "reason"),
    [({}, 0, 0, "new"), ({}, 1, 0, "recreate_terminating_or_failed"), ({}, 0, 2, "recreate_terminating_or_failed"),
     ({"podReplacementPolicy": "Failed"}, 1, 0, "recreate_failed"),
     ({"podReplacementPolicy": "Failed"}, 0, 1, "recreate_terminating_or_failed")],
)
def test_pods_creation_reason(spec: dict[str, Any], failed: int, terminating: int, reason: str) -> None:
    name = "job_controller_job_pods_creation_total"
    before = _value(name, {"reason": reason, "status": "succeeded"})
    metrics.record_pods_created({"spec": spec}, failed, terminating, 2, 0)
    assert _value(name, {"reason": reason, "status": "succeeded"}) - before == 2
