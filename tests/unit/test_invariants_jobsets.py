"""testkit.invariants for JobSets: copies, child Jobs, their pods and the JobSet outcome rules, as recorded
lives; and the chaos workload's JobSet share (bench.chaos.workload)."""

from __future__ import annotations

import random

import pytest

from bench import chaos
from mirror.naming import FINALIZER, LABEL_ORIGIN, LABEL_ORIGIN_UID
from testkit.invariants import (
    JOBSET,
    CopyLife,
    ManagerLife,
    Recorder,
    copy_uid_of_pod,
    outcome_mismatch,
    running_copy,
    verdict,
)
from testkit.jobsets import JOBSET_UID_LABEL, PODS, make_jobset

MB = "jobmirror.dev/controller"
OURS = {LABEL_ORIGIN: "o", LABEL_ORIGIN_UID: "m1"}


def jobset(uid: str, *, terminal: str | None = None, restarts: int = 0, succeeded: tuple[int, int] = (0, 0),
           labels: dict[str, str] | None = None, finalizer: bool = True, managed_by: str | None = MB,
           conditions: list[str] | None = None) -> dict[str, object]:
    conds = [{"type": c, "status": "True"} for c in (conditions if conditions is not None else
                                                     ([terminal] if terminal else []))]
    st: dict[str, object] = {"restarts": restarts, "conditions": conds,
                             "replicatedJobsStatus": [{"name": "leader", "succeeded": succeeded[0]},
                                                      {"name": "workers", "succeeded": succeeded[1]}]}
    if terminal:
        st["terminalState"] = terminal
    spec = {"managedBy": managed_by} if managed_by else {}
    return {"metadata": {"uid": uid, "name": f"js-{uid}", "namespace": "ns", "labels": labels or {},
                         "finalizers": [FINALIZER] if finalizer else []}, "spec": spec, "status": st}


def child(uid: str, js_uid: str) -> dict[str, object]:
    return {"metadata": {"uid": uid, "name": f"child-{uid}", "namespace": "ns",
                         "labels": {JOBSET_UID_LABEL: js_uid}}, "spec": {}, "status": {}}


def pod(uid: str, job_uid: str, js_uid: str, phase: str = "Running") -> dict[str, object]:
    return {"metadata": {"uid": uid, "name": f"p-{uid}", "namespace": "ns",
                         "labels": {"batch.kubernetes.io/controller-uid": job_uid, JOBSET_UID_LABEL: js_uid}},
            "status": {"phase": phase}}


def test_a_child_jobs_pod_works_for_the_jobset_copy() -> None:
    assert copy_uid_of_pod(pod("p", "job-uid", "js-uid")) == "js-uid"
    plain = {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "job-uid"}}}
    assert copy_uid_of_pod(plain) == "job-uid"


def test_running_copy_reads_a_jobsets_terminal_state() -> None:
    assert running_copy(jobset("c"), JOBSET)
    assert not running_copy(jobset("c", terminal="Failed"), JOBSET)
    assert not running_copy(jobset("c", conditions=["Completed"]), JOBSET)  # the condition alone says it too


def _mgr(status: dict[str, object], terminal: str = "Completed") -> ManagerLife:
    return ManagerLife("m", "mgr", "ns/js", 0.0, terminal=terminal, terminal_at=9.0, status=status, kind=JOBSET)


def _copy(uid: str, status: dict[str, object], outcome: str | None = None, decided: float | None = None) -> CopyLife:
    return CopyLife(uid, "w", uid, "m", "o", 0.0, status=status, decided_at=decided, outcome=outcome, kind=JOBSET)


def _st(obj: dict[str, object]) -> dict[str, object]:
    status = obj["status"]
    assert isinstance(status, dict)
    return status


DONE = _st(jobset("x", terminal="Completed", succeeded=(1, 2)))
FAILED = _st(jobset("x", terminal="Failed", restarts=1))


