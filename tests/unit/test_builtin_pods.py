"""Pod construction, removal order, index bookkeeping, selectors and patches."""

from __future__ import annotations

from typing import Any

import pytest

from builtin_controller import fields, pods
from jobapi.intervals import Intervals
from testkit.jobs import make_job


def mkjob(name: str = "job", **spec: Any) -> dict[str, Any]:
    job = make_job(name, namespace="ns", managed_by=None, completions=None, parallelism=None, backoff_limit=None,
                   kwok=False, pod_labels={"batch.kubernetes.io/job-name": name, "controller-uid": "juid"},
                   pod_annotations={"a": "b"}, container_name="c",
                   extra_spec={"selector": {"matchLabels": {"controller-uid": "juid"}}, **spec})
    job["metadata"]["uid"] = "juid"
    return {**job, "status": {}}


def mkpod(name: str, *, index: int | None = None, phase: str = "Pending", node: str = "", ready: bool = False,
          ready_at: str = "2026-11-23T10:00:00Z", created: str = "2026-11-23T09:00:00Z", restarts: int = 0,
          finalizer: bool = True, deleted: bool = False, uid: str | None = None, failures: int | None = None,
          ignored: int | None = None, finished: str | None = None) -> dict[str, Any]:
    ann: dict[str, str] = {}
    if index is not None:
        ann[fields.COMPLETION_INDEX_KEY] = str(index)
    if failures is not None:
        ann[fields.INDEX_FAILURE_COUNT_KEY] = str(failures)
    if ignored is not None:
        ann[fields.INDEX_IGNORED_FAILURE_COUNT_KEY] = str(ignored)
    md: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid or name, "annotations": ann,
                          "creationTimestamp": created,
                          "finalizers": [fields.JOB_TRACKING_FINALIZER] if finalizer else []}
    if deleted:
        md["deletionTimestamp"] = "2026-11-23T10:00:00Z"
    conds = [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ready_at}]
    st: dict[str, Any] = {"phase": phase, "conditions": conds,
                          "containerStatuses": [{"name": "c", "restartCount": restarts, "state": {}}]}
    if finished is not None:
        st["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 1, "finishedAt": finished}}
    return {"metadata": md, "spec": {"nodeName": node}, "status": st}


@pytest.mark.parametrize(
    ("job_name", "index", "want"),
    [
        ("pi", None, "pi-"),
        ("pi", 3, "pi-3-"),
        ("a" * 60, None, "a" * 60 + "-"),  # the API server truncates plain generateNames itself
        ("a" * 50, 7, "a" * 50 + "-7-"),  # 53 chars: fits
        ("a" * 56, 12, "a" * 54 + "-12-"),  # the index survives truncation
        ("a" * 63, 12345, "a" * 51 + "-12345-"),
    ],
)
def test_generate_name(job_name: str, index: int | None, want: str) -> None:
    got = pods.generate_name(job_name, index)
    assert got == want
    assert index is None or len(got) <= pods.MAX_GENERATED_NAME_LENGTH


def test_pod_from_template_non_indexed() -> None:
    p = pods.pod_from_template(mkjob())
    md = p["metadata"]
    assert md["generateName"] == "job-"
    assert md["finalizers"] == [fields.JOB_TRACKING_FINALIZER]
    assert md["labels"] == {"batch.kubernetes.io/job-name": "job", "controller-uid": "juid"}
    assert md["annotations"] == {"a": "b"}
    assert md["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": "juid",
                                      "controller": True, "blockOwnerDeletion": True}]
    assert "hostname" not in p["spec"]
    assert "env" not in p["spec"]["containers"][0]


