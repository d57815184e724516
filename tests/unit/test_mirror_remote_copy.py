"""Table tests for mirror/jobs/remote_copy.py: the worker-side copy, the spec patch, ownership."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mirror.identity import is_copy_of, manager_key_of
from mirror.jobs.kind import JobKind
from mirror.jobs.remote_copy import (
    build_remote_copy,
    dropped_fields,
    merge_diff,
    rewrites_template,
    spec_patch,
    template_hash,
)
from mirror.naming import (
    ANNOTATION_CLUSTER,
    ANNOTATION_ORIGIN_JOB,
    ANNOTATION_PIN,
    ANNOTATION_REMOTE_NAME,
    ANNOTATION_TEMPLATE_HASH,
    LABEL_ORIGIN,
    LABEL_ORIGIN_CLUSTER,
    LABEL_ORIGIN_UID,
)

UID = "0b5c6f0e-1111-2222-3333-444455556666"
ORIGIN = "mgr-a"
CLUSTER = "9d3c0b7e-0000-4000-8000-00000000c1a5"
GENERATED = {
    "controller-uid": UID,
    "batch.kubernetes.io/controller-uid": UID,
    "job-name": "train",
    "batch.kubernetes.io/job-name": "train",
}


def manager_job() -> dict[str, Any]:
    """A claimed Job as the manager's API server returns it, with fields no code here knows."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": UID,
            "resourceVersion": "4711",
            "generation": 3,
            "creationTimestamp": "2026-11-23T10:00:00Z",
            "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1"}],
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "cj-1",
                                 "controller": True}],
            "finalizers": ["jobmirror.dev/cleanup"],
            "labels": {"app": "train", "team": "a", "controller-uid": UID, "batch.kubernetes.io/controller-uid": UID},
            "annotations": {
                "team.example.com/owner": "alice",
                ANNOTATION_CLUSTER: "worker-1",
                ANNOTATION_REMOTE_NAME: "train",
                ANNOTATION_PIN: "worker-1",
                "kubectl.kubernetes.io/last-applied-configuration": '{"kind":"Job"}',
            },
            "futureMetadataField": {"x": [1, 2]},
        },
        "spec": {
            "managedBy": "jobmirror.dev/controller",
            "parallelism": 2,
            "completions": 4,
            "backoffLimit": 3,
            "completionMode": "NonIndexed",
            "podReplacementPolicy": "TerminatingOrFailed",
            "ttlSecondsAfterFinished": 600,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}},
            "futureSpecField": {"nested": [{"deep": True}]},
            "template": {
                "metadata": {
                    "labels": {"app": "train", **GENERATED},
                    "annotations": {"sidecar.example.com/inject": "false"},
                    "futureTemplateMetaField": "kept",
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "futureContainerField": 7}],
                    "futurePodField": {"a": "b"},
                },
            },
        },
        "status": {"active": 2, "startTime": "2026-11-23T10:00:05Z", "ready": 1},
    }


