"""The JobSet kind: its sanitised copy, the spec that follows, its status translation (tables and
a property: whatever a worker's JobSet says, the manager's status keeps JobSet's invariants),
its pods and its pod demand, and how the reconciler's pure decisions treat it."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kruntime.resources import Obj
from mirror.claim import ClaimRule
from mirror.config import Config
from mirror.decisions import CopyPlan, Placement, Step, decide, placement_of, plan_copy, status_to_write
from mirror.identity import is_copy_of, manager_key_of
from mirror.jobs.kind import JOB_KIND
from mirror.jobsets.kind import JOBSET_KIND
from mirror.jobsets.pods import JOBSET_UID_LABEL, jobset_name_candidates
from mirror.jobsets.status_translation import MIRRORED_REASON, desired_manager_status, status_differs
from mirror.kinds import MirroredKind
from mirror.placement import LeastLoaded
from mirror.placer import Placer

NOW = datetime(2026, 11, 26, 16, tzinfo=UTC)
T0 = "2026-11-26T15:00:00Z"
ORIGIN = "mgr"
CONTROLLER = "jobmirror.dev/controller"
KIND: MirroredKind = JOBSET_KIND
TEMPLATE: Obj = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def rjob(name: str, replicas: int | None = 1, parallelism: int | None = 1) -> Obj:
    job_spec: Obj = {"template": {"metadata": {"labels": {"app": "t"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    out: Obj = {"name": name, "template": {"spec": job_spec}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def jobset(*, suspend: bool = False, status: Obj | None = None, placed: str | None = None) -> Obj:
    md: Obj = {"name": "train", "namespace": "ns", "uid": "js-uid", "resourceVersion": "7", "generation": 2,
               "creationTimestamp": T0, "labels": {"team": "a", "jobmirror.dev/forged": "x"},
               "annotations": {"note": "n", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
               "finalizers": ["jobmirror.dev/cleanup"], "managedFields": [{}]}
    if placed:
        md["annotations"]["jobmirror.dev/cluster"] = placed
    obj: Obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": md,
                "spec": {"managedBy": CONTROLLER, "suspend": suspend, "ttlSecondsAfterFinished": 0,
                         "replicatedJobs": [rjob("leader"), rjob("workers", replicas=2, parallelism=3)]}}
    if status is not None:
        obj["status"] = status
    return obj


def cond(ctype: str, status: str = "True", reason: str = "AllJobsCompleted", t: str = T0) -> Obj:
    return {"type": ctype, "status": status, "reason": reason, "message": "m", "lastTransitionTime": t}


def rjs(name: str, **counts: int) -> Obj:
    return {"name": name, **{k: counts.get(k, 0) for k in ("ready", "succeeded", "failed", "active", "suspended")}}


def copy_of(manager: Obj, status: Obj | None = None, suspend: bool | None = None) -> Obj:
    out = KIND.build_copy(manager, origin=ORIGIN, origin_cluster="mgr", remote_name="train")
    out["metadata"]["uid"] = "copy-uid"
    if suspend is not None:
        out["spec"]["suspend"] = suspend
    if status is not None:
        out["status"] = status
    return out


# --------------------------------------------------------------------------- the copy


def test_the_copy_is_sanitised_and_stamped() -> None:
    manager = jobset()
    manager["spec"]["replicatedJobs"][0]["template"]["metadata"] = {
        "labels": {"jobset.sigs.k8s.io/jobset-uid": "old", "keep": "1", "jobmirror.dev/origin": "forged"}}
    pod_labels = manager["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]
    pod_labels.update({"batch.kubernetes.io/controller-uid": "old", "jobset.sigs.k8s.io/jobset-name": "train",
                       "jobmirror.dev/kwok-outcome": "fail"})
    manager["status"] = {"restarts": 3}
    out = copy_of(manager)
    md = out["metadata"]
    assert {"uid", "resourceVersion", "generation", "creationTimestamp", "finalizers", "managedFields"} \
        & set(md) == {"uid"}  # only the uid the test gave the created copy
    assert md["labels"]["team"] == "a" and "jobmirror.dev/forged" not in md["labels"]
    assert md["labels"]["jobmirror.dev/origin-uid"] == "js-uid"
    assert manager_key_of("JobSet", out) == "ns/train" and manager_key_of("Job", out) is None
    assert "kubectl.kubernetes.io/last-applied-configuration" not in md["annotations"]
    assert "jobmirror.dev/cluster" not in md["annotations"] and md["annotations"]["note"] == "n"
    assert "managedBy" not in out["spec"] and "ttlSecondsAfterFinished" not in out["spec"]
    assert "status" not in out
    first = out["spec"]["replicatedJobs"][0]["template"]
    assert first["metadata"]["labels"] == {"keep": "1"}
    assert first["spec"]["template"]["metadata"]["labels"] == {"app": "t", "jobmirror.dev/kwok-outcome": "fail"}
    assert is_copy_of("JobSet", {**out, "metadata": {**md, "uid": "x"}}, manager, origin=ORIGIN)
    assert manager["spec"]["managedBy"] == CONTROLLER  # the manager object is not touched


@pytest.mark.parametrize(
    ("manager_suspend", "copy_suspend", "labels", "want"),
    [
        (False, False, {}, None),
        (True, False, {}, {"spec": {"suspend": True}}),
        (False, True, {}, {"spec": {"suspend": False}}),
        (False, False, {"team": "b"}, {"metadata": {"labels": {"team": "b"}}}),
        (False, False, {"jobmirror.dev/x": "1", "jobset.sigs.k8s.io/jobset-uid": "u"}, None),
    ],
    ids=["same", "suspend", "resume", "user-label", "not-ours-to-copy"],
)
def test_spec_patch_follows_suspend_and_user_metadata(manager_suspend: bool, copy_suspend: bool,
                                                      labels: Obj, want: Obj | None) -> None:
    manager = jobset(suspend=manager_suspend)
    remote = copy_of(jobset(), suspend=copy_suspend)
    manager["metadata"]["labels"].update(labels)
    assert KIND.spec_patch(manager, remote) == want
    assert not KIND.recreate_when_refused(want or {})


@pytest.mark.parametrize(
    ("rjobs", "want"),
    [
        ([rjob("leader"), rjob("workers", replicas=2, parallelism=3)], 7),
        ([rjob("a", replicas=None, parallelism=None)], 1),
        ([rjob("a", replicas=4, parallelism=None), rjob("b", replicas=0, parallelism=5)], 4),
        ([], 1),
    ],
    ids=["sum", "defaults", "zero-replicas", "none"],
)
def test_pod_demand_is_replicas_times_parallelism_summed(rjobs: list[Obj], want: int) -> None:
    manager = jobset()
    manager["spec"]["replicatedJobs"] = rjobs
    assert JOBSET_KIND.pods_wanted(manager) == want


@pytest.mark.parametrize(
    ("kind", "obj", "want"),
    [
        (JOBSET_KIND, jobset(), 7),
        (JOB_KIND, {"metadata": {}, "spec": {"parallelism": 3, "completions": 2, "template": TEMPLATE}}, 2),
        (JOBSET_KIND, {**jobset(), "spec": {"replicatedJobs": []}}, None),
    ],
    ids=["jobset", "job", "jobset-without-pods"],
)
def test_room_aware_placement_fits_the_kinds_pods(kind: MirroredKind, obj: Obj, want: int | None) -> None:
    cfg = Config.model_validate({"workers": [{"name": "w1", "kubeconfig": "/k"}]})
    shape, pods = Placer(cfg, {}, LeastLoaded()).pod_shape(kind, obj)
    assert (pods if shape is not None else None) == want


def test_pods_of_several_shapes_leave_the_room_unjudged() -> None:
    """The fit judges one pod shape: a JobSet whose replicatedJobs differ is placed as if room were unknown."""
    manager = jobset()
    manager["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"gpu": "yes"}
    cfg = Config.model_validate({"workers": [{"name": "w1", "kubeconfig": "/k"}]})
    assert Placer(cfg, {}, LeastLoaded()).pod_shape(KIND, manager) == (None, 0)


def test_pods_name_their_jobset_by_label_and_by_name() -> None:
    copies = {"train": {"metadata": {"name": "train", "uid": "u1"}}, "train-a": {"metadata": {"name": "train-a"}}}
    assert jobset_name_candidates("train-a-0-0-abcde")[-2:] == ["train-a", "train"]
    found = KIND.pods.owner_candidates("train-a-0-0-abcde", copies.get) if KIND.pods else []
    assert [c["metadata"]["name"] for c in found] == ["train-a", "train"]
    assert KIND.pods is not None and KIND.pods.owner_uid({"metadata": {"labels": {JOBSET_UID_LABEL: "u1"}}}) == "u1"
    assert KIND.pods.selector(copies["train"]) == f"{JOBSET_UID_LABEL}=u1"


# --------------------------------------------------------------------------- decisions


def test_the_reconciler_decides_for_a_jobset_as_for_a_job() -> None:
    assert ClaimRule(CONTROLLER, frozenset()).claims(KIND, jobset())
    assert not ClaimRule(CONTROLLER, frozenset()).claims(KIND, {**jobset(), "spec": {}})
    assert decide(KIND, jobset(suspend=True), placement_of(jobset()), []) is Step.HOLD
    assert decide(KIND, jobset(), placement_of(jobset()), []) is Step.PLACE
    assert decide(KIND, jobset(), Placement("w1", "train"), []) is Step.SYNC
    done = jobset(status={"terminalState": "Completed", "conditions": [cond("Completed")]})
    assert decide(KIND, done, Placement("w1", "train"), ["w1"]) is Step.FINISH
    manager = jobset(placed="w1")
    assert plan_copy(KIND, manager, copy_of(manager), origin=ORIGIN) == CopyPlan()
    assert KIND.decided_status(manager, NOW) is None


# --------------------------------------------------------------------------- status tables


@pytest.mark.parametrize(
    ("current", "remote", "want"),
    [
        pytest.param({}, {"terminalState": "Completed", "conditions": [cond("Completed")],
                          "replicatedJobsStatus": [rjs("leader", succeeded=1), rjs("workers", succeeded=2)]},
                     {"terminalState": "Completed", "conditions": [cond("Completed")], "restarts": 0,
                      "replicatedJobsStatus": [rjs("leader", succeeded=1), rjs("workers", succeeded=2)]},
                     id="completed"),
        pytest.param({}, {"conditions": [cond("Completed")]},
                     {"terminalState": "Completed", "conditions": [cond("Completed")], "restarts": 0},
                     id="condition-without-terminal-state"),
        pytest.param({}, {"terminalState": "Failed"},
                     {"terminalState": "Failed", "restarts": 0, "conditions": [
                         {**cond("Failed", reason=MIRRORED_REASON, t="2026-11-26T16:00:00Z"),
                          "message": "the worker's copy is Failed"}]},
                     id="terminal-state-without-condition"),
        pytest.param({}, {"terminalState": "Completed", "conditions": [cond("Completed"), cond("Failed")]},
                     {"terminalState": "Failed", "conditions": [cond("Failed")], "restarts": 0},
                     id="both-is-failed"),
        pytest.param({"terminalState": "Failed", "conditions": [cond("Failed")], "restarts": 2},
                     {"terminalState": "Completed", "conditions": [cond("Completed")]},
                     {"terminalState": "Failed", "conditions": [cond("Failed")], "restarts": 2},
                     id="finished-is-frozen"),
        pytest.param({"restarts": 2, "restartsCountTowardsMax": 2,
                      "replicatedJobsStatus": [rjs("leader", succeeded=1, active=0)]},
                     {"restarts": 2, "replicatedJobsStatus": [rjs("leader", succeeded=0, active=1)]},
                     {"restarts": 2, "restartsCountTowardsMax": 2,
                      "replicatedJobsStatus": [rjs("leader", succeeded=1, active=1)]},
                     id="same-attempt-never-backwards"),
        pytest.param({"restarts": 1, "replicatedJobsStatus": [rjs("leader", succeeded=1)]},
                     {"restarts": 2, "replicatedJobsStatus": [rjs("leader", active=1)]},
                     {"restarts": 2, "replicatedJobsStatus": [rjs("leader", active=1)]},
                     id="new-attempt-starts-afresh"),
        pytest.param({"restarts": 1, "replicatedJobsStatus": [rjs("leader", succeeded=1), rjs("workers", failed=1)]},
                     {"restarts": 2, "replicatedJobsStatus": [rjs("leader", active=1)]},
                     {"restarts": 2, "replicatedJobsStatus": [rjs("leader", active=1)]},
                     id="new-attempt-keeps-no-stale-counter"),
        pytest.param({"restarts": 3, "replicatedJobsStatus": [rjs("leader", succeeded=1)]},
                     {"restarts": 0, "replicatedJobsStatus": [rjs("leader", active=1)]},
                     {"restarts": 3, "replicatedJobsStatus": [rjs("leader", succeeded=1, active=1)]},
                     id="copy-behind-lowers-nothing"),
        pytest.param({}, {"restarts": -3, "replicatedJobsStatus": [rjs("ghost", active=1), {"name": "leader"},
                                                                    {"active": 1}],
                          "conditions": [cond("Suspended", reason="bad reason!", t="junk"), cond("Bad Type"),
                                         cond("Suspended", "False")],
                          "currentInPlaceRestartAttempt": 1},
                     {"restarts": 0, "replicatedJobsStatus": [rjs("leader")],
                      "conditions": [{**cond("Suspended", reason=MIRRORED_REASON, t="2026-11-26T16:00:00Z")}]},
                     id="junk-made-valid"),
        pytest.param({"restarts": 1, "replicatedJobsStatus": [rjs("leader", active=1)]}, None,
                     {"restarts": 1, "replicatedJobsStatus": [rjs("leader", active=1)]},
                     id="no-copy-keeps"),
    ],
)
def test_status_translation(current: Obj, remote: Obj | None, want: Obj) -> None:
    manager = jobset(status=current)
    got = desired_manager_status(manager, None if remote is None else copy_of(manager, remote), NOW)
    assert got == want
    assert not status_differs(got, want)


def test_status_is_mirrored_while_suspended() -> None:
    """Kueue #8308: updates of a suspended JobSet's copy were missed."""
    manager = jobset(suspend=True)
    remote = copy_of(manager, {"conditions": [cond("Suspended", reason="SuspendedJobs")],
                               "replicatedJobsStatus": [rjs("workers", suspended=2)]})
    assert status_to_write(KIND, manager, remote, NOW) == {
        "conditions": [cond("Suspended", reason="SuspendedJobs")], "restarts": 0,
        "replicatedJobsStatus": [rjs("workers", suspended=2)]}


