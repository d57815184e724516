"""Placement RoomAware on real API servers: kwok nodes shaped with kubectl-like API writes.

The room views watch the workers' real Nodes and Pods; nodes are labelled and filled with
pods as an operator (or other tenants) would. A Job whose nodeSelector only worker-2's nodes
satisfy goes there (LeastLoaded alone breaks the 0/0 tie towards worker-1) and runs; a Job no
node could ever hold stays in the manager with a NoWorkerFits event naming each worker and
why, and no copy anywhere; a Job that could run but finds every node full waits in the manager
(WaitingForRoom, once) and runs where room appears; worker-1 cordoned, tainted or with its host
port taken by a pod that is not ours, or only worker-2's nodes advertising an extended resource
(written to the node status, as a device plugin or an operator does), sends the Job to worker-2.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, NODES, PODS, Obj
from mirror.naming import ANNOTATION_CLUSTER, ANNOTATION_PIN, ANNOTATION_PLACEMENT_REASON
from mirror.room.quantity import amount
from mirror.room.requests import shape_of_template
from tests.conftest import wait_for
from tests.integration.mirror_env import make_job, mirror_env

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]


@contextlib.asynccontextmanager
async def labelled_nodes(worker: ClusterClient, key: str, value: str) -> AsyncIterator[None]:
    nodes, _ = await worker.list_all(NODES)
    for n in nodes:
        await worker.patch(NODES, None, n["metadata"]["name"], {"metadata": {"labels": {key: value}}})
    try:
        yield
    finally:
        for n in nodes:
            await worker.patch(NODES, None, n["metadata"]["name"], {"metadata": {"labels": {key: None}}})


def with_pod_spec(job: Obj, **pod_spec: object) -> Obj:
    job["spec"]["template"]["spec"].update(pod_spec)
    return job


@pytest.mark.integration
async def test_room_aware_placement_follows_the_nodes(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    key = f"jobmirror.test/pool-{ns}"[:63]
    async with mirror_env(client_for, cluster, ns, placement="RoomAware") as env, \
            labelled_nodes(env.workers["worker-2"], key, "b"):
        await env.start()
        ctrl = env.controllers[-1][0]
        async def rooms_known() -> bool:
            return bool(ctrl.rooms) and all(r.synced and r.nodes.cache for r in ctrl.rooms.values())

        await wait_for(rooms_known, timeout=30, what="every worker's room view synced with its nodes")
        await env.create(with_pod_spec(make_job("pool-b", duration_ms=500), nodeSelector={key: "b"}))
        done = await env.wait_condition("pool-b", "Complete", timeout=60)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2"
        assert "room on worker-2: 1 of 1 pods fit now" in done["metadata"]["annotations"][ANNOTATION_PLACEMENT_REASON]

        await env.create(with_pod_spec(make_job("huge"), containers=[
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100000"}}}]))
        event = await env.wait_event("huge", "NoWorkerFits")
        assert "worker-1: largest node has" in event["message"] and "worker-2: largest node has" in event["message"]
        assert "100000 cpu requested" in event["message"]
        held = await env.get("huge")
        assert held is not None and ANNOTATION_CLUSTER not in (held["metadata"].get("annotations") or {})
        assert await env.copies(held["metadata"]["uid"]) == {}
        await env.manager.delete(JOBS, ns, "huge")


@contextlib.asynccontextmanager
async def hogs(worker: ClusterClient, ns: str, leave_cpu_milli: int) -> AsyncIterator[list[str]]:
    """A pod bound to each node of ``worker`` taking all its cpu but ``leave_cpu_milli``, running for
    10 minutes unless deleted (the bed's kwok ends a pod after its kwok-duration annotation)."""
    nodes, _ = await worker.list_all(NODES)
    names = []
    for n in nodes:
        alloc = amount("cpu", n["status"]["allocatable"]["cpu"])
        name = f"hog-{n['metadata']['name']}"[:63]
        await worker.create(PODS, ns, {"metadata": {"name": name, "annotations": {
            "jobmirror.dev/kwok-duration": "600000ms"}}, "spec": {  # kwok ends a pod after this
            "nodeName": n["metadata"]["name"], "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox",
                            "resources": {"requests": {"cpu": f"{alloc - leave_cpu_milli}m"}}}]}})
        names.append(name)
    try:
        yield names
    finally:
        for name in names:
            with contextlib.suppress(ApiError):
                await worker.delete(PODS, ns, name)