def expected_copy(remote_name: str = "train") -> dict[str, Any]:
    """The complete copy: everything the user wrote, nothing manager-only, origin marks added."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": remote_name,
            "namespace": "team-a",
            "labels": {"app": "train", "team": "a", LABEL_ORIGIN: ORIGIN, LABEL_ORIGIN_UID: UID,
                       LABEL_ORIGIN_CLUSTER: CLUSTER},
            "annotations": {"team.example.com/owner": "alice", ANNOTATION_ORIGIN_JOB: "team-a/train",
                            ANNOTATION_TEMPLATE_HASH: template_hash(manager_job())},
            "futureMetadataField": {"x": [1, 2]},
        },
        "spec": {
            "parallelism": 2,
            "completions": 4,
            "backoffLimit": 3,
            "completionMode": "NonIndexed",
            "podReplacementPolicy": "TerminatingOrFailed",
            "futureSpecField": {"nested": [{"deep": True}]},
            "template": {
                "metadata": {
                    "labels": {"app": "train"},
                    "annotations": {"sidecar.example.com/inject": "false"},
                    "futureTemplateMetaField": "kept",
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "futureContainerField": 7}],
                    "futurePodField": {"a": "b"},
                },
            },
        },
    }


def build(job: dict[str, Any] | None = None, remote_name: str = "train") -> dict[str, Any]:
    return build_remote_copy(job if job is not None else manager_job(), origin=ORIGIN, origin_cluster=CLUSTER,
                             remote_name=remote_name)


# -- build_remote_copy --------------------------------------------------------------------


@pytest.mark.parametrize("remote_name", ["train", "train-jm-1a2b3c4d"], ids=["same-name", "derived-name"])
def test_copy_is_exactly_the_user_job_without_manager_only_fields(remote_name: str) -> None:
    assert build(remote_name=remote_name) == expected_copy(remote_name)


@pytest.mark.parametrize(
    "field",
    ["uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "ownerReferences", "finalizers",
     "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"],
)
def test_manager_only_metadata_is_dropped(field: str) -> None:
    job = manager_job()
    job["metadata"].setdefault(field, "2026-11-23T11:00:00Z" if "Timestamp" in field else 30)
    assert field in job["metadata"]
    assert field not in build(job)["metadata"]


@pytest.mark.parametrize(
    ("path", "why"),
    [
        (("status",), "the worker writes its own status"),
        (("spec", "managedBy"), "the worker's Job controller must run the copy"),
        (("spec", "ttlSecondsAfterFinished"), "a worker TTL could delete the copy before its status is mirrored"),
        (("spec", "selector"), "the worker generates its own selector"),
    ],
    ids=["status", "managedBy", "ttlSecondsAfterFinished", "generated-selector"],
)
def test_fields_the_worker_must_not_see_are_dropped(path: tuple[str, ...], why: str) -> None:
    out = build()
    parent = out
    for p in path[:-1]:
        parent = parent[p]
    assert path[-1] not in parent, why


@pytest.mark.parametrize("label", sorted(GENERATED))
def test_generated_template_labels_are_dropped(label: str) -> None:
    assert label not in build()["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize("label", ["controller-uid", "batch.kubernetes.io/controller-uid"])
def test_controller_uid_labels_are_dropped_from_job_metadata(label: str) -> None:
    assert label not in build()["metadata"]["labels"]


@pytest.mark.parametrize(
    "annotation",
    [ANNOTATION_CLUSTER, ANNOTATION_REMOTE_NAME, ANNOTATION_PIN, "kubectl.kubernetes.io/last-applied-configuration"],
)
def test_our_manager_annotations_do_not_travel(annotation: str) -> None:
    assert annotation not in build()["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("metadata", "namespace"), "team-a"),
        (("metadata", "labels", "app"), "train"),
        (("metadata", "labels", "team"), "a"),
        (("metadata", "annotations", "team.example.com/owner"), "alice"),
        (("metadata", "futureMetadataField"), {"x": [1, 2]}),
        (("spec", "futureSpecField"), {"nested": [{"deep": True}]}),
        (("spec", "podReplacementPolicy"), "TerminatingOrFailed"),
        (("spec", "template", "metadata", "futureTemplateMetaField"), "kept"),
        (("spec", "template", "metadata", "labels", "app"), "train"),
        (("spec", "template", "spec", "futurePodField"), {"a": "b"}),
        (("spec", "template", "spec", "containers", 0, "futureContainerField"), 7),
    ],
    ids=["namespace", "user-label-app", "user-label-team", "user-annotation", "unknown-metadata", "unknown-spec",
         "newer-spec-field", "unknown-template-metadata", "user-template-label", "unknown-pod-field",
         "unknown-container-field"],
)
def test_user_and_unknown_fields_travel_untouched(path: tuple[str | int, ...], value: Any) -> None:
    node: Any = build()
    for p in path:
        node = node[p]
    assert node == value


@pytest.mark.parametrize(
    ("where", "key", "value"),
    [
        ("labels", LABEL_ORIGIN, ORIGIN),
        ("labels", LABEL_ORIGIN_UID, UID),
        ("labels", LABEL_ORIGIN_CLUSTER, CLUSTER),
        ("annotations", ANNOTATION_ORIGIN_JOB, "team-a/train"),
    ],
    ids=["origin", "origin-uid", "origin-cluster", "origin-job"],
)
def test_origin_marks_are_added(where: str, key: str, value: str) -> None:
    assert build()["metadata"][where][key] == value


@pytest.mark.parametrize(
    "strip",
    [("metadata", "labels"), ("metadata", "annotations"), ("spec", "template", "metadata")],
    ids=["no-labels", "no-annotations", "no-template-metadata"],
)
def test_sparse_jobs_still_get_origin_marks(strip: tuple[str, ...]) -> None:
    job = manager_job()
    parent = job
    for p in strip[:-1]:
        parent = parent[p]
    del parent[strip[-1]]
    out = build(job)
    assert out["metadata"]["labels"][LABEL_ORIGIN] == ORIGIN
    assert out["metadata"]["labels"][LABEL_ORIGIN_UID] == UID
    assert out["metadata"]["annotations"][ANNOTATION_ORIGIN_JOB] == "team-a/train"
    assert "selector" not in out["spec"] and "managedBy" not in out["spec"]


@pytest.mark.parametrize(
    ("selector_labels", "template_labels"),
    [
        ({"app": "adoptee"}, {"app": "adoptee"}),
        # The documented way to re-create a Job that adopts the old pods selects on controller-uid.
        ({"batch.kubernetes.io/controller-uid": "old-uid"},
         {"batch.kubernetes.io/controller-uid": "old-uid", "job-name": "old"}),
    ],
    ids=["user-label", "controller-uid-label"],
)
def test_manual_selector_keeps_selector_and_template_labels(selector_labels: dict[str, str],
                                                            template_labels: dict[str, str]) -> None:
    job = manager_job()
    job["spec"]["manualSelector"] = True
    job["spec"]["selector"] = {"matchLabels": dict(selector_labels)}
    job["spec"]["template"]["metadata"]["labels"] = dict(template_labels)
    out = build(job)
    assert out["spec"]["manualSelector"] is True
    assert out["spec"]["selector"] == {"matchLabels": selector_labels}
    assert out["spec"]["template"]["metadata"]["labels"] == template_labels
    # The worker's API server insists that the selector matches the template.
    for k, v in out["spec"]["selector"]["matchLabels"].items():
        assert out["spec"]["template"]["metadata"]["labels"].get(k) == v


def test_input_is_not_mutated_and_output_shares_nothing() -> None:
    job = manager_job()
    before = copy.deepcopy(job)
    out = build(job)
    assert job == before
    # Mutating the copy at every nesting level must not reach the manager object.
    out["metadata"]["labels"]["x"] = "y"
    out["metadata"]["annotations"]["x"] = "y"
    out["metadata"]["futureMetadataField"]["x"].append(3)
    out["spec"]["futureSpecField"]["nested"][0]["deep"] = False
    out["spec"]["template"]["metadata"]["labels"]["x"] = "y"
    out["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    assert job == before


# -- spec_patch ---------------------------------------------------------------------------

BASE = {"parallelism": 2, "completions": 4, "backoffLimit": 3, "template": {"spec": {"restartPolicy": "Never"}}}
IDX = {"completionMode": "Indexed", "completions": 3, "parallelism": 3}


def _spec(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    s = copy.deepcopy(base)
    for k, v in changes.items():
        if v is None:
            s.pop(k, None)
        else:
            s[k] = v
    return s


@pytest.mark.parametrize(
    ("manager", "remote", "expected"),
    [
        (BASE, BASE, None),
        (_spec(BASE, suspend=False), BASE, None),
        (BASE, _spec(BASE, suspend=False), None),
        (_spec(BASE, suspend=True), BASE, {"suspend": True}),
        (_spec(BASE, suspend=True), _spec(BASE, suspend=False), {"suspend": True}),
        (_spec(BASE, suspend=False), _spec(BASE, suspend=True), {"suspend": False}),
        (BASE, _spec(BASE, suspend=True), {"suspend": False}),
        (_spec(BASE, parallelism=5), BASE, {"parallelism": 5}),
        (_spec(BASE, parallelism=0), BASE, {"parallelism": 0}),
        (_spec(BASE, activeDeadlineSeconds=60), BASE, {"activeDeadlineSeconds": 60}),
        (_spec(BASE, activeDeadlineSeconds=30), _spec(BASE, activeDeadlineSeconds=60), {"activeDeadlineSeconds": 30}),
        (BASE, _spec(BASE, activeDeadlineSeconds=60), {"activeDeadlineSeconds": None}),
        (_spec(BASE, suspend=True, parallelism=1, activeDeadlineSeconds=9), BASE,
         {"suspend": True, "parallelism": 1, "activeDeadlineSeconds": 9}),
        # Immutable or unrelated differences never produce a patch.
        (_spec(BASE, completions=9), BASE, None),
        (_spec(BASE, backoffLimit=0), BASE, None),
        (_spec(BASE, template={"spec": {"restartPolicy": "OnFailure"}}), BASE, None),
        # Elastic Indexed Jobs: completions follows together with an equal parallelism.
        (_spec(IDX, completions=5, parallelism=5), IDX, {"completions": 5, "parallelism": 5}),
        (_spec(IDX, completions=1, parallelism=1), IDX, {"completions": 1, "parallelism": 1}),
        (IDX, IDX, None),
        # Indexed, completions differ but not in tandem with parallelism: not an elastic resize.
        (_spec(IDX, completions=5), IDX, None),
        (_spec(IDX, completions=5, parallelism=2), IDX, {"parallelism": 2}),
        # NonIndexed completions never follow.
        (_spec(BASE, completions=2, parallelism=2), _spec(BASE, completions=4, parallelism=2), None),
    ],
    ids=["equal", "suspend-false-vs-absent", "suspend-absent-vs-false", "suspend", "suspend-over-false", "resume",
         "resume-absent", "parallelism-up", "parallelism-zero", "deadline-set", "deadline-changed",
         "deadline-removed", "three-fields", "completions-nonindexed-ignored", "backoff-ignored",
         "template-ignored", "elastic-up", "elastic-down", "indexed-equal", "indexed-not-tandem",
         "indexed-parallelism-only", "nonindexed-completions-equal-parallelism"],
)
def test_spec_patch(manager: dict[str, Any], remote: dict[str, Any], expected: dict[str, Any] | None) -> None:
    m, r = {"spec": copy.deepcopy(manager)}, {"spec": copy.deepcopy(remote)}
    patch = spec_patch(m, r)
    if expected is None:
        assert patch is None
        return
    assert patch == {"spec": expected}
    # Applying the merge patch makes the mutable fields agree: a second call finds nothing to do.
    for k, v in expected.items():
        if v is None:
            r["spec"].pop(k, None)
        else:
            r["spec"][k] = v
    assert spec_patch(m, r) is None
    assert m == {"spec": manager}  # inputs untouched


def test_spec_patch_tolerates_missing_spec() -> None:
    assert spec_patch({}, {}) is None
    assert spec_patch({"spec": {"suspend": True}}, {}) == {"spec": {"suspend": True}}


# -- a copy's identity --------------------------------------------------------------------

JOB = JobKind()
MANAGER = {"metadata": {"name": "train", "namespace": "team-a", "uid": UID}}
OURS = {LABEL_ORIGIN: ORIGIN, LABEL_ORIGIN_UID: UID}


@pytest.mark.parametrize(
    ("namespace", "labels", "origin_job", "expected"),
    [
        ("team-a", OURS, "team-a/train", True),
        ("team-a", {**OURS, "app": "x"}, "team-a/train", True),
        ("team-a", {LABEL_ORIGIN: "other-manager", LABEL_ORIGIN_UID: UID}, "team-a/train", False),
        ("team-a", {LABEL_ORIGIN: ORIGIN, LABEL_ORIGIN_UID: "another-uid"}, "team-a/train", False),
        ("team-a", {LABEL_ORIGIN: ORIGIN}, "team-a/train", False),
        ("team-a", {LABEL_ORIGIN_UID: UID}, "team-a/train", False),
        ("team-a", None, "team-a/train", False),
        # The uid is right but the copy names another object, or lives in another namespace
        # (labels edited on the worker by a user of that namespace): not this Job's copy.
        ("team-a", OURS, "team-a/other", False),
        ("team-b", OURS, "team-a/train", False),
        ("team-b", OURS, "team-b/train", False),
        ("team-a", OURS, None, False),
        ("team-a", OURS, "team-a", False),
    ],
    ids=["ours", "ours-with-user-labels", "foreign-origin", "uid-mismatch", "no-uid", "no-origin", "no-labels",
         "other-name", "other-namespace", "moved-namespace", "no-origin-annotation", "no-name"],
)
def test_a_copy_is_this_jobs_only_by_origin_uid_and_namespaced_name(
        namespace: str, labels: dict[str, str] | None, origin_job: str | None, expected: bool) -> None:
    ann = {ANNOTATION_ORIGIN_JOB: origin_job} if origin_job is not None else {}
    remote = {"metadata": {"name": "train", "namespace": namespace, "labels": labels, "annotations": ann}}
    assert is_copy_of(JOB.name, remote, MANAGER, origin=ORIGIN) is expected


@pytest.mark.parametrize(("namespace", "origin_job", "key"), [
    ("team-a", "team-a/train", "team-a/train"),
    ("team-b", "team-a/train", None),  # names an object outside its namespace: claims nothing
    ("team-a", "team-a", None),
    ("team-a", "", None),
])
def test_a_copy_names_a_manager_object_only_in_its_own_namespace(namespace: str, origin_job: str,
                                                                  key: str | None) -> None:
    remote = {"metadata": {"name": "x", "namespace": namespace, "annotations": {ANNOTATION_ORIGIN_JOB: origin_job}}}
    assert manager_key_of(JOB.name, remote) == key


def test_a_built_copy_is_recognised_as_ours_only_for_its_manager() -> None:
    out = build()
    mgr = manager_job()
    assert is_copy_of(JOB.name, out, mgr, origin=ORIGIN)
    assert not is_copy_of(JOB.name, out, {"metadata": {**mgr["metadata"], "uid": "x"}}, origin=ORIGIN)
    assert not is_copy_of(JOB.name, out, mgr, origin="other")


FORGED = {LABEL_ORIGIN: "someone-else", LABEL_ORIGIN_UID: "victim-uid", LABEL_ORIGIN_CLUSTER: "victim-cluster",
          "jobmirror.dev/anything": "x"}
FORGED_ANNOTATIONS = {ANNOTATION_ORIGIN_JOB: "victims/secret", ANNOTATION_TEMPLATE_HASH: "0000",
                      "jobmirror.dev/origin-jobset": "victims/js", "jobmirror.dev/claimed-by": "x"}


def test_no_key_of_ours_travels_from_the_manager_job_to_its_copy() -> None:
    job = manager_job()
    job["metadata"]["labels"].update(FORGED)
    job["metadata"]["annotations"].update(FORGED_ANNOTATIONS)
    out = build(job)
    labels, ann = out["metadata"]["labels"], out["metadata"]["annotations"]
    assert {k: v for k, v in labels.items() if k.startswith("jobmirror.dev/")} == {
        LABEL_ORIGIN: ORIGIN, LABEL_ORIGIN_UID: UID, LABEL_ORIGIN_CLUSTER: CLUSTER}
    assert {k for k in ann if k.startswith("jobmirror.dev/")} == {ANNOTATION_ORIGIN_JOB, ANNOTATION_TEMPLATE_HASH}
    assert ann[ANNOTATION_ORIGIN_JOB] == "team-a/train" and ann[ANNOTATION_TEMPLATE_HASH] == template_hash(job)
    assert is_copy_of(JOB.name, out, manager_job(), origin=ORIGIN)


def test_keys_of_ours_added_later_never_reach_the_copy() -> None:
    job = manager_job()
    remote = build(job)
    job["metadata"]["labels"].update(FORGED)
    job["metadata"]["annotations"].update({**FORGED_ANNOTATIONS, "note": "kept"})
    patch = spec_patch(job, remote)
    assert patch == {"metadata": {"annotations": {"note": "kept"}}}


@pytest.mark.parametrize(("sent", "created", "expected"), [
    ({"spec": {"successPolicy": {"rules": [{"succeededIndexes": "0"}]}, "parallelism": 2}},
     {"spec": {"parallelism": 2, "backoffLimit": 6}}, ["spec.successPolicy"]),
    ({"spec": {"template": {"spec": {"containers": [{"name": "a", "resizePolicy": [{"x": 1}]}]}}}},
     {"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}},
     ["spec.template.spec.containers[0].resizePolicy"]),
    # defaults added, empty values omitted, values normalised: nothing lost
    ({"spec": {"selector": None, "template": {"metadata": {}, "spec": {"volumes": []}}, "x": "1000m"}},
     {"spec": {"x": "1", "template": {"spec": {"dnsPolicy": "ClusterFirst"}}}}, []),
    # a list an admission plugin changed the length of is not compared item by item
    ({"spec": {"c": [{"a": 1}]}}, {"spec": {"c": [{"b": 1}, {"a": 1}]}}, []),
    ({"spec": {"podReplacementPolicy": "Failed", "backoffLimitPerIndex": 1}}, {"spec": {}},
     ["spec.podReplacementPolicy", "spec.backoffLimitPerIndex"]),
])
def test_dropped_fields(sent: dict[str, Any], created: dict[str, Any], expected: list[str]) -> None:
    assert dropped_fields(sent, created) == expected


# -- re-admission: suspend, rewrite the template, resume (issue 11 item 8) ------------------


def _readmitted(*, copy_suspended: bool, manager_suspended: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """A manager Job whose template was rewritten after its copy was built."""
    mgr = manager_job()
    remote = build(mgr)
    remote["spec"]["suspend"] = copy_suspended
    remote["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = "worker-uid"
    mgr = copy.deepcopy(mgr)
    mgr["spec"]["suspend"] = manager_suspended
    tmpl = mgr["spec"]["template"]
    tmpl["metadata"]["labels"]["queue"] = "b"
    tmpl["spec"]["nodeSelector"] = {"pool": "b"}
    tmpl["spec"]["tolerations"] = [{"key": "pool", "operator": "Exists"}]
    return mgr, remote


def test_rewritten_template_on_suspended_copy_is_patched_and_resumed_in_one_patch() -> None:
    mgr, remote = _readmitted(copy_suspended=True, manager_suspended=False)
    patch = spec_patch(mgr, remote)
    assert patch is not None and rewrites_template(patch)
    assert patch["spec"]["suspend"] is False
    tmpl = patch["spec"]["template"]
    assert tmpl["spec"]["nodeSelector"] == {"pool": "b"}
    assert tmpl["spec"]["tolerations"] == [{"key": "pool", "operator": "Exists"}]
    assert tmpl["metadata"]["labels"] == {"queue": "b"}  # the worker's controller-uid label is left alone
    assert patch["metadata"]["annotations"][ANNOTATION_TEMPLATE_HASH] == template_hash(mgr)


def test_rewritten_template_on_running_copy_suspends_it_first() -> None:
    mgr, remote = _readmitted(copy_suspended=False, manager_suspended=False)
    assert spec_patch(mgr, remote) == {"spec": {"suspend": True}}


def test_worker_side_template_mutation_is_not_undone() -> None:
    mgr = manager_job()
    remote = build(mgr)
    remote["spec"]["template"]["spec"]["tolerations"] = [{"key": "added-by-worker-policy", "operator": "Exists"}]
    assert spec_patch(mgr, remote) is None


def test_copy_without_template_digest_is_not_rewritten() -> None:
    mgr, remote = _readmitted(copy_suspended=True, manager_suspended=True)
    del remote["metadata"]["annotations"][ANNOTATION_TEMPLATE_HASH]
    assert spec_patch(mgr, remote) is None


def test_labels_and_annotations_added_on_the_manager_reach_the_copy_but_not_ours() -> None:
    mgr = manager_job()
    remote = build(mgr)
    mgr = copy.deepcopy(mgr)
    mgr["metadata"]["labels"]["new"] = "x"
    mgr["metadata"]["annotations"].update({"note": "y", ANNOTATION_PIN: "w", "jobmirror.dev/cluster": "w"})
    mgr["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    assert spec_patch(mgr, remote) == {"metadata": {"labels": {"new": "x"}, "annotations": {"note": "y"}}}


@pytest.mark.parametrize(("old", "new", "expected"), [
    ({"a": 1, "b": 2}, {"a": 1, "c": 3}, {"b": None, "c": 3}),
    ({"a": {"x": 1, "y": 2}}, {"a": {"x": 1}}, {"a": {"y": None}}),
    ({"a": [1, 2]}, {"a": [2]}, {"a": [2]}),
    ({"a": {"x": 1}}, {"a": None}, {"a": None}),
])
def test_merge_diff(old: dict[str, Any], new: dict[str, Any], expected: dict[str, Any]) -> None:
    assert merge_diff(old, new) == expected


# -- container resources on a suspended Job (1.36+ managers) ------------------------------------

NEW_RESOURCES = {"requests": {"cpu": "2", "memory": "1Gi"}}


def _resized(*, copy_suspended: bool, digest: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A manager Job whose first container got new resources after its copy was built."""
    mgr = manager_job()
    remote = build(mgr)
    remote["spec"]["suspend"] = copy_suspended
    if digest is not None:
        remote["metadata"]["annotations"][ANNOTATION_TEMPLATE_HASH] = digest
    mgr = copy.deepcopy(mgr)
    mgr["spec"]["template"]["spec"]["containers"][0]["resources"] = NEW_RESOURCES
    return mgr, remote


