"""``kubectl jobmirror`` and the inspect API for JobSets (issue 37 item 4), and copies identified by
``identity.is_copy_of`` rather than by the uid label alone (issue 34): tables over the pure parts,
then the reads and the API over fake clients."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from kruntime.client import ApiError
from kruntime.resources import JOBS, PODS, Obj, Resource
from mirror.cli import build_parser
from mirror.inspect import api, kinds, plugin, reads
from mirror.jobs.kind import JOB_KIND
from mirror.jobsets.kind import JOBSET_KIND, JOBSETS
from mirror.naming import ANNOTATION_CLAIMED_BY, ANNOTATION_CLUSTER, LABEL_ORIGIN, LABEL_ORIGIN_UID, origin_annotation

ORIGIN = "jobmirror-abc"
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def manager_jobset(name: str = "train", ns: str = "ml", uid: str = "m-uid", **status: Any) -> Obj:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": ns, "uid": uid,
                         "annotations": {ANNOTATION_CLUSTER: "worker-1", ANNOTATION_CLAIMED_BY: ORIGIN}},
            "spec": {"managedBy": "jobmirror.dev/controller", "replicatedJobs": [
                {"name": "leader", "replicas": 1, "template": {"spec": {"parallelism": 1, "template": POD_TEMPLATE}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2,
                                                                          "template": POD_TEMPLATE}}}]},
            "status": status}


POD_TEMPLATE = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}


def copy_of(manager: Obj, kind: str = "JobSet", *, origin: str = ORIGIN, uid: str | None = None,
            names: str | None = None, ns: str | None = None) -> Obj:
    md = manager["metadata"]
    ns = ns or md["namespace"]
    return {"metadata": {"name": md["name"], "namespace": ns, "uid": "copy-uid",
                         "labels": {LABEL_ORIGIN: origin, LABEL_ORIGIN_UID: uid or md["uid"]},
                         "annotations": {origin_annotation(kind): names or f"{ns}/{md['name']}"}},
            "status": {"restarts": 1}}


def jobset_pod(name: str, rjob: str, index: int, created: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ml", "uid": f"p-{name}", "creationTimestamp": created,
                         "labels": {"jobset.sigs.k8s.io/jobset-name": "train",
                                    "jobset.sigs.k8s.io/jobset-uid": "copy-uid",
                                    reads.REPLICATED_JOB_LABEL: rjob, reads.JOB_INDEX_LABEL: str(index)}},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}


# -- naming a kind as kubectl does ---------------------------------------------------------------


@pytest.mark.parametrize(("ref", "kind", "name"), [
    ("hello", JOB_KIND, "hello"),
    ("job/hello", JOB_KIND, "hello"),
    ("jobs.batch/hello", JOB_KIND, "hello"),
    ("jobset/train", JOBSET_KIND, "train"),
    ("JobSet/train", JOBSET_KIND, "train"),
    ("jobsets/train", JOBSET_KIND, "train"),
    ("jobset.jobset.x-k8s.io/train", JOBSET_KIND, "train"),
])
def test_a_target_is_name_or_type_slash_name(ref: str, kind: Any, name: str) -> None:
    assert kinds.parse_ref(ref) == (kind, name)


@pytest.mark.parametrize(("ref", "message"), [
    ("deployment/web", "resource type 'deployment' is not mirrored by jobmirror (one of: job, jobs, jobset, jobsets)"),
    ("jobset/", "expected NAME or TYPE/NAME"),
    ("jobset/a/b", "expected NAME or TYPE/NAME"),
])
def test_a_bad_target_names_what_is_wrong(ref: str, message: str) -> None:
    with pytest.raises(kinds.UnknownKind, match=re.escape(message)):
        kinds.parse_ref(ref)
    with pytest.raises(plugin.UsageError, match=re.escape(message)):
        plugin.target_ref(ref)


def test_the_api_serves_each_kind_under_its_plural() -> None:
    assert kinds.by_plural("jobsets") is JOBSET_KIND and kinds.by_plural("jobs") is JOB_KIND
    assert kinds.by_plural("deployments") is None
    assert api.target_of({"namespace": "ml", "name": "train", "plural": "jobsets"}) == ("ml", "train")
    with pytest.raises(Exception, match="jobset name"):
        api.target_of({"namespace": "ml", "name": "..", "plural": "jobsets"})


def test_the_review_asks_get_on_that_jobset() -> None:
    assert api.job_access("ml", "train", JOBSETS) == {"verb": "get", "group": "jobset.x-k8s.io",
                                                      "version": "v1alpha2", "resource": "jobsets",
                                                      "namespace": "ml", "name": "train"}
    assert api.job_access("ml", "hello")["resource"] == "jobs"


# -- which object is the copy --------------------------------------------------------------------


@pytest.mark.parametrize(("copy_kw", "ours"), [
    ({}, True),
    ({"origin": "another-install"}, False),                   # another installation's copy of a same-uid object
    ({"uid": "someone-else"}, False),
    ({"names": "ml/other"}, False),                           # right uid label, files itself under another object
    ({"ns": "elsewhere", "names": "ml/train"}, False),        # names an object outside its own namespace
])
def test_a_copy_counts_only_when_origin_uid_and_name_agree(copy_kw: dict[str, Any], ours: bool) -> None:
    manager = manager_jobset()
    assert reads.is_copy(JOBSET_KIND, copy_of(manager, **copy_kw), manager) is ours


def test_without_the_claimed_by_stamp_uid_and_name_still_decide() -> None:
    manager = manager_jobset()
    del manager["metadata"]["annotations"][ANNOTATION_CLAIMED_BY]
    assert reads.is_copy(JOBSET_KIND, copy_of(manager, origin="whatever"), manager)
    assert not reads.is_copy(JOBSET_KIND, copy_of(manager, names="ml/other"), manager)


def test_a_job_copy_is_checked_against_the_job_annotation() -> None:
    job = manager_jobset()
    job["kind"] = "Job"
    assert reads.is_copy(JOB_KIND, copy_of(job, "Job"), job)
    assert not reads.is_copy(JOB_KIND, copy_of(job, "JobSet"), job), "a JobSet's annotation names no Job"


# -- choosing the pod ----------------------------------------------------------------------------


PODS_OF_COPY = [jobset_pod("train-leader-0-0-a", "leader", 0, "2026-11-26T10:00:00Z"),
                jobset_pod("train-workers-0-0-b", "workers", 0, "2026-11-26T10:00:01Z"),
                jobset_pod("train-workers-1-0-c", "workers", 1, "2026-11-26T10:00:02Z"),
                jobset_pod("train-workers-1-1-d", "workers", 1, "2026-11-26T10:00:03Z")]


@pytest.mark.parametrize(("rjob", "index", "pod"), [
    ("leader", None, "train-leader-0-0-a"),
    ("workers", None, "train-workers-1-1-d"),   # the newest of the replicatedJob's
    ("workers", 0, "train-workers-0-0-b"),
    ("workers", 1, "train-workers-1-1-d"),
    ("workers", 2, None),
    ("nobody", None, None),
    (None, None, "train-workers-1-1-d"),
])
def test_pick_pod_by_replicated_job_and_job_index(rjob: str | None, index: int | None, pod: str | None) -> None:
    picked = reads.pick_pod(PODS_OF_COPY, index, rjob)
    assert (picked and picked["metadata"]["name"]) == pod


def test_a_jobset_pods_summary_says_where_it_belongs() -> None:
    summary = reads.pod_summary(PODS_OF_COPY[2])
    assert (summary["replicatedJob"], summary["jobIndex"]) == ("workers", "1")
    job_pod = {"metadata": {"name": "p", "annotations": {reads.INDEX_ANNOTATION: "3"}}, "status": {}}
    assert "replicatedJob" not in reads.pod_summary(job_pod)


@pytest.mark.parametrize(("req", "kind", "problem"), [
    (reads.LogRequest(replicated_job="workers", index=1), JOBSET_KIND, None),
    (reads.LogRequest(), JOBSET_KIND, None),
    (reads.LogRequest(index=1), JOBSET_KIND, "--index on a JobSet needs --replicated-job NAME"),
    (reads.LogRequest(replicated_job="workers"), JOB_KIND, "--replicated-job is for a JobSet's pods"),
    (reads.LogRequest(index=1), JOB_KIND, None),
])
def test_log_requests_that_cannot_be_asked_of_the_kind(req: reads.LogRequest, kind: Any, problem: str | None) -> None:
    got = req.problem(kind)
    assert got == problem if problem is None else got is not None and got.startswith(problem)


def test_log_request_carries_the_replicated_job() -> None:
    assert api.log_request({"replicatedJob": "workers", "index": "1"}) == reads.LogRequest(
        index=1, replicated_job="workers")


# -- what the plugin prints ----------------------------------------------------------------------


def test_a_jobset_row_sums_its_child_jobs() -> None:
    js = manager_jobset(restarts=2, replicatedJobsStatus=[
        {"name": "leader", "ready": 1, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0},
        {"name": "workers", "ready": 1, "succeeded": 1, "failed": 1, "active": 1, "suspended": 0}])
    row = plugin.jobset_row(js, NOW)
    assert {k: row[k] for k in ("jobset", "worker", "state", "succeeded", "failed", "active", "restarts")} == {
        "jobset": "ml/train", "worker": "worker-1", "state": "Running", "succeeded": 2, "failed": 1, "active": 1,
        "restarts": 2}
    done = manager_jobset(terminalState="Completed")
    assert plugin.jobset_row(done, NOW)["state"] == "Completed"
    table = plugin.format_jobsets([row]).splitlines()
    assert table[0].split()[:3] == ["JOBSET", "WORKER", "STATE"] and "RESTARTS" in table[0]
    assert table[1].split()[:8] == ["ml/train", "worker-1", "Running", "2", "1", "1", "2", "-"]


def test_describe_shows_a_jobsets_status_by_replicated_job() -> None:
    rjobs = [{"name": "workers", "ready": 0, "succeeded": 2, "failed": 0, "active": 0, "suspended": 0}]
    js = manager_jobset(restarts=0, replicatedJobsStatus=rjobs)
    copy = {"name": "train", "namespace": "ml", "uid": "copy-uid",
            "status": {"restarts": 0, "replicatedJobsStatus": rjobs, "terminalState": "Completed"}}
    view = {"worker": "worker-1", "copy": copy, "events": [],
            "pods": [reads.pod_summary(p) for p in PODS_OF_COPY[:1]]}
    text = plugin.format_describe(js, view, None, [], NOW, kind=JOBSET_KIND)
    assert "Kind:        JobSet (jobset.x-k8s.io/v1alpha2)" in text
    assert "Events on the manager JobSet:" in text and "train-leader-0-0-a" in text
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ")}
    assert lines["workers"].split()[1:] == ["succeeded=2", "succeeded=2"]
    assert lines["terminalState"].split()[1:] == ["-", "Completed"]


def test_the_proxy_path_names_the_kind() -> None:
    t = plugin.Target(manager=None, namespace="ml", controller_name="c",  # type: ignore[arg-type]
                      inspect_service="jobmirror-system/https:jobmirror-inspect:inspect")
    assert plugin._inspect_path(t, "ml", "train", "logs", JOBSET_KIND).endswith(
        "/proxy/v1/namespaces/ml/jobsets/train/logs")
    assert plugin._inspect_path(t, "ml", "hello", "describe").endswith("/proxy/v1/namespaces/ml/jobs/hello/describe")


def test_the_cli_takes_the_jobset_flags() -> None:
    args = build_parser().parse_args(["logs", "jobset/train", "--replicated-job", "workers", "--index", "1"])
    assert (args.job, args.replicated_job, args.index) == ("jobset/train", "workers", 1)
    assert build_parser().parse_args(["status", "--kind", "jobset"]).kind == "jobset"


# -- over fake clients ---------------------------------------------------------------------------


class FakeCluster:
    """get/list/create over a dict of objects by (plural, namespace, name); records what was asked."""

    def __init__(self, objects: list[tuple[Resource, Obj]], *, not_served: tuple[str, ...] = ()) -> None:
        self.objects = {(r.plural, o["metadata"].get("namespace"), o["metadata"]["name"]): o for r, o in objects}
        self.not_served = not_served
        self.asked: list[tuple[str, Any]] = []
        self.timeout = 5.0

    def _served(self, resource: Resource) -> None:
        if resource.plural in self.not_served:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")

    async def get(self, resource: Resource, ns: str | None, name: str) -> Obj:
        self._served(resource)
        self.asked.append(("get", (resource.plural, ns, name)))
        try:
            return self.objects[(resource.plural, ns, name)]
        except KeyError:
            raise ApiError(404, "NotFound", f"{resource.plural} {name!r} not found") from None

    async def list(self, resource: Resource, ns: str | None, label_selector: str = "",
                   field_selector: str = "") -> Obj:
        self._served(resource)
        self.asked.append(("list", (resource.plural, label_selector or field_selector)))
        key, _, value = label_selector.partition("=")
        items = [o for (plural, n, _), o in self.objects.items() if plural == resource.plural
                 and (ns is None or n == ns) and (not key or (o["metadata"].get("labels") or {}).get(key) == value)]
        return {"items": items}

    async def list_all(self, resource: Resource, ns: str | None, **kw: str) -> tuple[list[Obj], str]:
        return (await self.list(resource, ns, **kw))["items"], "1"

    async def create(self, resource: Resource, ns: str | None, body: Obj) -> Obj:
        self.asked.append(("create", body))
        if body["kind"] == "TokenReview":
            return {"status": {"authenticated": True, "user": {"username": "alice", "groups": ["team"]}}}
        return {"status": {"allowed": True}}

    async def close(self) -> None:
        return None


async def test_find_copy_refuses_a_forged_copy_with_the_right_uid_label() -> None:
    manager = manager_jobset()
    forged = copy_of(manager, names="ml/other")  # what the uid-only check took for the copy
    worker = FakeCluster([(JOBSETS, forged)])
    assert await reads.find_copy(worker, manager, JOBSET_KIND) is None  # type: ignore[arg-type]
    real = FakeCluster([(JOBSETS, copy_of(manager))])
    assert (await reads.find_copy(real, manager, JOBSET_KIND))["metadata"]["uid"] == "copy-uid"  # type: ignore
    assert real.asked == [("get", ("jobsets", "ml", "train"))]


async def test_the_worker_view_of_a_jobset_lists_its_pods_by_the_jobset_uid() -> None:
    manager = manager_jobset()
    worker = FakeCluster([(JOBSETS, copy_of(manager)), *((PODS, p) for p in PODS_OF_COPY)])
    view = await reads.worker_view(worker, "worker-1", manager, JOBSET_KIND)  # type: ignore[arg-type]
    assert [p["name"] for p in view["pods"]] == sorted(p["metadata"]["name"] for p in PODS_OF_COPY)
    assert ("list", ("pods", "jobset.sigs.k8s.io/jobset-uid=copy-uid")) in worker.asked


def _args(**kw: Any) -> argparse.Namespace:
    base = {"worker": None, "state": None, "output": None, "kind": None}
    return argparse.Namespace(**{**base, **kw})


async def test_status_shows_a_table_per_kind_and_skips_an_unserved_jobset_api() -> None:
    job = {"metadata": {"name": "hello", "namespace": "ml", "uid": "j", "annotations": {}},
           "spec": {"managedBy": "jobmirror.dev/controller"}}
    manager = FakeCluster([(JOBS, job), (JOBSETS, manager_jobset())])
    t = plugin.Target(manager=manager, namespace="ml", controller_name="jobmirror.dev/controller")  # type: ignore
    out: list[str] = []
    assert await plugin.status(t, _args(), out.append) == 0
    text = "\n".join(out)
    assert "JOB " in text and "ml/hello" in text and "1 claimed Jobs" in text
    assert "JOBSET " in text and "ml/train" in text and "1 claimed JobSets, 1 unfinished" in text

    out.clear()
    assert await plugin.status(t, _args(kind="jobset"), out.append) == 0
    assert "ml/hello" not in "\n".join(out) and "ml/train" in "\n".join(out)

    t.manager = FakeCluster([(JOBS, job)], not_served=("jobsets",))  # type: ignore[assignment]
    out.clear()
    assert await plugin.status(t, _args(), out.append) == 0
    assert "JOBSET" not in "\n".join(out), "no JobSet API, no JobSet table"
    with pytest.raises(plugin.UsageError, match=r"serves no jobsets\.jobset\.x-k8s\.io"):
        await plugin.status(t, _args(kind="jobset"), out.append)


async def test_the_inspect_api_describes_a_jobset_to_a_user_who_may_get_it() -> None:
    manager_obj = manager_jobset()
    manager = FakeCluster([(JOBSETS, manager_obj)])
    worker = FakeCluster([(JOBSETS, copy_of(manager_obj)), *((PODS, p) for p in PODS_OF_COPY)])
    server = api.InspectApi("127.0.0.1:0", manager, {"worker-1": worker},  # type: ignore[arg-type]
                            "jobmirror.dev/controller")
    port = await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            base = f"http://127.0.0.1:{port}/v1/namespaces/ml"
            headers = {api.TOKEN_HEADER: "t"}
            async with http.get(f"{base}/jobsets/train/describe", headers=headers) as resp:
                assert resp.status == 200, await resp.text()
                view = await resp.json()
            async with http.get(f"{base}/jobsets/train/logs", params={"index": "1"}, headers=headers) as resp:
                assert resp.status == 400 and "--replicated-job" in (await resp.json())["error"]
            async with http.get(f"{base}/deployments/train/describe", headers=headers) as resp:
                assert resp.status == 404
    finally:
        await server.stop()
    assert view["copy"]["uid"] == "copy-uid" and len(view["pods"]) == len(PODS_OF_COPY)
    reviewed = [b["spec"]["resourceAttributes"] for verb, b in manager.asked
                if verb == "create" and b["kind"] == "SubjectAccessReview"]
    assert reviewed[0] == api.job_access("ml", "train", JOBSETS)
    assert reviewed[1] == api.pod_read_access("ml"), "the pods of a JobSet's copy need get pods, as a Job's"