def test_pod_from_template_indexed() -> None:
    job = mkjob(completionMode="Indexed", completions=5)
    job["spec"]["template"]["spec"]["initContainers"] = [{"name": "init", "env": [{"name": "X", "value": "1"}]}]
    job["spec"]["template"]["spec"]["subdomain"] = "svc"
    p = pods.pod_from_template(job, 3)
    md = p["metadata"]
    assert md["generateName"] == "job-3-"
    assert md["annotations"][fields.COMPLETION_INDEX_KEY] == "3"
    assert md["labels"][fields.COMPLETION_INDEX_KEY] == "3"
    assert p["spec"]["hostname"] == "job-3"
    assert p["spec"]["subdomain"] == "svc"  # from the template, untouched
    env = {"name": "JOB_COMPLETION_INDEX",
           "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}
    assert p["spec"]["containers"][0]["env"] == [env]
    assert p["spec"]["initContainers"][0]["env"] == [{"name": "X", "value": "1"}, env]
    assert fields.INDEX_FAILURE_COUNT_KEY not in md["annotations"]
    # the template itself is never modified
    assert "env" not in job["spec"]["template"]["spec"]["containers"][0]


def test_pod_from_template_keeps_existing_index_env_and_finalizer() -> None:
    job = mkjob(completionMode="Indexed", completions=2)
    job["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "JOB_COMPLETION_INDEX", "value": "x"}]
    job["spec"]["template"]["metadata"]["finalizers"] = [fields.JOB_TRACKING_FINALIZER, "other"]
    p = pods.pod_from_template(job, 0)
    assert p["spec"]["containers"][0]["env"] == [{"name": "JOB_COMPLETION_INDEX", "value": "x"}]
    assert p["metadata"]["finalizers"] == [fields.JOB_TRACKING_FINALIZER, "other"]


@pytest.mark.parametrize(
    ("policy", "replaced", "want"),
    [
        (None, None, (0, 0)),
        (None, mkpod("p", index=0, phase="Failed", failures=0), (1, 0)),
        (None, mkpod("p", index=0, phase="Failed", failures=2, ignored=1), (3, 1)),
        ({"rules": [{"action": "Ignore", "onPodConditions": [{"type": "Ready", "status": "False"}]}]},
         mkpod("p", index=0, phase="Failed", failures=1), (1, 1)),
    ],
)
def test_index_failure_count_annotations(policy: dict[str, Any] | None, replaced: dict[str, Any] | None,
                                         want: tuple[int, int]) -> None:
    job = mkjob(completionMode="Indexed", completions=2, backoffLimitPerIndex=3)
    if policy:
        job["spec"]["podFailurePolicy"] = policy
    assert pods.new_index_failure_counts(job, replaced) == want
    p = pods.pod_from_template(job, 0, replaced)
    assert p["metadata"]["annotations"][fields.INDEX_FAILURE_COUNT_KEY] == str(want[0])
    ignored = p["metadata"]["annotations"].get(fields.INDEX_IGNORED_FAILURE_COUNT_KEY)
    assert ignored == (str(want[1]) if want[1] else None)


@pytest.mark.parametrize(
    ("candidates", "want_first"),
    [
        ([mkpod("sched", node="n1"), mkpod("unsched")], "unsched"),
        ([mkpod("run", phase="Running"), mkpod("pend", phase="Pending")], "pend"),
        ([mkpod("ready", phase="Running", ready=True), mkpod("notready", phase="Running")], "notready"),
        ([mkpod("old", phase="Running", ready=True, ready_at="2026-11-23T08:00:00Z"),
          mkpod("new", phase="Running", ready=True, ready_at="2026-11-23T09:00:00Z")], "new"),
        ([mkpod("calm"), mkpod("crashy", restarts=3)], "crashy"),
        ([mkpod("older", created="2026-11-23T08:00:00Z"), mkpod("newer", created="2026-11-23T09:00:00Z")], "newer"),
    ],
)
def test_removal_order(candidates: list[dict[str, Any]], want_first: str) -> None:
    assert pods.sort_for_removal(candidates)[0]["metadata"]["name"] == want_first
    assert pods.sort_for_removal(reversed(candidates))[0]["metadata"]["name"] == want_first


@pytest.mark.parametrize(
    ("active", "completions", "rm_at_least", "want"),
    [
        ([("a", 0), ("b", 1)], 3, 0, []),
        ([("a", 0), ("b", 1), ("c", 2)], 3, 1, ["c"]),  # all equal: newest... ties keep order
        ([("a", 0), ("b", 0)], 3, 0, ["b"]),  # duplicate index: one goes
        ([("a", 0), ("b", None)], 3, 0, ["b"]),  # no index: goes
        ([("a", 0), ("b", 5)], 3, 0, ["b"]),  # index beyond completions: goes
        ([("a", 0), ("b", 0), ("c", 1)], 3, 2, ["b", "c"]),
    ],
)
def test_active_pods_for_removal_indexed(active: list[tuple[str, int | None]], completions: int, rm_at_least: int,
                                         want: list[str]) -> None:
    job = mkjob(completionMode="Indexed", completions=completions)
    created = {"a": "2026-11-23T08:00:00Z", "b": "2026-11-23T09:00:00Z", "c": "2026-11-23T09:30:00Z"}
    ps = [mkpod(n, index=ix, created=created[n]) for n, ix in active]
    got = [p["metadata"]["name"] for p in pods.active_pods_for_removal(job, ps, rm_at_least)]
    assert sorted(got) == sorted(want)


def test_active_pods_for_removal_non_indexed_prefers_cheapest() -> None:
    job = mkjob(completions=5)
    ps = [mkpod("running", phase="Running", node="n"), mkpod("pending"), mkpod("ready", phase="Running", node="n",
                                                                               ready=True)]
    got = [p["metadata"]["name"] for p in pods.active_pods_for_removal(job, ps, 2)]
    assert got == ["pending", "running"]


@pytest.mark.parametrize(
    ("active_ix", "succeeded", "failed", "terminating_ix", "policy", "count", "completions", "want"),
    [
        ([], "", None, [], False, 0, 5, []),
        ([], "", None, [], False, 3, 5, [0, 1, 2]),
        ([], "", None, [], False, 10, 5, [0, 1, 2, 3, 4]),
        ([0, 1], "", None, [], False, 2, 5, [2, 3]),
        ([4], "0-2", None, [], False, 5, 5, [3]),
        ([1], "0,3", "2", [], False, 5, 6, [4, 5]),
        ([], "", None, [1], False, 2, 4, [0, 1]),  # terminating index reused by default
        ([], "", None, [1], True, 2, 4, [0, 2]),  # but not when replacements wait for Failed
    ],
)
def test_first_pending_indexes(active_ix: list[int], succeeded: str, failed: str | None, terminating_ix: list[int],
                               policy: bool, count: int, completions: int, want: list[int]) -> None:
    job = mkjob(completionMode="Indexed", completions=completions)
    if policy:
        job["spec"]["podReplacementPolicy"] = "Failed"
    active = [mkpod(f"a{i}", index=i) for i in active_ix]
    terminating = [mkpod(f"t{i}", index=i, deleted=True) for i in terminating_ix]
    got = pods.first_pending_indexes(job, active + terminating, active, Intervals.parse(succeeded, completions),
                                     None if failed is None else Intervals.parse(failed, completions), count,
                                     completions)
    assert got == want


def test_pods_with_delayed_deletion_per_index() -> None:
    job = mkjob(completionMode="Indexed", completions=6, backoffLimitPerIndex=2)
    t1, t2 = "2026-11-23T10:00:01Z", "2026-11-23T10:00:02Z"
    ps = [
        mkpod("f0", index=0, phase="Failed", finished=t1),  # kept for index 0
        mkpod("f1-new", index=1, phase="Failed", failures=1, finished=t2),  # higher count and later: wins
        mkpod("f1-old", index=1, phase="Failed", failures=0, finished=t1),
        mkpod("f2-a", index=2, phase="Failed", finished=t1),
        mkpod("f2-b", index=2, phase="Failed", finished=t2),  # later finish wins
        mkpod("f3", index=3, phase="Failed", finalizer=False),  # deletion already started
        mkpod("f4", index=4, phase="Failed"), mkpod("a4", index=4, phase="Running"),  # already replaced
        mkpod("f5", index=5, phase="Failed", uid="expected"),  # finalizer removal in flight
        mkpod("f9", index=9, phase="Failed"),  # outside completions
    ]
    active = [p for p in ps if fields.is_active(p)]
    got = pods.pods_with_delayed_deletion_per_index(job, ps, active, frozenset({"expected"}), Intervals(), Intervals())
    assert {ix: p["metadata"]["name"] for ix, p in got.items()} == {0: "f0", 1: "f1-new", 2: "f2-b"}
    got = pods.pods_with_delayed_deletion_per_index(job, ps, active, frozenset(), Intervals.parse("0", 6),
                                                    Intervals.parse("1", 6))
    assert sorted(got) == [2, 5]


@pytest.mark.parametrize(
    ("selector", "lbls", "want"),
    [
        (None, {"a": "1"}, False),
        ({}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Weird"}]}, {"a": ""}, False),
    ],
)
def test_selector_matches(selector: dict[str, Any] | None, lbls: dict[str, str], want: bool) -> None:
    assert pods.selector_matches(selector, lbls) is want


def test_patches() -> None:
    job, pod = mkjob(), mkpod("p", uid="puid")
    assert pods.adopt_patch(job, pod) == {"metadata": {
        "uid": "puid", "ownerReferences": [pods.controller_owner_ref(job)],
        "finalizers": [fields.JOB_TRACKING_FINALIZER]}}
    assert pods.release_patch(job, pod) == {"metadata": {
        "uid": "puid", "ownerReferences": [{"$patch": "delete", "uid": "juid"}],
        "$deleteFromPrimitiveList/finalizers": [fields.JOB_TRACKING_FINALIZER]}}
    assert pods.remove_finalizer_patch(pod) == {
        "metadata": {"$deleteFromPrimitiveList/finalizers": [fields.JOB_TRACKING_FINALIZER]}}
    assert pods.remove_finalizer_patch(mkpod("q", finalizer=False)) is None
    bare = mkpod("q", finalizer=False)
    assert fields.has_tracking_finalizer(pods.with_tracking_finalizer(bare))
    assert not fields.has_tracking_finalizer(bare)


@pytest.mark.parametrize(
    ("restart_policy", "limit", "restarts", "want"),
    [("Never", 0, 5, False), ("OnFailure", 0, 0, False), ("OnFailure", 0, 1, True), ("OnFailure", 3, 2, False),
     ("OnFailure", 3, 3, True)],
)
def test_past_backoff_limit_on_failure(restart_policy: str, limit: int, restarts: int, want: bool) -> None:
    job = mkjob(backoffLimit=limit)
    job["spec"]["template"]["spec"]["restartPolicy"] = restart_policy
    p = mkpod("p", phase="Running", restarts=restarts)
    assert pods.past_backoff_limit_on_failure(job, [p, mkpod("done", phase="Failed", restarts=9)]) is want
