"""One tenant's Job cannot hold every worker for everyone (issue 32 item 1), on real API servers.

A user who may only create Jobs in manager namespace A writes a Job that finds no room now on
any worker: a container ``hostPort`` that a DaemonSet's pods hold on every node, a cpu request
equal to the largest node's allocatable while DaemonSet pods take 10m on every node, or a
request that only ordinary long-running pods keep from fitting. Three small Jobs of namespace B
created after it are placed all the same: the first two blockers are "never fits" (a
NoWorkerFits event, no place in any line) and the third stops holding the workers after
``headOfLineHold`` (5 s here), says so once, and keeps waiting. Before the fix the three small
Jobs waited behind the blocker for good ("... have room now but Jobs created earlier wait for it
there").
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import EVENTS, JOBS, NODES, PODS, Obj, Resource
from mirror.naming import ANNOTATION_CLUSTER
from mirror.room.quantity import amount
from mirror.room.requests import shape_of_template
from testkit.jobs import KWOK_OUTCOME
from tests.conftest import MANAGER, ensure_namespace, wait_for
from tests.integration.mirror_env import make_job, mirror_env
from tests.integration.test_mirror_room_placement import hogs

pytestmark = [pytest.mark.integration, pytest.mark.security]

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]

DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet")
PORT = 18093
HOLD = 5.0


@contextlib.asynccontextmanager
async def node_agent(worker: ClusterClient, ns: str) -> AsyncIterator[None]:
    """A real DaemonSet (as a monitoring agent is) whose pod holds host port PORT and 10m cpu on
    every node; its pods keep running (kwok outcome ``hang``). Waits until each node runs one."""
    nodes, _ = await worker.list_all(NODES)
    await worker.create(DAEMONSETS, ns, {"metadata": {"name": "agent"}, "spec": {
        "selector": {"matchLabels": {"app": "agent"}},
        "template": {"metadata": {"labels": {"app": "agent", KWOK_OUTCOME: "hang"}}, "spec": {"containers": [
            {"name": "agent", "image": "busybox", "resources": {"requests": {"cpu": "10m"}},
             "ports": [{"containerPort": PORT, "hostPort": PORT}]}]}}}})

    async def on_every_node() -> bool:
        pods, _ = await worker.list_all(PODS, ns, label_selector="app=agent")
        bound = {p["spec"].get("nodeName") for p in pods if (p.get("status") or {}).get("phase") == "Running"}
        return bound >= {n["metadata"]["name"] for n in nodes}

    try:
        try:
            await wait_for(on_every_node, timeout=120, what="the DaemonSet's pod running on every node")
        except AssertionError as exc:
            ds = await worker.get(DAEMONSETS, ns, "agent")
            pods, _ = await worker.list_all(PODS, ns)
            events, _ = await worker.list_all(EVENTS, ns)
            seen = [(p["metadata"]["name"], p["spec"].get("nodeName"), p.get("status")) for p in pods]
            raise AssertionError(f"{exc}; DaemonSet status {ds.get('status')}; pods {seen}"
                                 f"; events {[(e.get('reason'), e.get('message')) for e in events][-10:]}; nodes "
                                 f"{[(n['metadata']['name'], n['spec'].get('taints')) for n in nodes]}") from exc
        yield
    finally:
        with contextlib.suppress(ApiError):
            await worker.delete(DAEMONSETS, ns, "agent")


async def largest_cpu_milli(worker: ClusterClient) -> int:
    nodes, _ = await worker.list_all(NODES)
    return max(amount("cpu", n["status"]["allocatable"]["cpu"]) for n in nodes)


def pod_with(name: str, namespace: str, container: Obj) -> Obj:
    job = make_job(name, duration_ms=500)
    job["metadata"]["namespace"] = namespace
    job["spec"]["template"]["spec"]["containers"] = [{"name": "main", "image": "busybox", **container}]
    return job


#: the blocker's container, from the largest node's allocatable cpu (milli); whether it is "never"
BLOCKERS: dict[str, tuple[Callable[[int], Obj], bool]] = {
    "host-port-held-by-a-daemonset": (lambda _: {"ports": [{"containerPort": PORT, "hostPort": PORT}]}, True),
    "cpu-of-the-largest-node": (lambda cpu: {"resources": {"requests": {"cpu": f"{cpu}m"}}}, True),
    "room-that-never-comes": (lambda cpu: {"resources": {"requests": {"cpu": f"{cpu - 10}m"}}}, False),
}


@pytest.mark.parametrize("blocker", list(BLOCKERS))
async def test_a_blocker_of_one_namespace_does_not_keep_another_namespaces_jobs_from_room(
        client_for: ClientFor, cluster: ClusterFn, ns: str, blocker: str) -> None:
    container_for, never = BLOCKERS[blocker]
    ns_b = f"{ns}-b"
    await ensure_namespace(await client_for(MANAGER), ns_b)
    async with contextlib.AsyncExitStack() as stack:
        env = await stack.enter_async_context(mirror_env(client_for, cluster, ns, namespaces=[ns, ns_b],
                                                         placement="RoomAware", headOfLineHold=HOLD))
        for w in env.workers.values():
            await stack.enter_async_context(node_agent(w, ns))
            if not never:  # ordinary pods (they may end) take all but 1 cpu of every node
                await stack.enter_async_context(hogs(w, ns, 1000))
        largest = max([await largest_cpu_milli(w) for w in env.workers.values()])
        blocking = pod_with("blocker", ns, container_for(largest))
        small = [pod_with(f"small-{i}", ns_b, {"resources": {"requests": {"cpu": "100m"}}}) for i in range(3)]
        ctrl = await env.start()
        blocker_shape = shape_of_template(blocking["spec"]["template"])
        small_shape = shape_of_template(small[0]["spec"]["template"])

        async def rooms_seen() -> bool:
            rooms = ctrl.rooms
            if not (rooms and all(r.synced and r.nodes.cache for r in rooms.values())):
                return False
            return all(r.fit(blocker_shape, 1).ever is not never and not r.fit(blocker_shape, 1).now
                       and r.fit(small_shape, 1).now for r in rooms.values())

        await wait_for(rooms_seen, timeout=60, what="the room views showing the DaemonSet pods (and hogs)")
        await env.create(blocking)
        first = await env.wait_event("blocker", "NoWorkerFits" if never else "WaitingForRoom")
        if never:
            assert "DaemonSet pods" in first["message"], first["message"]
        await asyncio.sleep(1.1)  # creationTimestamp has whole seconds: the small Jobs come after it
        created = time.monotonic()
        for j in small:
            await env.manager.create(JOBS, ns_b, j)

        async def all_placed() -> bool:
            got = [await env.manager.get(JOBS, ns_b, j["metadata"]["name"]) for j in small]
            return all(ANNOTATION_CLUSTER in (g["metadata"].get("annotations") or {}) for g in got)

        await wait_for(all_placed, timeout=HOLD + 20, what="namespace B's three small Jobs placed")
        waited = time.monotonic() - created
        if never:
            assert waited < HOLD + 10, f"placed after {waited:.1f} s: the blocker should hold nothing"
        else:
            ended = await env.wait_event("blocker", "HeadOfLineHoldEnded", timeout=HOLD + 20)
            assert "it no longer holds" in ended["message"], ended["message"]
            held = [e for e in await env.events("blocker") if e["reason"] == "HeadOfLineHoldEnded"]
            assert len(held) == 1  # said once
        left = await env.get("blocker")
        assert left is not None and ANNOTATION_CLUSTER not in (left["metadata"].get("annotations") or {})
        assert ctrl.placer.waiting.keys() <= ({left["metadata"]["uid"]} if not never else set())
        await env.manager.delete(JOBS, ns, "blocker")
        await env.wait_gone("blocker")
