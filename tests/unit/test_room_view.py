"""A worker's room kept from node and pod watches (mirror/room/view.py), on a fake API server.

The watches are the real informers over testkit's in-memory server: pods are bound, finish,
are deleted, nodes are cordoned — and the fit a Job would get follows.
"""

from __future__ import annotations

import asyncio
import copy
import random
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

import mirror.room.view as view_module
from kruntime.resources import NODES, PODS, Obj
from mirror import metrics
from mirror.room.fit import NodeRoom, node_room, pods_fitting_now, worker_fit
from mirror.room.requests import PodShape, host_ports, pod_requests, shape_of_template
from mirror.room.view import (
    JOB_NAME_LABEL,
    RESERVATION_SECONDS,
    Reservation,
    RoomView,
    SlimPod,
    free_summary,
    room_totals,
    rooms_of,
    slim_node,
    slim_pod,
    with_reservations,
)
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
    assert slim_pod(p) == SlimPod(version=7, namespace="ns", node="n1", job="", daemon=False,
                                  requests=(("cpu", 250),), ports=(("TCP", 8080, ""),))


def test_pod_records_share_what_repeats() -> None:
    a, b = pod("a", "n1", "250m"), pod("b", "n1", "250m")
    for p, rv in ((a, "7"), (b, "x7")):
        p["metadata"].update(resourceVersion=rv, labels={"batch.kubernetes.io/job-name": "j"})
    ra, rb = slim_pod(a), slim_pod(b)
    assert ra.requests is rb.requests and ra.job is rb.job and ra.node is rb.node
    assert (ra.version, rb.version) == (7, "x7")  # an opaque resourceVersion stays a string


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


# -- the rooms kept between fits are the rooms computed from scratch ------------------------------


def scratch_rooms(nodes: list[Obj], pods: list[Obj]) -> list[NodeRoom]:
    """Every node parsed and every pod summed again, as the view did before it kept anything."""
    out = []
    for n in nodes:
        room = node_room(n)
        on = [p for p in pods if (p["spec"].get("nodeName") or "") == room.name]
        if on:
            requested: Counter[str] = Counter()
            for p in on:
                requested.update(pod_requests(p["spec"]))
            room = replace(room, requested={r: v for r, v in requested.items() if v}, pod_count=len(on),
                           ports=frozenset(hp for p in on for hp in host_ports(p["spec"])))
        out.append(room)
    return out


def scratch_reserved(rooms: list[NodeRoom], reserved: dict[str, Reservation], bound: Counter[tuple[str, str]],
                     now: float) -> list[NodeRoom]:
    """Lapsed and bound reservations dropped from ``reserved``, the others' pods put on the first nodes they fit."""
    for uid in [u for u, r in reserved.items() if r.until < now or bound[(r.namespace, r.job)] >= r.pods]:
        del reserved[uid]
    out = list(rooms)
    for r in reserved.values():
        left = r.pods - bound[(r.namespace, r.job)]
        for i, room in enumerate(out):
            n = pods_fitting_now(r.shape, room, left)
            if n:
                requested = Counter(room.requested)
                requested.update({k: v * n for k, v in r.shape.requests.items()})
                out[i] = replace(room, requested=dict(requested), pod_count=room.pod_count + n)
                left -= n
    return out


class Fed:
    """A view whose informers are fed events by hand (as the informer delivers them), and the truth."""

    def __init__(self) -> None:
        self.now = 100.0
        self.view = RoomView("w1", FakeApiServer().client("w1"), clock=lambda: self.now)
        self.nodes: dict[str, Obj] = {}
        self.pods: dict[str, Obj] = {}
        self.reserved: dict[str, Reservation] = {}

    def node(self, name: str, obj: Obj | None) -> None:
        prev = self.view.nodes.cache.get(name)
        if obj is None:
            self.nodes.pop(name, None)
            if prev is not None:
                del self.view.nodes.cache[name]
                self.view._on_node("DELETED", prev, prev)
            return
        self.nodes[name] = obj
        self.view.nodes.cache[name] = slim = slim_node(obj)
        self.view._on_node("ADDED" if prev is None else "MODIFIED", prev, slim)

    def pod(self, name: str, obj: Obj | None) -> None:
        prev = self.view.pods.cache.get(name)
        if obj is None:
            self.pods.pop(name, None)
            if prev is not None:
                del self.view.pods.cache[name]
                self.view._on_pod("DELETED", prev, prev)
            return
        self.pods[name] = obj
        self.view.pods.cache[name] = slim = slim_pod(obj)
        self.view._on_pod("ADDED" if prev is None else "MODIFIED", prev, slim)

    def reserve(self, uid: str, job: str, s: PodShape, pods: int) -> None:
        self.view.reserve(uid, "ns", job, s, pods)
        self.reserved[uid] = Reservation("ns", job, s, pods, self.now + RESERVATION_SECONDS)

    def release(self, uid: str) -> None:
        self.view.release(uid)
        self.reserved.pop(uid, None)

    def scratch(self) -> list[NodeRoom]:
        pods = list(self.pods.values())
        rooms = scratch_rooms(list(self.nodes.values()), pods)
        if not self.reserved:
            return rooms
        bound = Counter(("ns", p["metadata"]["labels"][JOB_NAME_LABEL]) for p in pods
                        if p["spec"].get("nodeName") and p["metadata"].get("labels"))
        return scratch_reserved(rooms, self.reserved, bound, self.now)


