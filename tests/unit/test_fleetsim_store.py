"""The fleet simulation's API store answers as kube-apiserver where the controller depends on it
(bench/fleetsim/store.py), and its fake Job controller runs Jobs as upstream's does (jobsim.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from bench.fleetsim.jobsim import RUN_SECONDS, JobSim
from bench.fleetsim.kinds import JOBS, NAMESPACES, PODS, Kind
from bench.fleetsim.main import BACKGROUND_NAMESPACE, seed_cluster, seed_worker
from bench.fleetsim.store import Store, StoreError, Watch

Obj = dict[str, Any]
CONFIGMAPS = Kind("", "v1", "configmaps", "ConfigMap")


def store(history: int = 50_000, *namespaces: str) -> Store:
    s = Store("t", history=history)
    for ns in ("ns", *namespaces):
        s.create(NAMESPACES, None, {"metadata": {"name": ns}})
    return s


def pod(name: str, labels: dict[str, str] | None = None, phase: str = "Running", node: str = "n1") -> Obj:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"nodeName": node, "containers": []},
            "status": {"phase": phase}}


def names(raws: list[bytes]) -> list[str]:
    return [orjson.loads(r)["metadata"]["name"] for r in raws]


def events(w: Watch) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"]["name"]) for e in map(orjson.loads, w.take())]


def test_paging_walks_every_object_once_in_key_order_at_one_resource_version() -> None:
    s = store()
    for i in range(1050):
        s.create(CONFIGMAPS, "ns", {"metadata": {"name": f"cm-{i:04d}"}})
    seen, pages, cont, first_rv = [], [], None, str(s.rv)
    while True:
        page = s.list(CONFIGMAPS, "ns", limit=500, continue_=cont)
        body = orjson.loads(page.body())
        pages.append(len(body["items"]))
        seen += names(page.items)
        # every page says the first one's resourceVersion: a watch from it gets what changed meanwhile
        assert body["metadata"]["resourceVersion"] == first_rv and body["kind"] == "ConfigMapList"
        s.create(CONFIGMAPS, "ns", {"metadata": {"name": f"a-{len(pages)}"}})  # behind the cursor: not listed
        cont = body["metadata"].get("continue")
        if not cont:
            break
    assert pages == [500, 500, 50]
    assert seen == [f"cm-{i:04d}" for i in range(1050)]


def test_background_pods_page_merged_with_stored_pods_and_filtered_per_node() -> None:
    s = store()
    seed_cluster(s)
    seed_worker(s, nodes=3, pods=1000)
    s.create(PODS, BACKGROUND_NAMESPACE, pod("aaa-first"), keep_status=True)
    s.create(PODS, BACKGROUND_NAMESPACE, pod("zzz-last", phase="Succeeded"), keep_status=True)
    got, cont = [], None
    while True:
        page = s.list(PODS, None, field_selector="status.phase!=Succeeded,status.phase!=Failed", limit=300,
                      continue_=cont)
        got += names(page.items)
        cont = page.continue_
        if not cont:
            break
    assert got == ["aaa-first", *(f"bg-{i:07d}" for i in range(1000))]
    on_node = names(s.list(PODS, BACKGROUND_NAMESPACE, field_selector="spec.nodeName=fleet-node-0002").items)
    assert len(on_node) == 333 and on_node[0] == "bg-0000001"
    assert s.get(PODS, BACKGROUND_NAMESPACE, "bg-0000007").obj()["spec"]["nodeName"] == "fleet-node-0002"
    s.delete(PODS, BACKGROUND_NAMESPACE, "bg-0000007")
    assert s.count(PODS) == 1001
    with pytest.raises(StoreError) as gone:
        s.get(PODS, BACKGROUND_NAMESPACE, "bg-0000007")
    assert gone.value.code == 404


@pytest.mark.parametrize(("label_selector", "field_selector", "want"), [
    ("app=web", None, ["a", "b"]),
    ("app==web,tier!=db", None, ["a"]),
    ("app in (web, batch)", None, ["a", "b", "c"]),
    ("app notin (web)", None, ["c", "d"]),
    ("tier", None, ["b", "c"]),
    ("!tier", None, ["a", "d"]),
    (None, "metadata.name=c", ["c"]),
    (None, "status.phase!=Succeeded,status.phase!=Failed", ["a", "b", "d"]),
    ("app=web", "spec.nodeName=n2", ["b"]),
])
def test_selectors(label_selector: str | None, field_selector: str | None, want: list[str]) -> None:
    s = store()
    for p in (pod("a", {"app": "web"}), pod("b", {"app": "web", "tier": "db"}, node="n2"),
              pod("c", {"app": "batch", "tier": "x"}, phase="Succeeded"), pod("d")):
        s.create(PODS, "ns", p, keep_status=True)
    assert names(s.list(PODS, "ns", label_selector=label_selector, field_selector=field_selector).items) == want


def test_a_field_the_resource_cannot_be_selected_by_is_refused() -> None:
    with pytest.raises(StoreError) as bad:
        store().list(JOBS, None, field_selector="spec.parallelism=1")
    assert bad.value.code == 400 and "field label not supported" in bad.value.message


def test_writes_take_resource_version_preconditions_and_a_no_op_takes_none() -> None:
    s = store()
    created = s.create(JOBS, "ns", {"metadata": {"name": "a"}, "spec": {"template": {}}}).obj()
    uid = created["metadata"]["uid"]
    assert created["spec"]["selector"]["matchLabels"] == {"batch.kubernetes.io/controller-uid": uid}
    with pytest.raises(StoreError) as twice:
        s.create(JOBS, "ns", {"metadata": {"name": "a"}})
    assert twice.value.code == 409 and twice.value.reason == "AlreadyExists"
    newer = s.replace(JOBS, "ns", "a", {**created, "metadata": {**created["metadata"], "labels": {"x": "1"}}})
    with pytest.raises(StoreError) as stale:
        s.replace(JOBS, "ns", "a", created)
    assert stale.value.code == 409 and stale.value.reason == "Conflict"
    with pytest.raises(StoreError) as stale_patch:
        s.patch(JOBS, "ns", "a", {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}})
    assert stale_patch.value.code == 409
    assert s.patch(JOBS, "ns", "a", {"metadata": {"labels": {"x": "1"}}}).rv == newer.rv  # nothing changed
    with pytest.raises(StoreError) as missing:
        s.get(JOBS, "ns", "b")
    assert missing.value.code == 404 and missing.value.status()["details"]["kind"] == "jobs"
    with pytest.raises(StoreError) as no_namespace:
        s.create(JOBS, "elsewhere", {"metadata": {"name": "a"}})
    assert no_namespace.value.status()["details"]["kind"] == "namespaces"


def test_status_only_through_its_subresource_and_generation_counts_spec_changes() -> None:
    s = store()
    job = s.create(JOBS, "ns", {"metadata": {"name": "a"}, "spec": {"parallelism": 1}, "status": {"active": 9}}).obj()
    assert "status" not in job and job["metadata"]["generation"] == 1
    written = s.replace(JOBS, "ns", "a", {**job, "spec": {"parallelism": 5}, "status": {"active": 1}},
                        subresource="status").obj()
    assert written["status"] == {"active": 1} and written["spec"]["parallelism"] == 1
    main = s.patch(JOBS, "ns", "a", {"spec": {"parallelism": 2}, "status": {"active": 7}}).obj()
    assert main["status"] == {"active": 1} and main["metadata"]["generation"] == 2


def test_finalizers_hold_a_deleted_object_until_the_last_one_goes() -> None:
    s = store()
    made = s.create(JOBS, "ns", {"metadata": {"name": "a", "finalizers": ["x/y"]}})
    w = s.watch(JOBS, "ns", resource_version=str(s.rv))
    with pytest.raises(StoreError) as other:
        s.delete(JOBS, "ns", "a", {"preconditions": {"uid": "someone-else"}})
    assert other.value.code == 409
    held, gone = s.delete(JOBS, "ns", "a", {"preconditions": {"uid": made.uid}})
    assert not gone and held.obj()["metadata"]["deletionTimestamp"]
    s.patch(JOBS, "ns", "a", {"metadata": {"finalizers": None}})
    with pytest.raises(StoreError):
        s.get(JOBS, "ns", "a")
    assert events(w) == [("MODIFIED", "a"), ("DELETED", "a")]


@pytest.mark.parametrize(("policy", "pods_left"), [("Background", 0), ("Foreground", 0), ("Orphan", 1)])
def test_deleting_a_job_deletes_its_pods_unless_orphaned(policy: str, pods_left: int) -> None:
    s = store()
    job = s.create(JOBS, "ns", {"metadata": {"name": "j"}, "spec": {"template": {}}})
    s.create(PODS, "ns", {**pod("j-1"), "metadata": {"name": "j-1", "ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": job.uid, "controller": True}]}})
    _, gone = s.delete(JOBS, "ns", "j", {"propagationPolicy": policy})
    assert gone == (policy != "Foreground")
    s.collect_garbage()  # the foreground owner goes once its dependents have
    assert len(s.list(PODS, "ns").items) == pods_left and not s.list(JOBS, "ns").items


def test_a_watch_from_an_old_resource_version_gets_what_it_missed_and_a_too_old_one_410() -> None:
    s = store(5)
    s.create(CONFIGMAPS, "ns", {"metadata": {"name": "a"}})
    since = str(s.rv)
    s.create(CONFIGMAPS, "ns", {"metadata": {"name": "b"}})
    s.patch(CONFIGMAPS, "ns", "a", {"data": {"k": "v"}})
    s.delete(CONFIGMAPS, "ns", "b")
    assert events(s.watch(CONFIGMAPS, "ns", resource_version=since)) == [
        ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    for i in range(5):  # past the history's five events
        s.create(CONFIGMAPS, "ns", {"metadata": {"name": f"c{i}"}})
    with pytest.raises(StoreError) as old:
        s.watch(CONFIGMAPS, "ns", resource_version=since)
    assert old.value.code == 410 and old.value.reason == "Expired"


def test_an_object_leaving_a_watchs_selection_is_deleted_for_it_and_entering_is_added() -> None:
    s = store(50_000, "other")
    s.create(PODS, "ns", pod("p", {"app": "web"}), keep_status=True)
    s.create(PODS, "other", pod("q", {"app": "web"}), keep_status=True)
    w = s.watch(PODS, "ns", resource_version=str(s.rv), label_selector="app=web",
                field_selector="status.phase!=Succeeded")
    s.patch(PODS, "ns", "p", {"metadata": {"labels": {"app": "db"}}})
    s.patch(PODS, "ns", "p", {"metadata": {"labels": {"app": "web"}}})
    s.patch(PODS, "other", "q", {"metadata": {"labels": {"x": "1"}}})  # another namespace: not seen
    s.patch(PODS, "ns", "p", {"status": {"phase": "Succeeded"}}, subresource="status")
    assert events(w) == [("DELETED", "p"), ("ADDED", "p"), ("DELETED", "p")]


def test_a_watch_with_no_resource_version_starts_with_the_objects_as_added() -> None:
    s = store()
    s.create(CONFIGMAPS, "ns", {"metadata": {"name": "a"}})
    w = s.watch(CONFIGMAPS, "ns")
    s.create(CONFIGMAPS, "ns", {"metadata": {"name": "b"}})
    assert events(w) == [("ADDED", "a"), ("ADDED", "b")]


async def test_the_fake_job_controller_runs_a_job_to_complete_and_honours_suspend() -> None:
    s = store()
    seed_worker(s, nodes=2, pods=0)
    sim = JobSim(s, ["fleet-node-0001", "fleet-node-0002"], run_seconds=3600)
    task = asyncio.create_task(sim.run())
    try:
        s.create(JOBS, "ns", {"metadata": {"name": "quick", "annotations": {RUN_SECONDS: "0"}},
                              "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {"containers": [
                                  {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}})
        s.create(JOBS, "ns", {"metadata": {"name": "held"}, "spec": {"suspend": True, "template": {}}})
        for _ in range(100):
            await asyncio.sleep(0.01)
            quick = s.get(JOBS, "ns", "quick").obj().get("status") or {}
            if quick.get("completionTime"):
                break
        assert [(c["type"], c["status"]) for c in quick["conditions"]] == [
            ("SuccessCriteriaMet", "True"), ("Complete", "True")]
        assert quick["succeeded"] == 2 and quick["active"] == 0 and quick["uncountedTerminatedPods"] == {}
        pods = [orjson.loads(r) for r in s.list(PODS, "ns", label_selector="job-name=quick").items]
        assert {p["status"]["phase"] for p in pods} == {"Succeeded"}
        assert sorted(p["spec"]["nodeName"] for p in pods) == ["fleet-node-0001", "fleet-node-0002"]
        held = s.get(JOBS, "ns", "held").obj()["status"]
        assert held["conditions"][0]["type"] == "Suspended"
        assert not s.list(PODS, "ns", label_selector="job-name=held").items
        s.patch(JOBS, "ns", "held", {"spec": {"suspend": False}})
        await asyncio.sleep(0.05)
        running = s.get(JOBS, "ns", "held").obj()["status"]
        assert running["active"] == 1 and running["ready"] == 1 and running["startTime"]
        assert len(s.list(PODS, "ns", label_selector="job-name=held").items) == 1
    finally:
        task.cancel()
