"""A worker's room kept from node and pod watches (mirror/room/view.py), on a fake API server.

The watches are the real informers over testkit's in-memory server: pods are bound, finish,
are deleted, nodes are cordoned — and the fit a Job would get follows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kruntime.resources import NODES, PODS, Obj
from mirror import metrics
from mirror.room.requests import PodShape, shape_of_template
from mirror.room.view import RoomView, free_summary, room_totals, rooms_of, slim_pod
from testkit.fakecluster import FakeApiServer

GPU = "example.com/gpu"


def node(name: str, cpu: str = "4", extra: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {}, "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110", **(extra or {})},
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, node_name: str | None, cpu: str, phase: str = "Running") -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec, "status": {"phase": phase}}


def shape(cpu: str, extra: dict[str, str] | None = None) -> PodShape:
    return shape_of_template({"spec": {"containers": [{"name": "c", "resources": {"requests": {
        "cpu": cpu, **(extra or {})}}}]}})


@pytest.fixture
async def room() -> AsyncIterator[tuple[FakeApiServer, RoomView]]:
    server = FakeApiServer()
    for n in (node("n1"), node("n2", extra={GPU: "2"})):
        server.seed(NODES.path(), n)
    view = RoomView("w1", server.client("w1"))
    tasks = [asyncio.create_task(i.run()) for i in view.informers()]
    await asyncio.gather(*(i.wait_synced(2) for i in view.informers()))
    yield server, view
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_bound_pods_take_room_and_give_it_back_when_they_end(room: tuple[FakeApiServer, RoomView]) -> None:
    server, view = room
    c = server.client("kubelet")
    await c.create(PODS, "ns", pod("a", "n1", "3"))
    await c.create(PODS, "ns", pod("b", "n2", "3500m"))
    await settle()
    three = shape("3")
    assert view.fit(three, 1).now == 0 and view.fit(three, 1).ever  # 1 and 0.5 cpu left
    assert "largest free node has 1 cpu < 3 cpu requested" in view.fit(three, 1).why
    done = await c.get(PODS, "ns", "a")
    await c.replace(PODS, "ns", "a", {**done, "status": {"phase": "Succeeded"}}, subresource="status")
    await settle()
    assert view.fit(three, 1).now == 1  # a finished pod frees its node (the watch says DELETED)
    await c.delete(PODS, "ns", "b")
    await settle()
    assert view.fit(three, 2).now == 2


async def test_pending_pods_are_counted_and_binding_moves_them(room: tuple[FakeApiServer, RoomView]) -> None:
    server, view = room
    c = server.client("scheduler")
    await c.create(PODS, "ns", pod("p", None, "1"))
    await settle()
    assert view.pending == 1 and view.totals()["requested"] == {}
    await c.patch(PODS, "ns", "p", {"spec": {"nodeName": "n1"}})
    await settle()
    assert view.pending == 0 and view.totals()["requested"] == {"cpu": 1000}


async def test_a_job_that_needs_what_no_node_has_never_fits(room: tuple[FakeApiServer, RoomView]) -> None:
    server, view = room
    assert view.fit(shape("1", {GPU: "1"}), 1).now == 1  # n2 has GPUs
    assert not view.fit(shape("1", {"example.com/fpga": "1"}), 1).ever
    assert view.fit(shape("1", {"example.com/fpga": "1"}), 1).why == "no node has example.com/fpga"
    await server.client("admin").patch(NODES, None, "n2", {"spec": {"unschedulable": True}})
    await settle()
    cordoned = view.fit(shape("1", {GPU: "1"}), 1)
    assert cordoned.ever and cordoned.now == 0  # cordoned: it could run there again, not now


def test_a_cached_pod_keeps_only_what_the_fit_needs() -> None:
    p = pod("a", "n1", "250m")
    p["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    p["spec"]["containers"][0]["env"] = [{"name": "BIG", "value": "x" * 10_000}]
    p["metadata"].update(uid="u", resourceVersion="7", labels={"a": "b"}, annotations={"big": "y" * 10_000})
    assert slim_pod(p) == {"metadata": {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
                           "job": "", "nodeName": "n1", "requests": {"cpu": 250}, "ports": [("TCP", 8080, "")]}


async def test_capacity_gauges_follow_the_view(room: tuple[FakeApiServer, RoomView]) -> None:
    server, view = room
    await server.client("kubelet").create(PODS, "ns", pod("a", "n1", "1500m"))
    await server.client("scheduler").create(PODS, "ns", pod("p", None, "1"))
    await settle()
    view.export()
    assert metrics.WORKER_ALLOCATABLE.labels("w1", "cpu")._value.get() == 8000
    assert metrics.WORKER_REQUESTED.labels("w1", "cpu")._value.get() == 1500
    assert metrics.WORKER_ALLOCATABLE.labels("w1", GPU)._value.get() == 2
    assert metrics.WORKER_REQUESTED.labels("w1", GPU)._value.get() == 0
    assert metrics.WORKER_PODS_PENDING.labels("w1")._value.get() == 1


def test_a_one_off_read_gives_the_same_rooms_and_the_free_summary() -> None:
    nodes = [node("n1"), node("n2", extra={GPU: "2"})]
    pods = [pod("a", "n1", "1500m"), pod("b", "n2", "500m"), pod("p", None, "1")]
    rooms, pending = rooms_of(nodes, pods)
    assert pending == 1 and {r.name: r.requested for r in rooms} == {"n1": {"cpu": 1500}, "n2": {"cpu": 500}}
    assert free_summary(room_totals(rooms), pending) == (
        f"cpu 6/8 free, {GPU} 2/2 free, memory 16Gi/16Gi free; 1 pod pending")


def job_pod(name: str, job: str, node_name: str | None, cpu: str) -> Obj:
    p = pod(name, node_name, cpu)
    p["metadata"]["labels"] = {"batch.kubernetes.io/job-name": job}
    return p


async def test_room_is_held_for_a_placed_copy_until_its_pods_are_bound(room: tuple[FakeApiServer, RoomView]) -> None:
    """Between placement and binding the nodes look free; the reservation stands in for the pods."""
    server, view = room
    view.reserve("u1", "ns", "big", shape("3"), 2)
    assert view.fit(shape("2"), 2).now == 0  # 3 cpu held on each 4-cpu node: 1 cpu left on each
    c = server.client("kubelet")
    await c.create(PODS, "ns", job_pod("big-a", "big", None, "3"))  # created, not bound: still held
    await settle()
    assert view.fit(shape("2"), 2).now == 0
    await c.delete(PODS, "ns", "big-a")  # the scheduler binds them (here: re-made bound)
    await c.create(PODS, "ns", job_pod("big-a", "big", "n2", "3"))
    await c.create(PODS, "ns", job_pod("big-b", "big", "n1", "3"))
    await settle()
    assert view.fit(shape("2"), 2).now == 0  # the bound pods take the room now
    assert "u1" not in view.reserved  # and the reservation is gone (no double count)
    await c.delete(PODS, "ns", "big-a")
    await settle()
    assert view.fit(shape("2"), 2).now == 2  # n2 freed: two 2-cpu pods fit there


async def test_a_reservation_lapses_and_wakes_nobody() -> None:
    server = FakeApiServer()
    server.seed(NODES.path(), node("n1"))
    now = [100.0]
    view = RoomView("w1", server.client("w1"), clock=lambda: now[0])
    tasks = [asyncio.create_task(i.run()) for i in view.informers()]
    await asyncio.gather(*(i.wait_synced(2) for i in view.informers()))
    view.reserve("u1", "ns", "j", shape("4"), 1)
    assert view.fit(shape("1"), 1).now == 0
    now[0] += 61  # its pod never bound: the scheduler's business now, the room is shown again
    assert view.fit(shape("1"), 1).now == 1 and not view.reserved
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_room_appearing_is_announced(room: tuple[FakeApiServer, RoomView]) -> None:
    server, view = room
    said: list[str] = []
    view.on_room = said.append
    c = server.client("kubelet")
    await c.create(PODS, "ns", pod("a", "n1", "1"))
    await c.create(PODS, "ns", pod("p", None, "1"))
    await settle()
    assert said == []
    await c.delete(PODS, "ns", "p")  # an unbound pod leaving frees nothing
    await settle()
    assert said == []
    await c.delete(PODS, "ns", "a")
    await settle()
    assert said == ["w1"]
    await server.client("admin").patch(NODES, None, "n1", {"spec": {"unschedulable": True}})
    await settle()
    assert said == ["w1", "w1"]