@pytest.mark.integration
async def test_a_job_waits_in_the_manager_until_room_appears(client_for: ClientFor, cluster: ClusterFn,
                                                              ns: str) -> None:
    async with mirror_env(client_for, cluster, ns, placement="RoomAware") as env, \
            hogs(env.workers["worker-1"], ns, 500), hogs(env.workers["worker-2"], ns, 500) as hogs_2:
        await env.start()
        ctrl = env.controllers[-1][0]

        async def full() -> bool:
            return bool(ctrl.rooms) and all(r.synced and r.nodes.cache and not r.fit(
                shape_of_template({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
                1).now for r in ctrl.rooms.values())

        await wait_for(full, timeout=30, what="both workers' nodes full in the room views")
        await env.create(with_pod_spec(make_job("waits", duration_ms=500), containers=[
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]))
        event = await env.wait_event("waits", "WaitingForRoom")
        assert "no worker has room for its pod now" in event["message"]
        held = await env.get("waits")
        assert held is not None and ANNOTATION_CLUSTER not in (held["metadata"].get("annotations") or {})
        for name in hogs_2:  # an operator frees worker-2
            await env.workers["worker-2"].delete(PODS, ns, name)
        done = await env.wait_condition("waits", "Complete", timeout=60)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2"
        assert [e["reason"] for e in await env.events("waits")].count("WaitingForRoom") == 1


@contextlib.asynccontextmanager
async def repellers(worker: ClusterClient, ns: str, label: dict[str, str]) -> AsyncIterator[None]:
    """A long-running pod carrying ``label`` on every node of ``worker`` (takes no room)."""
    nodes, _ = await worker.list_all(NODES)
    names = [f"repel-{n['metadata']['name']}"[:63] for n in nodes]
    for n, name in zip(nodes, names, strict=True):
        await worker.create(PODS, ns, {"metadata": {"name": name, "labels": label, "annotations": {
            "jobmirror.dev/kwok-duration": "600000ms"}}, "spec": {
            "nodeName": n["metadata"]["name"], "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}})
    try:
        yield
    finally:
        for name in names:
            with contextlib.suppress(ApiError):
                await worker.delete(PODS, ns, name)


@pytest.mark.integration
@pytest.mark.parametrize("pinned", [False, True], ids=["moved", "pinned-stays"])
async def test_a_copy_stuck_before_it_started_is_moved(client_for: ClientFor, cluster: ClusterFn, ns: str,
                                                       pinned: bool) -> None:
    """The Job's pod refuses to share a node with the pods on every node of worker-1 (inter-pod
    anti-affinity: not modelled by the room fit, so worker-1 looks roomy and wins LeastLoaded's
    tie). Its pod never schedules; after unschedulableTimeout the copy is deleted and the Job runs
    on worker-2 (Replaced event); a pinned Job only gets the CopyUnschedulable event and stays."""
    label = {"jobmirror.test/repel": ns}
    async with mirror_env(client_for, cluster, ns, placement="RoomAware", unschedulable_timeout=3.0) as env, \
            repellers(env.workers["worker-1"], ns, label):
        await env.start()
        annotations = {ANNOTATION_PIN: "worker-1"} if pinned else None
        anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": label}, "topologyKey": "kubernetes.io/hostname"}]}}
        await env.create(with_pod_spec(make_job("stuck", duration_ms=500, annotations=annotations), affinity=anti))
        await env.wait_event("stuck", "CopyUnschedulable", timeout=60)
        if pinned:
            await asyncio.sleep(3)
            held = await env.get("stuck")
            assert held is not None and held["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-1"
            assert "Replaced" not in [e["reason"] for e in await env.events("stuck")]
            await env.manager.delete(JOBS, ns, "stuck")
            return
        moved = await env.wait_event("stuck", "Replaced", timeout=30)
        assert moved["message"].startswith("moved from worker worker-1 to worker-2: the copy's pod")
        done = await env.wait_condition("stuck", "Complete", timeout=60)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2"
        await env.wait_gone("stuck", env.workers["worker-1"])


GPU = "example.com/gpu"
MAIN = {"name": "main", "image": "busybox"}


async def _nodes(worker: ClusterClient) -> list[str]:
    nodes, _ = await worker.list_all(NODES)
    return [n["metadata"]["name"] for n in nodes]


@contextlib.asynccontextmanager
async def cordoned(worker: ClusterClient, ns: str) -> AsyncIterator[None]:
    """``kubectl cordon`` of every node."""
    names = await _nodes(worker)
    for n in names:
        await worker.patch(NODES, None, n, {"spec": {"unschedulable": True}})
    try:
        yield
    finally:
        for n in names:
            await worker.patch(NODES, None, n, {"spec": {"unschedulable": None}})


@contextlib.asynccontextmanager
async def tainted(worker: ClusterClient, ns: str) -> AsyncIterator[None]:
    """``kubectl taint nodes --all <key>=x:NoSchedule``, the key this test's own."""
    names = await _nodes(worker)
    nodes = {n: await worker.get(NODES, None, n) for n in names}
    key = f"jobmirror.test/taint-{ns}"[:63]
    for n, obj in nodes.items():
        taints = [*(obj["spec"].get("taints") or []), {"key": key, "value": "x", "effect": "NoSchedule"}]
        await worker.patch(NODES, None, n, {"spec": {"taints": taints}})
    try:
        yield
    finally:
        for n, obj in nodes.items():
            await worker.patch(NODES, None, n, {"spec": {"taints": obj["spec"].get("taints")}})


@contextlib.asynccontextmanager
async def gpus(worker: ClusterClient, ns: str) -> AsyncIterator[None]:
    """An extended resource advertised the documented way: written to each node's status."""
    names = await _nodes(worker)
    for n in names:
        await worker.patch(NODES, None, n, {"status": {"capacity": {GPU: "4"}, "allocatable": {GPU: "4"}}},
                           subresource="status")
    try:
        yield
    finally:
        for n in names:
            await worker.patch(NODES, None, n, {"status": {"capacity": {GPU: None}, "allocatable": {GPU: None}}},
                               subresource="status")


@contextlib.asynccontextmanager
async def ports_taken(worker: ClusterClient, ns: str) -> AsyncIterator[None]:
    """A pod that is not ours holding host port 18080 on every node."""
    names = await _nodes(worker)
    pods = [f"port-{n}"[:63] for n in names]
    for n, pod in zip(names, pods, strict=True):
        await worker.create(PODS, ns, {"metadata": {"name": pod, "annotations": {
            "jobmirror.dev/kwok-duration": "600000ms"}}, "spec": {"nodeName": n, "restartPolicy": "Never",
            "containers": [{**MAIN, "ports": [{"containerPort": 80, "hostPort": 18080}]}]}})
    try:
        yield
    finally:
        for pod in pods:
            with contextlib.suppress(ApiError):
                await worker.delete(PODS, ns, pod)


Shaper = Callable[[ClusterClient, str], contextlib.AbstractAsyncContextManager[None]]

#: (how worker-1 is shaped — or worker-2 for the gpu —, the Job's pod spec, whether worker-1 could ever run it)
SHAPES: dict[str, tuple[Shaper, str, Obj, bool]] = {
    "cordoned": (cordoned, "worker-1", {}, True),
    "tainted": (tainted, "worker-1", {}, False),
    "extended-resource": (gpus, "worker-2", {"containers": [
        {**MAIN, "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}]}, False),
    "host-port-taken": (ports_taken, "worker-1", {"containers": [
        {**MAIN, "ports": [{"containerPort": 80, "hostPort": 18080}]}]}, True),
}


@pytest.mark.integration
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_room_shaped_as_an_operator_would_decides_the_worker(client_for: ClientFor, cluster: ClusterFn,
                                                                   ns: str, shape: str) -> None:
    """Each shape leaves only worker-2 able to run the Job's pod now; LeastLoaded alone would break
    the 0/0 tie towards worker-1, where the pod would stay Pending (or never exist: no gpu)."""
    shaper, shaped, pod_spec, worker_1_ever = SHAPES[shape]
    async with mirror_env(client_for, cluster, ns, placement="RoomAware") as env, \
            shaper(env.workers[shaped], ns):
        await env.start()
        ctrl = env.controllers[-1][0]
        job = with_pod_spec(make_job("shaped", duration_ms=500), **pod_spec)
        pod = shape_of_template(job["spec"]["template"])

        async def seen() -> bool:
            rooms = ctrl.rooms
            if not (rooms and all(r.synced and r.nodes.cache for r in rooms.values())):
                return False
            one, two = rooms["worker-1"].fit(pod, 1), rooms["worker-2"].fit(pod, 1)
            return one.ever == worker_1_ever and not one.now and two.now == 1

        await wait_for(seen, timeout=30, what=f"the room views showing worker-1 {shape}")
        await env.create(job)
        done = await env.wait_condition("shaped", "Complete", timeout=60)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2"
        assert "room on worker-2: 1 of 1 pods fit now" in done["metadata"]["annotations"][ANNOTATION_PLACEMENT_REASON]