@pytest.mark.parametrize(
    ("a", "b", "differs"),
    [
        ({}, {"restarts": 0}, False),
        ({"conditions": [cond("A"), cond("B")]}, {"conditions": [cond("B"), cond("A")]}, False),
        ({"conditions": [cond("A", t="2026-11-26T15:00:00.000Z")]}, {"conditions": [cond("A")]}, False),
        ({"restarts": 1}, {"restarts": 2}, True),
        ({"conditions": [cond("A")]}, {"conditions": [cond("A", "False")]}, True),
    ],
    ids=["restarts-zero", "order", "time-spelling", "restarts", "condition"],
)
def test_status_differs(a: Obj, b: Obj, differs: bool) -> None:
    assert status_differs(a, b) is differs


@pytest.mark.parametrize(
    ("status", "suspend", "state", "finished"),
    [
        ({}, False, None, False),
        ({}, True, "Suspended", False),
        ({"terminalState": "Completed"}, False, "Completed", True),
        ({"conditions": [cond("Failed")]}, True, "Failed", True),
        ({"conditions": [cond("Completed", "False")]}, False, None, False),
    ],
)
def test_state_outcome_and_finished(status: Obj, suspend: bool, state: str | None, finished: bool) -> None:
    obj = jobset(suspend=suspend, status=status)
    assert KIND.state(obj) == state
    assert KIND.is_finished(obj) is finished
    assert KIND.outcome(obj) == (state if finished else None)