@pytest.mark.parametrize(("mgr", "copies", "bad"), [
    (_mgr(DONE), [_copy("c", DONE, "Completed", 5)], None),
    (_mgr(FAILED, "Failed"), [_copy("c", FAILED, "Failed", 5)], None),
    (_mgr(DONE), [_copy("c", FAILED, "Failed", 5)], "deciding copy"),
    # terminalState and its condition come together; never both outcomes
    (_mgr({**DONE, "terminalState": None}), [_copy("c", DONE, "Completed", 5)], "terminalState None"),
    (_mgr({**DONE, "conditions": []}), [_copy("c", DONE, "Completed", 5)], "without its condition"),
    (_mgr(_st(jobset("x", terminal="Failed", conditions=["Failed", "Completed"])), "Failed"),
     [_copy("c", FAILED, "Failed", 5)], "both"),
    # restarts: the max over copies, never beyond what any copy reported
    (_mgr({**FAILED, "restarts": 0}, "Failed"), [_copy("c", FAILED, "Failed", 5)], "restarts=0"),
    (_mgr({**FAILED, "restarts": 3}, "Failed"), [_copy("c", FAILED, "Failed", 5)], "restarts=3"),
    (_mgr({**FAILED, "restarts": 2}, "Failed"),
     [_copy("stale", {"restarts": 2}), _copy("c", FAILED, "Failed", 5)], None),
    # a Completed JobSet whose replicatedJob did not succeed
    (_mgr(_st(jobset("x", terminal="Completed", succeeded=(1, 1)))), [_copy("c", DONE, "Completed", 5)],
     "replicatedJob workers succeeded=1"),
])
def test_jobset_outcome_mismatch(mgr: ManagerLife, copies: list[CopyLife], bad: str | None) -> None:
    got = outcome_mismatch(mgr, copies)
    assert (got is None) if bad is None else (got is not None and bad in got), got


def _record_one_jobset(rec: Recorder, *, child_gone: bool, outcome: str = "Completed") -> None:
    """A manager JobSet, its copy on w1 with two child Jobs and their pods, finished, copy deleted."""
    rec.on_manager("mgr", "ADDED", jobset("m1"), 0.0, JOBSET)
    rec.on_copy("w1", "ADDED", jobset("c1", labels=OURS), 1.0, JOBSET)
    rec.on_copy("w1", "ADDED", child("j1", "c1"), 1.1)  # the worker Jobs watch: a child, not a copy
    rec.on_copy("w1", "ADDED", child("j2", "c1"), 1.1)
    rec.on_pod("w1", "ADDED", pod("p1", "j1", "c1"), 1.2)
    rec.on_pod("w1", "ADDED", pod("p2", "j2", "c1"), 1.2)
    rec.on_pod("w1", "MODIFIED", pod("p1", "j1", "c1", "Succeeded"), 3.0)
    rec.on_pod("w1", "MODIFIED", pod("p2", "j2", "c1", "Succeeded"), 3.0)
    done = jobset("c1", terminal="Completed", succeeded=(1, 2), labels=OURS)
    rec.on_copy("w1", "MODIFIED", done, 3.1, JOBSET)
    rec.on_manager("mgr", "MODIFIED", jobset("m1", terminal=outcome, succeeded=(1, 2), finalizer=False), 3.5, JOBSET)
    rec.on_copy("w1", "DELETED", done, 4.0, JOBSET)
    for uid in ("j1", "j2"):
        if child_gone or uid == "j1":
            rec.on_copy("w1", "DELETED", child(uid, "c1"), 4.5)
    rec.on_pod("w1", "DELETED", pod("p1", "j1", "c1", "Succeeded"), 4.6)
    rec.on_pod("w1", "DELETED", pod("p2", "j2", "c1", "Succeeded"), 4.6)


def test_a_jobset_recorded_end_to_end_keeps_the_invariants() -> None:
    rec = Recorder(managed_by=MB, origins={"o"})
    _record_one_jobset(rec, child_gone=True)
    rec.expect(JOBSET, "ns/js-m1", "Completed")
    assert set(rec.copies) == {"c1"} and set(rec.children) == {"j1", "j2"}
    assert {p.copy_uid for p in rec.pods.values()} == {"c1"}
    assert rec.copies["c1"].outcome == "Completed" and rec.lagging() == 0
    v = verdict(rec, faults=[], end=10.0)
    assert v.ok, v.explain()
    assert (v.jobs, v.jobsets, v.jobset_copies_seen, v.child_jobs_seen) == (1, 1, 1, 2)
    assert v.jobset_outcomes == {"Completed": 1}


def test_a_child_job_that_outlives_its_copy_is_an_orphan() -> None:
    rec = Recorder(managed_by=MB, origins={"o"})
    _record_one_jobset(rec, child_gone=False)
    v = verdict(rec, faults=[], end=10.0)
    assert v.orphan_children == ["w1/ns/child-j2 (child Job of w1/ns/js-c1)"] and not v.ok
    assert v.summary()["orphans"] == 1


def test_a_jobset_ending_otherwise_than_the_workload_meant_is_a_wrong_outcome() -> None:
    rec = Recorder(managed_by=MB, origins={"o"})
    _record_one_jobset(rec, child_gone=True)
    rec.expect(JOBSET, "ns/js-m1", "Failed")
    v = verdict(rec, faults=[], end=10.0)
    assert v.wrong_outcomes == ["mgr:ns/js-m1: ended Completed, the workload meant Failed"] and not v.ok


