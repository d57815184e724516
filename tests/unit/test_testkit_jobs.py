"""testkit.jobs.make_job, the one Job builder of the tests, e2e and benchmarks: the shape every caller relied on
before it was one function."""

from __future__ import annotations

from testkit.jobs import KWOK_DURATION, KWOK_EXIT_CODE, KWOK_OUTCOME, make_job


def test_the_default_is_a_claimed_kwok_job_that_succeeds_after_half_a_second() -> None:
    assert make_job("j") == {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {
        "template": {"metadata": {"labels": {}, "annotations": {KWOK_DURATION: "500ms"}},
                     "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}},
        "parallelism": 1, "backoffLimit": 6, "completions": 1, "managedBy": "jobmirror.dev/controller"}}


def test_without_kwok_the_template_has_no_metadata_and_none_counts_are_left_out() -> None:
    job = make_job("j", managed_by=None, kwok=False, container_name="c", completions=None, parallelism=None,
                   backoff_limit=None)
    assert job["spec"] == {"template": {"spec": {"restartPolicy": "Never",
                                                 "containers": [{"name": "c", "image": "busybox"}]}}}


def test_every_option_lands_where_the_api_reads_it() -> None:
    job = make_job("j", namespace="ns", labels={"l": "1"}, annotations={"a": "1"}, suspend=True, indexed=True,
                   success_policy={"rules": []}, pod_failure_policy={"rules": []}, outcome="fail", exit_code=3,
                   duration_ms=20, pod_labels={"p": "1"}, pod_annotations={KWOK_DURATION: "1s"}, image="img",
                   command=["sh"], requests={"cpu": "1"}, limits={"memory": "1Gi"}, container={"args": ["x"]},
                   pod_spec={"nodeSelector": {"n": "1"}}, extra_spec={"ttlSecondsAfterFinished": 5})
    spec, tmpl = job["spec"], job["spec"]["template"]
    assert job["metadata"] == {"name": "j", "namespace": "ns", "labels": {"l": "1"}, "annotations": {"a": "1"}}
    assert (spec["suspend"], spec["completionMode"], spec["ttlSecondsAfterFinished"]) == (True, "Indexed", 5)
    assert spec["successPolicy"] == spec["podFailurePolicy"] == {"rules": []}
    assert tmpl["metadata"] == {"labels": {KWOK_OUTCOME: "fail", "p": "1"},
                                "annotations": {KWOK_DURATION: "1s", KWOK_EXIT_CODE: "3"}}
    assert tmpl["spec"]["nodeSelector"] == {"n": "1"}
    assert tmpl["spec"]["containers"] == [{"name": "main", "image": "img", "command": ["sh"], "args": ["x"],
                                           "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}}]