# --------------------------------------------------------------------------- the property

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = ("leader", "workers", "ghost")
_counts = st.one_of(st.integers(min_value=-2, max_value=5), st.none(), st.just("7"))
_conditions = st.lists(st.fixed_dictionaries(
    {"type": st.sampled_from(["Completed", "Failed", "Suspended", "StartupPolicyCompleted", "bad type", ""]),
     "status": st.sampled_from(["True", "False", "Unknown", "yes"]),
     "reason": st.sampled_from(["AllJobsCompleted", "", "no good", None]),
     "lastTransitionTime": st.sampled_from([T0, "junk", None])}), max_size=4)
_rjobs = st.lists(st.fixed_dictionaries(
    {"name": st.sampled_from(NAMES), **{k: _counts for k in ("ready", "succeeded", "failed", "active", "suspended")}}),
    max_size=3)
worker_statuses = st.fixed_dictionaries(
    {"restarts": _counts, "restartsCountTowardsMax": _counts, "conditions": _conditions,
     "terminalState": st.sampled_from([None, "Completed", "Failed", "Bogus"]), "replicatedJobsStatus": _rjobs})


def _schema_errors(status: Obj, names: set[str]) -> list[str]:
    """What the JobSet CRD's status schema (and its list-map keys) would refuse."""
    errors = []
    seen = set()
    for c in status.get("conditions") or []:
        if c["type"] in seen:
            errors.append(f"duplicate condition {c['type']}")
        seen.add(c["type"])
        if c["status"] not in ("True", "False", "Unknown") or not c["reason"] or " " in c["reason"] \
                or not isinstance(c["message"], str) or not c.get("lastTransitionTime") or " " in c["type"]:
            errors.append(f"invalid condition {c}")
    for r in status.get("replicatedJobsStatus") or []:
        if r["name"] not in names or any(not isinstance(r[k], int) or r[k] < 0 for k in
                                         ("ready", "succeeded", "failed", "active", "suspended")):
            errors.append(f"invalid replicatedJobsStatus {r}")
    return errors


