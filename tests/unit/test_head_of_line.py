"""One Job cannot hold every worker for everyone (issue 32 item 1).

What DaemonSet pods hold on a node never frees, so a Job that only fits without them could
never run there ("never", not "waits"); and a Job waiting for room holds the workers it waits
for against later Jobs — of any namespace — only for ``headOfLineHold`` seconds, with the
clock passed in. Tables first, then whole passes on fake workers (testkit/fakefleet.py).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from typing import Any

import pytest

from kruntime.resources import PODS, Obj
from mirror.jobs.kind import JOB_KIND
from mirror.naming import ANNOTATION_CLUSTER
from mirror.placement import WaitingForRoom, WorkerView, narrow_by_room
from mirror.placer import recheck_after
from mirror.room.fit import WorkerFit, worker_fit
from mirror.room.requests import shape_of_template
from mirror.room.view import is_daemon_pod, rooms_of
from mirror.scheduling.line import Waiting, WaitingLine, heads, hold_lapses_at, holds
from testkit.fakecluster import FakeClusterClient
from testkit.fakefleet import FakeFleet, fake_fleet, job

# -- never fits: what DaemonSet pods hold ---------------------------------------------------------


def node(name: str, cpu: str = "4", pods: str = "110") -> Obj:
    return {"metadata": {"name": name, "labels": {}}, "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": pods},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


DS_OWNER = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds-uid", "controller": True}


def pod(name: str, on: str, *, cpu: str | None = None, port: dict[str, Any] | None = None,
        owner: dict[str, Any] | None = DS_OWNER) -> Obj:
    container: Obj = {"name": "c", "image": "x"}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    if port:
        container["ports"] = [{"containerPort": 80, **port}]
    return {"metadata": {"name": name, "namespace": "kube-system", "ownerReferences": [owner] if owner else []},
            "spec": {"nodeName": on, "containers": [container]}, "status": {"phase": "Running"}}


def on_every_node(**kw: Any) -> list[Obj]:
    return [pod(f"p-{n}", n, **kw) for n in ("n1", "n2")]


PORT = {"hostPort": 9100}
NOT_CONTROLLER = {**DS_OWNER, "controller": False}
REPLICASET = {**DS_OWNER, "kind": "ReplicaSet"}


@pytest.mark.parametrize(
    ("pods", "job_ports", "job_cpu", "nodes_pods", "ever", "why"),
    [
        (on_every_node(port=PORT), [PORT], None, "110", False,
         "host port TCP/9100 is held by DaemonSet pods on every matching node"),
        (on_every_node(cpu="10m"), [], "4", "110", False,
         "largest node has 3990m cpu beside its DaemonSet pods < 4 cpu requested"),
        (on_every_node(), [], None, "1", False, "pods: allocatable 0"),
        ([pod("p-n1", "n1", port=PORT)], [PORT], None, "110", True, "1 of 1 pods fit now"),  # n2 is free of it
        (on_every_node(port=PORT, owner=None), [PORT], None, "110", True,
         "no room now: host ports taken"),  # a plain pod's port may be freed: the Job waits
        (on_every_node(cpu="10m", owner=None), [], "4", "110", True, "no room now: largest free node"),
        (on_every_node(port=PORT, owner=NOT_CONTROLLER), [PORT], None, "110", True, "no room now"),
        (on_every_node(port=PORT, owner=REPLICASET), [PORT], None, "110", True, "no room now"),
        (on_every_node(port={"hostPort": 9100, "hostIP": "10.0.0.1"}), [{"hostPort": 9100, "hostIP": "10.0.0.2"}],
         None, "110", True, "1 of 1 pods fit now"),
        (on_every_node(port={"hostPort": 9100, "hostIP": "10.0.0.1"}), [PORT], None, "110", False,
         "host port TCP/9100 is held"),  # the Job's wildcard address takes every address
        (on_every_node(port={"hostPort": 53, "protocol": "UDP"}), [{"hostPort": 53}], None, "110", True,
         "1 of 1 pods fit now"),
    ],
    ids=["ds-port-on-every-node", "cpu-equal-largest-beside-ds", "ds-take-every-pod-slot", "ds-port-on-one-node",
         "plain-pod-port-waits", "plain-pod-cpu-waits", "owner-not-controller", "replicaset-owner",
         "other-host-ip", "wildcard-job-port", "other-protocol"],
)
def test_what_daemonset_pods_hold_is_never_free(pods: list[Obj], job_ports: list[dict[str, Any]],
                                                job_cpu: str | None, nodes_pods: str, ever: bool, why: str) -> None:
    container: Obj = {"name": "main", "image": "x", "ports": [{"containerPort": 80, **p} for p in job_ports]}
    if job_cpu:
        container["resources"] = {"requests": {"cpu": job_cpu}}
    shape = shape_of_template({"spec": {"containers": [container]}})
    rooms, _ = rooms_of([node("n1", pods=nodes_pods), node("n2", pods=nodes_pods)], pods)
    fit = worker_fit(shape, rooms, 1)
    assert fit.ever is ever, fit.why
    assert why in fit.why


@pytest.mark.parametrize(("owners", "daemon"), [
    ([DS_OWNER], True), ([NOT_CONTROLLER], False), ([REPLICASET], False), ([], False),
    ([{**DS_OWNER, "apiVersion": "example.com/v1"}], False), ([REPLICASET, DS_OWNER], True),
])
def test_a_daemon_pod_is_one_a_daemonset_controls(owners: list[dict[str, Any]], daemon: bool) -> None:
    assert is_daemon_pod({"ownerReferences": owners}) is daemon


# -- the hold bound, with the clock passed in -----------------------------------------------------


@pytest.mark.parametrize(("ahead", "behind", "now", "hold", "held", "lapses"), [
    (0, 0, 0, 120, True, 120),
    (0, 10, 119.9, 120, True, 120),
    (0, 10, 120, 120, False, 120),  # the head's own wait ran out
    (50, 10, 100, 120, True, 130),  # a head that began waiting after the held Job: the held Job's wait bounds it
    (200, 10, 200, 120, False, 130),  # placed, moved and waiting again with its old place: holds nothing
    (0, 0, 0, 0, False, 0),  # headOfLineHold 0: nobody holds
    (0, 0, 1e9, math.inf, True, math.inf),  # unbounded (the narrowing's default)
])
def test_a_hold_lapses_hold_seconds_after_the_first_of_the_two_began_waiting(
        ahead: float, behind: float, now: float, hold: float, held: bool, lapses: float) -> None:
    assert holds(ahead, behind, now, hold) is held
    assert hold_lapses_at(ahead, behind, hold) == lapses


FULL = WorkerFit(True, 0, "no room now: largest free node has 1 cpu < 2 cpu requested")
ROOM = WorkerFit(True, 1, "1 of 1 pods fit now (3 cpu free)")
BLOCKER = ("2026-11-26T10:00:00Z", "u-blocker")  # namespace a: a Job no room ever appears for
SMALL = ("2026-11-26T10:00:05Z", "u-small")  # namespace b: fits now on both workers


def views() -> list[WorkerView]:
    return [WorkerView(n, True, 0, {}) for n in ("w1", "w2")]


def line_with_blocker(since: float) -> WaitingLine:
    line = WaitingLine()
    line.add("u-blocker", Waiting(BLOCKER, frozenset({"w1", "w2"}), "a/blocker"), since)
    return line


@pytest.mark.parametrize(("now", "small_since", "held_until"), [
    (0.0, None, 120.0),  # just created: held, looked at again when the hold lapses
    (60.0, None, 120.0),
    (119.5, 30.0, 120.0),
    (120.0, None, None),  # the blocker held for headOfLineHold: the small Job takes room
    (5000.0, None, None),
    (100.0, 0.0, 120.0),
])
def test_a_head_holds_a_later_job_of_another_namespace_only_for_the_bound(
        now: float, small_since: float | None, held_until: float | None) -> None:
    line = line_with_blocker(0.0)
    kw: dict[str, Any] = {"rank": SMALL, "waiting": line, "now": now, "hold": 120.0, "since": small_since}
    if held_until is None:
        got = narrow_by_room(views(), {"w1": ROOM, "w2": ROOM}, None, **kw)
        assert {w.name for w in got if w.healthy} == {"w1", "w2"}
        assert heads(line, ["w1", "w2"]) == ["u-blocker"]  # still first in line: woken first when room appears
        return
    with pytest.raises(WaitingForRoom, match=re.escape("Jobs ahead of it in line wait for it there")) as wait:
        narrow_by_room(views(), {"w1": ROOM, "w2": ROOM}, None, **kw)
    assert wait.value.held_until == held_until
    assert f"for at most {math.ceil(held_until - now)} s more (headOfLineHold)" in str(wait.value)


def test_three_jobs_of_another_namespace_are_free_once_the_blocker_held_for_the_bound() -> None:
    """The issue's scenario as the line sees it: a Job of namespace a that never finds room, first
    for both workers; three small Jobs of namespace b behind it. Each of them is held until 120 s
    after the blocker began waiting, then takes room; the blocker keeps waiting, never a holder
    again in this wait (re-adding it, however it waits, keeps when it began)."""
    line = line_with_blocker(0.0)
    smalls = [(f"2026-11-26T10:00:0{i + 1}Z", f"u-small-{i}") for i in range(3)]
    for t in (1.0, 60.0, 119.0):
        for i, order in enumerate(smalls):
            with pytest.raises(WaitingForRoom) as wait:
                narrow_by_room(views(), {"w1": ROOM, "w2": ROOM}, None, rank=order, waiting=line, now=t,
                               hold=120.0, since=line.since(order[1]))
            line.add(order[1], Waiting(order, wait.value.could, f"b/small-{i}"), t)
            assert wait.value.held_until == 120.0
    line.add("u-blocker", Waiting(BLOCKER, frozenset({"w1"}), "a/blocker"), 200.0)  # looked at again: same wait
    assert line.since("u-blocker") == 0.0
    for order in smalls:
        got = narrow_by_room(views(), {"w1": ROOM, "w2": ROOM}, None, rank=order, waiting=line, now=120.0,
                             hold=120.0, since=line.since(order[1]))
        assert {w.name for w in got if w.healthy} == {"w1", "w2"}
        line.pop(order[1])  # placed
    assert line.holder("w1", 120.0, 120.0) is None and line.first("w1") == "u-blocker"


def test_room_appearing_wakes_the_first_in_line_and_the_oldest_still_holding_once_the_first_lapsed() -> None:
    """A blocker that never fits stays first in line; when room appears it is looked at, and so is
    the oldest Job whose hold has not lapsed (it may use the room the blocker cannot)."""
    line = line_with_blocker(0.0)
    line.add("u-small", Waiting(SMALL, frozenset({"w1"}), "b/small"), 100.0)
    assert heads(line, ["w1"], 50.0, 120.0) == ["u-blocker"]  # the blocker still holds w1
    assert heads(line, ["w1"], 130.0, 120.0) == ["u-blocker", "u-small"]
    assert heads(line, ["w1", "w2"], 130.0, 120.0) == ["u-blocker", "u-small"]
    assert heads(line, ["w1"], 300.0, 120.0) == ["u-blocker"]  # every hold lapsed: first come, first woken
    assert heads(line, ["w1"]) == ["u-blocker"]  # unbounded: the first alone, as before


def test_a_stream_of_blockers_holds_a_job_no_longer_than_its_own_bound() -> None:
    """Blockers of namespace a created before the small Job but waiting only from later on (a
    restart, a copy moved back to the manager) hold it at most 120 s after it began waiting."""
    line = WaitingLine()
    for i, since in enumerate((0.0, 100.0, 200.0, 300.0)):
        line.add(f"u-b{i}", Waiting((f"2026-11-26T09:00:0{i}Z", f"u-b{i}"), frozenset({"w1", "w2"})), since)
    kw: dict[str, Any] = {"rank": SMALL, "waiting": line, "hold": 120.0, "since": 10.0}
    with pytest.raises(WaitingForRoom):
        narrow_by_room(views(), {"w1": ROOM, "w2": ROOM}, None, now=129.0, **kw)
    got = narrow_by_room(views(), {"w1": ROOM, "w2": ROOM}, None, now=130.0, **kw)
    assert {w.name for w in got if w.healthy} == {"w1", "w2"}


def test_a_job_that_waits_for_room_itself_gives_no_hold_lapse() -> None:
    with pytest.raises(WaitingForRoom) as wait:
        narrow_by_room(views(), {"w1": FULL, "w2": FULL}, None, rank=SMALL, waiting=line_with_blocker(0.0),
                       now=1.0, hold=120.0)
    assert wait.value.held_until is None


@pytest.mark.parametrize(("in_line", "after"), [
    (True, None),  # waiting in line, held or not: no timer of its own (the placer's sweep and wakes)
    (False, 30.0),  # in no line (pin, selector, never fits): at the resync
])
def test_a_job_in_line_has_no_timer(in_line: bool, after: float | None) -> None:
    assert recheck_after(in_line, 30.0) == after


# -- whole passes ---------------------------------------------------------------------------------

GPU = "example.com/gpu"


def fleet_node(name: str, cpu: str, extra: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"name": name, "labels": {}}, "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110", **(extra or {})},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


NODES = {"worker-1": [fleet_node("a1", "2")], "worker-2": [fleet_node("b1", "8", {GPU: "4"})]}


def running_pod(name: str, node: str, cpu: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}, "status": {"phase": "Running"}}


async def a_head_waiting_behind_a_hog(f: FakeFleet, worker: str, node: str, cpu: str) -> FakeClusterClient:
    """A pod taking ``cpu`` of ``node``, then Job ``ns-a/big`` of 4 cpu waiting first in line for
    room; returns the worker's kubelet client. Jobs created after it get a later creationTimestamp."""
    kubelet = f.workers[worker].client("kubelet")
    await kubelet.create(PODS, "default", running_pod("hog", node, cpu))
    await f.settle()
    await f.create(job("big", namespace="ns-a", requests={"cpu": "4"}))
    await f.sync("big", "ns-a")
    await asyncio.sleep(1.05)  # creationTimestamp has whole seconds: the next one is later
    return kubelet