def random_node(rng: random.Random, name: str) -> Obj:
    n = node(name, rng.choice(["2", "4", "3500m"]), {GPU: "2"} if rng.random() < 0.3 else None)
    n["spec"] = {"unschedulable": rng.random() < 0.15,
                 "taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.15 else []}
    n["status"]["conditions"] = [{"type": "Ready", "status": "True" if rng.random() < 0.9 else "False",
                                  "lastHeartbeatTime": str(rng.random())}]
    return n


def random_pod(rng: random.Random, name: str, nodes: list[str]) -> Obj:
    p = job_pod(name, rng.choice(["j0", "j1", "j2", "j3"]), rng.choice([*nodes, "gone", None, None]),
                rng.choice(["250m", "500m", "1", "2"]))
    if rng.random() < 0.2:
        p["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": rng.choice([80, 8080])}]
    return p


def random_shape(rng: random.Random) -> PodShape:
    spec: Obj = {"containers": [{"name": "c", "resources": {"requests": {
        "cpu": rng.choice(["250m", "1", "3"]), **({GPU: "1"} if rng.random() < 0.2 else {})}}}]}
    if rng.random() < 0.2:
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    if rng.random() < 0.2:
        spec["nodeSelector"] = {"kubernetes.io/hostname": rng.choice(["n0", "n1"])}
    if rng.random() < 0.2:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return shape_of_template({"spec": spec})


@pytest.mark.parametrize("seed", range(8))
def test_the_kept_rooms_are_the_rooms_from_scratch_after_every_change(seed: int) -> None:
    """Node, pod and reservation changes and the clock, at random: after each, what the view keeps
    is what it would compute from scratch, and the same reservations are left."""
    rng = random.Random(seed)
    fed = Fed()
    names = ["n0", "n1", "n2", "n3"]
    for _ in range(1000):
        step = rng.random()
        if step < 0.15:
            name = rng.choice(names)
            fed.node(name, None if rng.random() < 0.15 else random_node(rng, name))
        elif step < 0.2 and fed.nodes:  # a heartbeat: a new object, nothing the fit reads changed
            name = rng.choice(list(fed.nodes))
            fed.node(name, copy.deepcopy(fed.nodes[name]))
        elif step < 0.55:
            name = f"p{rng.randrange(30)}"
            fed.pod(name, None if rng.random() < 0.3 else random_pod(rng, name, names))
        elif step < 0.6 and fed.pods:  # bound by the scheduler
            name = rng.choice(list(fed.pods))
            p = copy.deepcopy(fed.pods[name])
            p["spec"]["nodeName"] = rng.choice(names)
            fed.pod(name, p)
        elif step < 0.63 and fed.pods:  # a status update: a new version, nothing the room reads changed
            name = rng.choice(list(fed.pods))
            p = copy.deepcopy(fed.pods[name])
            p["metadata"]["resourceVersion"] = str(rng.randrange(10**6))
            p["status"] = {"phase": "Running"}
            fed.pod(name, p)
        elif step < 0.75:
            fed.reserve(f"u{rng.randrange(8)}", rng.choice(["j0", "j1", "j2", "j3"]), random_shape(rng),
                        rng.randint(1, 3))
        elif step < 0.82:
            fed.release(rng.choice([*fed.reserved, "u9"]))
            if rng.random() < 0.5:  # and another placed at once: as many reservations as before
                fed.reserve(f"u{rng.randrange(8)}", rng.choice(["j0", "j1", "j2", "j3"]), random_shape(rng), 1)
        elif step < 0.87:
            fed.now += rng.choice([1.0, 10.0, 30.0])
        if rng.random() < 0.5:
            continue  # changes pile up between fits too
        kept = fed.view.rooms()
        assert kept == fed.scratch()
        assert list(fed.view.reserved) == list(fed.reserved)
        s = random_shape(rng)
        want = rng.randint(1, 4)
        assert fed.view.fit(s, want) == worker_fit(s, fed.scratch(), want)
        assert fed.view.totals() == room_totals(fed.scratch())
        assert fed.view.allocatable() == room_totals(fed.scratch())["allocatable"]  # summed once per node change