def _true(status: Obj, ctype: str) -> bool:
    return any(c["type"] == ctype and c["status"] == "True" for c in status.get("conditions") or [])


@FAST
@given(st.lists(worker_statuses, min_size=1, max_size=6), st.booleans())
def test_any_worker_history_keeps_jobsets_invariants(history: list[Obj], suspend: bool) -> None:
    """One copy reports ``history`` in turn; every status mirrored onto the manager is valid, says
    terminalState exactly with its terminal condition, and never lowers a counter within an attempt."""
    manager = jobset(suspend=suspend, status={})
    names = {"leader", "workers"}
    for i, reported in enumerate(history):
        remote = copy_of(manager, {k: v for k, v in reported.items() if v is not None})
        before = copy.deepcopy(manager["status"])
        after = desired_manager_status(manager, remote, NOW + timedelta(seconds=i))
        assert _schema_errors(after, names) == []
        ended = after.get("terminalState")
        assert ended in (None, "Completed", "Failed")
        for t in ("Completed", "Failed"):
            assert _true(after, t) is (ended == t)
        if before.get("terminalState"):
            assert after == before  # finished is frozen
        assert after.get("restarts", 0) >= before.get("restarts", 0)
        assert after.get("restartsCountTowardsMax", 0) >= before.get("restartsCountTowardsMax", 0)
        if after.get("restarts", 0) == before.get("restarts", 0):
            old = {r["name"]: r for r in before.get("replicatedJobsStatus") or []}
            for r in after.get("replicatedJobsStatus") or []:
                for k in ("succeeded", "failed"):
                    assert r[k] >= old.get(r["name"], {}).get(k, 0)
        manager = {**manager, "status": after}




# --------------------------------------------------------------------------- the switch


@pytest.mark.parametrize(
    ("kinds", "mirrored"),
    [(None, ["Job"]), (["JobSet"], ["JobSet"]), (["Job", "JobSet"], ["Job", "JobSet"])],
    ids=["default", "jobset-only", "both"],
)
def test_jobsets_are_mirrored_only_when_the_config_says_so(kinds: list[str] | None, mirrored: list[str]) -> None:
    from mirror.controller import MirrorController

    raw: Obj = {"workers": [{"name": "w1", "kubeconfig": "/k"}]}
    if kinds is not None:
        raw["kinds"] = kinds
    assert list(MirrorController(Config.model_validate(raw)).kinds) == mirrored


@pytest.mark.parametrize("kinds", [[], ["Pod"]], ids=["none", "unknown"])
def test_the_kinds_switch_refuses_what_cannot_be_mirrored(kinds: list[str]) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Config.model_validate({"workers": [{"name": "w1", "kubeconfig": "/k"}], "kinds": kinds})
