"""Property tests: any reachable worker history -> a manager status history the server accepts.

The oracle is ``tests/jobstatus_validation.py``; scenarios come from ``testkit/status_sequences.py``
(also replayed against a real kube-apiserver by the integration tier).
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobapi.conditions import is_finished
from jobapi.times import parse_time_seconds
from mirror.jobs.status_translation import desired_manager_status, status_differs
from testkit.status_sequences import (
    WorkerSequence,
    WorkerStep,
    job_specs,
    manager_job_for,
    step_time,
    translate_sequence,
    worker_sequences,
)
from tests.jobstatus_validation import validate_status_update

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

STICKY = ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet")


def _true_types(status: dict[str, Any]) -> set[str]:
    return {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}


def _with(job: dict[str, Any], suspend: bool, status: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(job)
    out["spec"]["suspend"] = suspend
    out["status"] = copy.deepcopy(status)
    return out


def _remote_verdict(remote: dict[str, Any] | None) -> str | None:
    if remote is None:
        return None
    types = _true_types(remote.get("status") or {})
    if "Failed" in types:
        return "Failed"
    if "Complete" in types:
        return "Complete"
    return None


def _check_step(job: dict[str, Any], step: WorkerStep, old: dict[str, Any], new: dict[str, Any]) -> None:
    # Accepted by the server, also by servers without the resume exception (#134521).
    for resume_exception in (True, False):
        errors = validate_status_update(
            _with(job, step.manager_suspend, {}), old, new, resume_exception=resume_exception
        )
        assert errors == [], f"{step.action}: {errors}\nold={old}\nnew={new}"
    # Progress is never lost.
    assert new.get("succeeded", 0) >= old.get("succeeded", 0)
    assert new.get("failed", 0) >= old.get("failed", 0)
    # Terminal and interim conditions are final.
    assert _true_types(old) & set(STICKY) <= _true_types(new)
    # startTime of an unsuspended manager is never moved or removed once set.
    if old.get("startTime") is not None and not step.manager_suspend:
        assert new.get("startTime") == old["startTime"]
    # completionTime is immutable and belongs to Complete only.
    if old.get("completionTime") is not None:
        assert new.get("completionTime") == old["completionTime"]
    if new.get("completionTime") is not None:
        assert "Complete" in _true_types(new)
        start, done = parse_time_seconds(new.get("startTime")), parse_time_seconds(new["completionTime"])
        assert start is not None and done is not None and done >= start
    assert new.get("ready", 0) <= new.get("active", 0)
    # Suspend bookkeeping is ours: it tracks the manager's spec while the Job runs.
    if not is_finished({"status": new}):
        assert ("Suspended" in _true_types(new)) == step.manager_suspend
        if step.manager_suspend:
            assert new.get("startTime") is None


@FAST
@given(worker_sequences())
def test_reachable_worker_histories_give_valid_manager_histories(seq: WorkerSequence) -> None:
    statuses = translate_sequence(seq.manager_job, seq.steps, seq.start_time)
    assert len(statuses) == len(seq.steps)
    old: dict[str, Any] = {}
    for step, new in zip(seq.steps, statuses, strict=True):
        _check_step(seq.manager_job, step, old, new)
        old = new


@FAST
@given(worker_sequences())
def test_terminal_worker_finishes_the_manager_in_the_same_step(seq: WorkerSequence) -> None:
    statuses = translate_sequence(seq.manager_job, seq.steps, seq.start_time)
    old: dict[str, Any] = {}
    for step, new in zip(seq.steps, statuses, strict=True):
        verdict = _remote_verdict(step.remote)
        if verdict is not None:
            # The first interim condition on the manager decides; otherwise the worker's verdict.
            locked = _true_types(old)
            if "FailureTarget" in locked:
                expected = "Failed"
            elif "SuccessCriteriaMet" in locked:
                expected = "Complete"
            else:
                expected = verdict
            assert expected in _true_types(new), f"{step.action}: expected {expected}, got {new}"
        old = new


@FAST
@given(worker_sequences())
def test_translation_is_a_fixpoint(seq: WorkerSequence) -> None:
    """Re-reconciling with nothing new must not write again (no hot loop, no time drift)."""
    statuses = translate_sequence(seq.manager_job, seq.steps, seq.start_time)
    for i, (step, status) in enumerate(zip(seq.steps, statuses, strict=True)):
        manager = _with(seq.manager_job, step.manager_suspend, status)
        later = step_time(seq.start_time, i) + timedelta(seconds=3)
        again = desired_manager_status(manager, step.remote, later)
        assert not status_differs(status, again), f"{step.action}: {status} -> {again}"


@FAST
@given(worker_sequences())
def test_finished_manager_is_frozen(seq: WorkerSequence) -> None:
    statuses = translate_sequence(seq.manager_job, seq.steps, seq.start_time)
    frozen: dict[str, Any] | None = None
    for status in statuses:
        if frozen is not None:
            assert status == frozen
        elif is_finished({"status": status}):
            frozen = status


# --------------------------------------------------------------------------- arbitrary workers

_TIMES = st.sampled_from(
    [
        "2026-11-23T09:59:00Z",
        "2026-11-23T10:00:00Z",
        "2026-11-23T10:00:30.5Z",
        "2026-11-23T11:00:00+01:00",
        "2026-11-22T10:00:00Z",
        "2026-11-24T10:00:00Z",
        "not-a-time",
        "",
    ]
)
_INDEXES = st.sampled_from(
    ["", "0", "1", "0-2", "0,1", "3,1", "0,0", "x", "1-0", "0-9", "2,5-7", "1-2-3", "0,2-3", "+1"]
)
_UIDS = st.lists(st.sampled_from(["a", "b", "c", "", "a"]), max_size=4)


@st.composite
def arbitrary_conditions(draw: st.DrawFn) -> list[Any]:
    cond = st.fixed_dictionaries(
        {
            "type": st.sampled_from(
                ["Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "Suspended", "Custom", "", 3]
            ),
            "status": st.sampled_from(["True", "False", "Unknown", "", None]),
        },
        optional={
            "reason": st.sampled_from(["", "BackoffLimitExceeded", "CompletionsReached", "X", None]),
            "message": st.sampled_from(["", "m", None]),
            "lastTransitionTime": _TIMES,
            "lastProbeTime": _TIMES,
        },
    )
    return draw(st.lists(st.one_of(cond, st.just("junk")), max_size=5))


@st.composite
def arbitrary_remote(draw: st.DrawFn) -> dict[str, Any] | None:
    """Any status a worker API server might hand us, valid or not: robustness, not realism."""
    if draw(st.integers(0, 6)) == 0:
        return None
    counts = st.one_of(st.integers(-2, 6), st.just("7"), st.none())
    status = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "conditions": arbitrary_conditions(),
                "active": counts,
                "succeeded": counts,
                "failed": counts,
                "ready": counts,
                "terminating": counts,
                "startTime": _TIMES,
                "completionTime": _TIMES,
                "completedIndexes": _INDEXES,
                "failedIndexes": st.one_of(_INDEXES, st.none()),
                "uncountedTerminatedPods": st.one_of(
                    st.fixed_dictionaries({}, optional={"succeeded": _UIDS, "failed": _UIDS}), st.just([])
                ),
                "someFutureField": st.integers(),
            },
        )
    )
    remote: dict[str, Any] = {"status": status}
    if draw(st.booleans()):
        remote["spec"] = {"suspend": draw(st.sampled_from([True, False, None]))}
    if draw(st.booleans()):
        remote["metadata"] = {"creationTimestamp": draw(_TIMES)}
    return remote


@FAST
@given(
    spec=job_specs(),
    steps=st.lists(st.tuples(st.booleans(), arbitrary_remote()), min_size=1, max_size=8),
)
def test_any_worker_status_gives_an_accepted_write(
    spec: dict[str, Any], steps: list[tuple[bool, dict[str, Any] | None]]
) -> None:
    start = datetime(2026, 11, 23, 10, 0, 0, tzinfo=UTC)
    job = manager_job_for(spec, start)
    worker_steps = [WorkerStep(manager_suspend=s, remote=r, action="arbitrary") for s, r in steps]
    statuses = translate_sequence(job, worker_steps, start)
    old: dict[str, Any] = {}
    for step, new in zip(worker_steps, statuses, strict=True):
        _check_step(job, step, old, new)
        old = new