def test_two_jobset_copies_running_at_once_are_a_duplicate_through_their_child_jobs_pods() -> None:
    rec = Recorder(managed_by=MB, origins={"o"})
    rec.on_manager("mgr", "ADDED", jobset("m1"), 0.0, JOBSET)
    rec.on_copy("w1", "ADDED", jobset("c1", labels=OURS), 1.0, JOBSET)
    rec.on_copy("w2", "ADDED", jobset("c2", labels=OURS), 5.0, JOBSET)
    rec.on_pod("w1", "ADDED", pod("p1", "j1", "c1"), 1.2)
    rec.on_pod("w2", "ADDED", pod("p2", "j2", "c2"), 5.2)
    rec.on_pod("w1", "DELETED", pod("p1", "j1", "c1"), 6.0)
    v = verdict(rec, faults=[], end=7.0)
    assert len(v.duplicates_after_recovery) == 1 and "0.80s" in v.duplicates_after_recovery[0]
    assert len(verdict(rec, faults=[(4.0, 5.5)], end=7.0).duplicates_during_fault) == 1


def test_a_child_job_of_a_claimed_jobset_in_the_manager_is_a_violation() -> None:
    """The manager's JobSet controller must leave a JobSet claimed by jobmirror alone; one it runs is its own."""
    rec = Recorder(managed_by=MB, origins={"o"})
    rec.on_manager("mgr", "ADDED", jobset("m1"), 0.0, JOBSET)
    rec.on_manager("mgr", "ADDED", jobset("theirs", managed_by=None), 0.0, JOBSET)
    rec.on_manager("mgr", "ADDED", child("j1", "m1"), 1.0)
    rec.on_manager("mgr", "ADDED", child("j2", "theirs"), 1.0)
    assert set(rec.managers) == {"m1"}
    v = verdict(rec, faults=[], end=2.0)
    assert v.ran_on_manager == ["mgr:ns/child-j1 (child Job of claimed JobSet uid m1)"]


def test_make_jobset_is_two_replicated_jobs_of_kwok_pods() -> None:
    js = make_jobset("train", outcome="fail", duration_ms=700, failurePolicy={"maxRestarts": 1})
    assert js["spec"]["managedBy"] == MB and js["spec"]["failurePolicy"] == {"maxRestarts": 1}
    rjobs = {r["name"]: r for r in js["spec"]["replicatedJobs"]}
    assert (rjobs["leader"]["replicas"], rjobs["workers"]["replicas"]) == (1, 2)
    tmpl = rjobs["workers"]["template"]["spec"]["template"]
    assert tmpl["metadata"]["labels"]["jobmirror.dev/kwok-outcome"] == "fail"
    assert tmpl["metadata"]["annotations"]["jobmirror.dev/kwok-duration"] == "700ms"
    assert "managedBy" not in rjobs["workers"]["template"]["spec"]
    assert PODS == 5


@pytest.mark.parametrize("n", [15, 40, 200])
def test_the_chaos_workload_mixes_a_fifth_jobsets_into_every_wave(n: int) -> None:
    objs = chaos.workload(n, random.Random(1), 0.2)
    jobsets = [o for o in objs if o["kind"] == "JobSet"]
    assert len(objs) == n and len(jobsets) == round(n * 0.2)
    assert len({o["metadata"]["name"] for o in objs}) == n
    waves = chaos.waves(objs)
    assert sorted(o["metadata"]["name"] for w in waves for o in w) == sorted(o["metadata"]["name"] for o in objs)
    for wave in waves:
        kinds = {o["metadata"]["name"].rsplit("-", 1)[0] for o in wave if o["kind"] == "JobSet"}
        assert kinds == set(chaos.JOBSET_KINDS) or len(jobsets) < 3 * chaos.WAVES, kinds
    outcomes = [chaos.expected_outcome(o) for o in jobsets]
    assert set(outcomes) == {"Completed", "Failed"}
    assert all(chaos.expected_outcome(o) is None for o in objs if o["kind"] == "Job")
    failing = [o for o in jobsets if chaos.expected_outcome(o) == "Failed"]
    assert all(o["spec"]["failurePolicy"] == {"maxRestarts": 1} for o in failing)


def test_without_a_share_the_workload_and_its_waves_are_the_job_mix_unchanged() -> None:
    jobs = chaos.job_mix(25, random.Random(3))
    objs = chaos.workload(25, random.Random(3), 0.0)
    assert objs == jobs
    assert chaos.waves(objs) == [jobs[w::chaos.WAVES] for w in range(chaos.WAVES)]


def test_jobset_mix_is_a_scenario_with_a_share_and_runs_last() -> None:
    assert set(chaos.JOBSET_SHARE) <= set(chaos.SCENARIOS)
    assert list(chaos.SCENARIOS)[-1] == "jobset-mix" and chaos.JOBSET_SHARE["jobset-mix"] == 0.2