def test_a_pods_status_update_keeps_the_rooms_and_reservations_as_made() -> None:
    """Most of a pod's watch events change only its status: the rooms made before stay (not made again,
    nor the reservations applied again); a change of what it takes does not."""
    fed = Fed()
    fed.node("n0", node("n0", "4"))
    fed.pod("p0", job_pod("p0", "j0", "n0", "1"))
    fed.reserve("u0", "j1", shape("1"), 1)
    made = fed.view.rooms()
    version = fed.view.loads.version
    update = copy.deepcopy(fed.pods["p0"])
    update["metadata"]["resourceVersion"] = "2"
    update["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    fed.pod("p0", update)
    assert fed.view.loads.version == version and fed.view.rooms()[0] is made[0]
    moved = copy.deepcopy(update)
    moved["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"  # resized in place
    fed.pod("p0", moved)
    assert fed.view.loads.version != version and fed.view.rooms() == fed.scratch() != made


def test_a_nodes_allocatable_is_parsed_once_per_node_object(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []

    def counting(n: Obj) -> NodeRoom:
        parsed.append(n["metadata"]["name"])
        return node_room(n)

    monkeypatch.setattr(view_module, "node_room", counting)
    fed = Fed()
    fed.node("n1", node("n1"))
    fed.node("n2", node("n2"))
    fed.pod("a", pod("a", "n1", "1"))
    fed.reserve("u1", "j", shape("1"), 1)
    first = fed.view.rooms()
    for _ in range(5):
        assert fed.view.fit(shape("1"), 1).now == 1
    assert parsed == ["n1", "n2"]
    fed.pod("b", pod("b", "n1", "1"))  # a pod on n1: its room is made again, from the parsed node
    again = fed.view.rooms()
    assert parsed == ["n1", "n2"] and again[1] is first[1] and again[0] != first[0]
    fed.node("n2", node("n2", cpu="8"))  # a new node object: parsed again
    assert fed.view.rooms()[1].allocatable["cpu"] == 8000 and parsed == ["n1", "n2", "n2"]


def test_a_reservation_made_after_the_others_lapsed_lapses_too() -> None:
    fed = Fed()
    fed.node("n1", node("n1"))
    fed.reserve("u1", "j1", shape("4"), 1)
    assert fed.view.fit(shape("1"), 1).now == 0
    fed.now += 61
    assert fed.view.fit(shape("1"), 1).now == 1 and not fed.view.reserved
    fed.reserve("u2", "j2", shape("4"), 1)  # nothing else changed since the last look
    assert fed.view.fit(shape("1"), 1).now == 0
    fed.now += 61
    assert fed.view.fit(shape("1"), 1).now == 1 and not fed.view.reserved


@pytest.mark.parametrize("seed", range(20))
def test_a_backlog_of_reservations_lands_where_a_search_from_the_first_node_puts_it(seed: int) -> None:
    """The search for a reservation's nodes starts where the last one of its shape ended: the same
    rooms as searching every node from the first, for a backlog of several shapes over many nodes."""
    rng = random.Random(seed)
    rooms = [node_room(random_node(rng, f"n{i}")) for i in range(rng.randint(1, 24))]
    shapes = [random_shape(rng) for _ in range(3)]
    reserved = {f"u{i}": Reservation("ns", f"j{i}", rng.choice(shapes), rng.randint(1, 4), 1e9)
                for i in range(rng.randint(1, 60))}
    bound = Counter({("ns", f"j{i}"): rng.randint(0, 2) for i in range(0, 60, 3)})
    assert with_reservations(rooms, reserved.values(), bound) == scratch_reserved(rooms, dict(reserved), bound, 0.0)
