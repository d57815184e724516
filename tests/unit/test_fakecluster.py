"""The fake API server is honest where the reconciler depends on it (testkit/fakecluster.py)."""

from __future__ import annotations

import asyncio

import pytest

from kruntime.client import ApiError
from kruntime.informer import Informer
from kruntime.resources import JOBS, NAMESPACES, Obj
from testkit.fakecluster import FakeApiServer, field_selector_matches, label_selector_matches, merge_patch


def body(name: str = "a", **spec: object) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"parallelism": 1, **spec}, "status": {"active": 9}}


async def test_writes_carry_resource_version_preconditions() -> None:
    c = FakeApiServer().client()
    created = await c.create(JOBS, "ns", body())
    assert created["metadata"]["uid"] and created["metadata"]["generation"] == 1
    assert "status" not in created  # a create starts with no status
    rv = created["metadata"]["resourceVersion"]
    patched = await c.patch(JOBS, "ns", "a", {"metadata": {"resourceVersion": rv, "labels": {"x": "1"}}})
    assert patched["metadata"]["resourceVersion"] != rv and patched["metadata"]["labels"] == {"app": "a", "x": "1"}
    with pytest.raises(ApiError) as stale:
        await c.patch(JOBS, "ns", "a", {"metadata": {"resourceVersion": rv, "labels": {"x": "2"}}})
    assert stale.value.conflict
    with pytest.raises(ApiError) as stale_put:
        await c.replace(JOBS, "ns", "a", created)
    assert stale_put.value.conflict
    with pytest.raises(ApiError) as twice:
        await c.create(JOBS, "ns", body())
    assert twice.value.already_exists
    with pytest.raises(ApiError) as missing:
        await c.get(JOBS, "ns", "b")
    assert missing.value.not_found


async def test_status_only_through_its_subresource_and_generation_counts_spec_changes() -> None:
    c = FakeApiServer().client()
    created = await c.create(JOBS, "ns", body())
    written = await c.replace(JOBS, "ns", "a", {**created, "status": {"active": 1}}, subresource="status")
    assert written["status"] == {"active": 1} and written["metadata"]["generation"] == 1
    main = await c.replace(JOBS, "ns", "a", {**written, "spec": {"parallelism": 2}, "status": {"active": 7}})
    assert main["status"] == {"active": 1} and main["metadata"]["generation"] == 2
    spec_ignored = await c.patch(JOBS, "ns", "a", {"spec": {"parallelism": 5}}, subresource="status")
    assert spec_ignored["spec"] == {"parallelism": 2}


async def test_delete_honours_finalizers_and_uid_preconditions() -> None:
    server = FakeApiServer()
    c = server.client()
    created = await c.create(JOBS, "ns", {**body(), "metadata": {"name": "a", "finalizers": ["x/y"]}})
    with pytest.raises(ApiError) as other:
        await c.delete(JOBS, "ns", "a", uid="someone-else")
    assert other.value.conflict
    held = await c.delete(JOBS, "ns", "a", uid=created["metadata"]["uid"])
    assert held["metadata"]["deletionTimestamp"]  # kept while a finalizer remains
    await c.patch(JOBS, "ns", "a", {"metadata": {"finalizers": []}})
    assert server.stored(JOBS.path("ns", "a")) is None
    await c.create(JOBS, "ns", body("f"))
    fg = await c.delete(JOBS, "ns", "f", propagation="Foreground")
    assert fg["kind"] == "Job" and "foregroundDeletion" in fg["metadata"]["finalizers"]
    server.collect_garbage()
    assert server.stored(JOBS.path("ns", "f")) is None
    await c.create(JOBS, "ns", body("g"))
    assert (await c.delete(JOBS, "ns", "g"))["kind"] == "Status"


async def test_a_create_in_a_missing_namespace_names_the_namespace() -> None:
    server = FakeApiServer(require_namespaces=True)
    c = server.client()
    with pytest.raises(ApiError) as exc:
        await c.create(JOBS, "team-a", body())
    assert exc.value.not_found and exc.value.body["details"]["kind"] == "namespaces"
    await c.create(NAMESPACES, None, {"metadata": {"name": "team-a"}})
    assert (await c.create(JOBS, "team-a", body()))["metadata"]["namespace"] == "team-a"


async def test_an_informer_lists_and_watches_it_with_selectors() -> None:
    server = FakeApiServer()
    c = server.client()
    await c.create(JOBS, "ns", body("a"))
    informer = Informer(c, JOBS, label_selector="app=b")
    task = asyncio.create_task(informer.run())
    try:
        await informer.wait_synced(2)
        assert informer.items() == []
        await c.create(JOBS, "ns", body("b"))
        for _ in range(10):
            await asyncio.sleep(0)
        assert informer.get("ns/b") is not None and informer.get("ns/a") is None
        await c.delete(JOBS, "ns", "b")
        for _ in range(10):
            await asyncio.sleep(0)
        assert informer.get("ns/b") is None
    finally:
        task.cancel()
    server.compact()
    with pytest.raises(ApiError) as gone:
        async for _ in c.watch(JOBS, None, resource_version="1"):
            pass
    assert gone.value.gone


async def test_reactors_inject_faults_and_calls_are_recorded() -> None:
    server = FakeApiServer()
    server.react(lambda method, path, _: ApiError(403, "Forbidden", "quota") if method == "POST" else None)
    c = server.client("w")
    with pytest.raises(ApiError) as refused:
        await c.create(JOBS, "ns", body())
    assert refused.value.status == 403 and refused.value.cluster == "w"
    assert server.count("POST", "/jobs") == 1


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [("a=1", {"a": "1"}, True), ("a=1", {"a": "2"}, False), ("a!=1", {}, True), ("a", {"a": ""}, True),
     ("!a", {"a": "x"}, False), ("a==1,b", {"a": "1"}, False), ("", {}, True)],
)
def test_label_selectors(selector: str, labels: dict[str, str], want: bool) -> None:
    assert label_selector_matches(selector, labels) is want


def test_field_selectors_and_merge_patch() -> None:
    pod = {"metadata": {"namespace": "ns"}, "status": {"phase": "Running"}}
    assert field_selector_matches("metadata.namespace=ns,status.phase!=Failed", pod)
    assert not field_selector_matches("status.phase=Pending", pod)
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None}, "l": [2]}) == {"a": {"c": 2}, "l": [2]}