def test_new_container_resources_reach_a_suspended_copy_with_the_whole_container_list() -> None:
    mgr, remote = _resized(copy_suspended=True)
    patch = spec_patch(mgr, remote)
    assert patch is not None and rewrites_template(patch)
    containers = patch["spec"]["template"]["spec"]["containers"]
    # A merge patch replaces a list whole: every container goes in full, image and all.
    assert containers == mgr["spec"]["template"]["spec"]["containers"]
    assert containers[0]["resources"] == NEW_RESOURCES and containers[0]["image"]
    assert "initContainers" not in patch["spec"]["template"]["spec"]  # unchanged lists stay out
    assert patch["metadata"]["annotations"][ANNOTATION_TEMPLATE_HASH] == template_hash(mgr)


def test_new_container_resources_suspend_a_running_copy_first() -> None:
    mgr, remote = _resized(copy_suspended=False)
    assert spec_patch(mgr, remote) == {"spec": {"suspend": True}}


@pytest.mark.parametrize(
    ("change", "rewritten"),
    [("resources", False), ("nodeSelector", True)],
    ids=["resources-only-not-followed", "scheduling-still-followed"],
)
def test_a_copy_with_a_digest_from_before_resources_counted_is_compared_the_old_way(change: str,
                                                                                    rewritten: bool) -> None:
    """Copies made before the digest covered resources must not all be rewritten after an upgrade."""
    import hashlib
    import json

    from mirror.jobs.remote_copy import SCHEDULING_FIELDS

    base = manager_job()
    base["spec"]["suspend"] = True
    tmpl = base["spec"]["template"]
    legacy = {"metadata": {"labels": {k: v for k, v in (tmpl["metadata"].get("labels") or {}).items()
                                      if k not in GENERATED},
                           "annotations": dict(tmpl["metadata"].get("annotations") or {})},
              "spec": {f: tmpl["spec"].get(f) for f in SCHEDULING_FIELDS}}
    old_digest = hashlib.sha256(json.dumps(legacy, sort_keys=True).encode()).hexdigest()[:16]
    remote = build(base)
    remote["spec"]["suspend"] = True
    remote["metadata"]["annotations"][ANNOTATION_TEMPLATE_HASH] = old_digest
    assert spec_patch(base, remote) is None  # the old digest still matches the unchanged Job
    mgr = copy.deepcopy(base)
    if change == "resources":
        mgr["spec"]["template"]["spec"]["containers"][0]["resources"] = NEW_RESOURCES
    else:
        mgr["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "c"}
    patch = spec_patch(mgr, remote)
    assert bool(patch and rewrites_template(patch)) is rewritten


def test_a_digest_kept_for_a_uid_follows_its_template() -> None:
    """The digest is kept per uid with what it was made from: a changed template under the same uid and
    generation (or changed in place) still gets its own digest, and the first comes back with it."""
    mgr = manager_job()
    first = template_hash(mgr)
    mgr["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "z"}
    changed = template_hash(mgr)
    assert changed != first
    assert changed == template_hash(copy.deepcopy(mgr))
    del mgr["spec"]["template"]["spec"]["nodeSelector"]
    assert template_hash(mgr) == first


def test_a_template_changed_in_place_gets_its_own_digest() -> None:
    """The kept directives are a copy: a list or map of the object changed in place is seen as a change."""
    mgr = manager_job()
    mgr["spec"]["template"]["spec"]["tolerations"] = [{"key": "a", "operator": "Exists"}]
    first = template_hash(mgr)
    mgr["spec"]["template"]["spec"]["tolerations"].append({"key": "b", "operator": "Exists"})
    changed = template_hash(mgr)
    assert changed != first
    fresh = copy.deepcopy(mgr)
    fresh["metadata"]["uid"] = "another-uid"  # digested afresh
    assert changed == template_hash(fresh)