async def test_the_head_stops_holding_after_the_bound_says_so_once_and_is_placed_when_room_appears() -> None:
    async with fake_fleet(nodes=NODES, headOfLineHold=1.5) as f:
        kubelet = await a_head_waiting_behind_a_hog(f, "worker-2", "b1", "7")  # only b1 could ever hold it
        await f.create(job("small", namespace="ns-b", requests={"cpu": "500m", GPU: "1"}))  # fits now, on worker-2
        after = await f.sync("small", "ns-b")
        assert ANNOTATION_CLUSTER not in (f.job("small", "ns-b") or {})["metadata"]["annotations"]
        assert after is None  # no timer: the placer's sweep wakes it once the hold lapsed
        woken: list[str] = []
        f.reconciler.places.wake = lambda keys, urgent=True: woken.extend(k.key for k in keys)
        f.reconciler.places.wake_waiting()
        assert woken == ["ns-a/big"]  # the hold has not lapsed: the first in line alone
        await asyncio.sleep(0.55)
        woken.clear()
        f.reconciler.places.wake_waiting()
        assert woken == ["ns-a/big", "ns-b/small"]
        await f.sync("small", "ns-b")
        assert (f.job("small", "ns-b") or {})["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2"
        await f.sync("big", "ns-a")
        await f.sync("big", "ns-a")
        said = [m for r, m in f.events("big", "ns-a") if r == "HeadOfLineHoldEnded"]
        assert len(said) == 1 and "it no longer holds worker-2 against Jobs created after it" in said[0]
        assert ANNOTATION_CLUSTER not in (f.job("big", "ns-a") or {})["metadata"]["annotations"]
        await kubelet.delete(PODS, "default", "hog")
        await f.settle()
        await f.sync("big", "ns-a")
        assert (f.job("big", "ns-a") or {})["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2"
        assert f.reconciler.places.waiting == {}


async def test_a_waiting_job_that_turns_never_fits_leaves_the_line() -> None:
    """A DaemonSet that comes to hold the Job's port on every node makes it "never": it no longer
    holds the workers it waited for."""
    port = [{"containerPort": 80, "hostPort": 9100}]
    async with fake_fleet(nodes={"worker-1": [fleet_node("a1", "2")], "worker-2": [fleet_node("b1", "2")]}) as f:
        for w, n in (("worker-1", "a1"), ("worker-2", "b1")):  # a plain pod holds the port: the Job waits
            await f.workers[w].client("kubelet").create(PODS, "default", {"metadata": {"name": "plain"}, "spec": {
                "nodeName": n, "containers": [{"name": "c", "image": "x", "ports": port}]},
                "status": {"phase": "Running"}})
        await f.settle()
        j = job("ported", namespace="ns-a")
        j["spec"]["template"]["spec"]["containers"][0]["ports"] = port
        await f.create(j)
        await f.sync("ported", "ns-a")
        assert [r for r, _ in f.events("ported", "ns-a")] == ["WaitingForRoom"]
        assert len(f.reconciler.places.waiting) == 1
        for w, n in (("worker-1", "a1"), ("worker-2", "b1")):
            await f.workers[w].client("kubelet").create(PODS, "kube-system", {
                "metadata": {"name": "agent", "ownerReferences": [DS_OWNER]},
                "spec": {"nodeName": n, "containers": [{"name": "c", "image": "x", "ports": port}]},
                "status": {"phase": "Running"}})
        await f.settle()
        await f.sync("ported", "ns-a")
        assert "NoWorkerFits" in [r for r, _ in f.events("ported", "ns-a")]
        assert f.reconciler.places.waiting == {}


async def test_jobs_held_by_one_head_are_woken_at_its_lapse_only_as_many_as_the_room_takes() -> None:
    """Thirty Jobs held where they had room by one head share its lapse: the sweep wakes the
    best-ranked of them, as many as the worker's room takes now (10 of 100m in the 1 cpu left; 11
    pod slots), not all thirty at once (at 10,000 Jobs their timers put 4,900 passes in the queue in
    the same second); once. With the room taken meanwhile, none."""
    nodes = {"worker-1": [fleet_node("a1", "4", {"pods": "12"})]}
    async with fake_fleet(("worker-1",), nodes=nodes) as f:
        kubelet = await a_head_waiting_behind_a_hog(f, "worker-1", "a1", "3")  # big fits a1 once the hog ends
        smalls = [f"small-{i:02d}" for i in range(30)]
        for name in smalls:
            await f.create(job(name, namespace="ns-b", requests={"cpu": "100m"}))
            assert await f.sync(name, "ns-b") is None  # held: no timer of its own
        places = f.reconciler.places
        assert len(places.waiting) == 31
        line = [e.key for e in places.queue()]
        assert line[0] == "ns-a/big" and sorted(line[1:]) == [f"ns-b/{n}" for n in smalls]
        calls: list[tuple[bool, list[str]]] = []
        places.wake = lambda keys, urgent=True: calls.append((urgent, [k.key for k in keys]))
        places.clock = lambda: time.monotonic() + 121
        places.wake_waiting()
        # the first in line ahead of the queue; then, in turn, as many held as the room takes (1 cpu of 100m pods)
        assert calls == [(True, line[:1]), (False, line[1:11])]
        calls.clear()
        places.wake_waiting()
        assert calls == [(True, ["ns-a/big"])]  # the lapse woke them once; the first in line is the sweep's as always
        shape, want = places.pod_shape(JOB_KIND, job("probe", namespace="ns-b", requests={"cpu": "100m"}))
        assert places._jobs_fitting("worker-1", shape, want, 30) == 10
        await kubelet.create(PODS, "default", running_pod("hog-2", "a1", "1"))
        await f.settle()
        assert places._jobs_fitting("worker-1", shape, want, 30) == 0  # room taken meanwhile: none would be woken


async def test_a_held_job_placed_or_gone_before_the_lapse_is_not_kept_until_then() -> None:
    """What the sweep keeps for a hold's lapse is dropped when a held Job stops waiting (deleted,
    placed, suspended): with a long headOfLineHold it would otherwise be kept for hours."""
    nodes = {"worker-1": [fleet_node("a1", "4", {"pods": "12"})]}
    async with fake_fleet(("worker-1",), nodes=nodes) as f:
        await a_head_waiting_behind_a_hog(f, "worker-1", "a1", "3")
        smalls = [f"small-{i:02d}" for i in range(12)]
        for name in smalls:
            await f.create(job(name, namespace="ns-b", requests={"cpu": "100m"}))
            assert await f.sync(name, "ns-b") is None
        places = f.reconciler.places

        def kept() -> int:
            return sum(len(held) for by_worker in places._held.values() for held in by_worker.values())

        assert kept() == len(places._held_at) == 12
        for name in smalls[:5]:  # deleted meanwhile: the controller forgets them
            places.forget((f.job(name, "ns-b") or {})["metadata"]["uid"])
        assert kept() == len(places._held_at) == 7
        woken: list[str] = []
        places.wake = lambda keys, urgent=True: woken.extend(k.key for k in keys if not urgent)
        places.clock = lambda: time.monotonic() + 121
        places.wake_waiting()
        assert sorted(woken) == [f"ns-b/{n}" for n in smalls[5:]]
        assert places._held == {} and places._held_at == {}
