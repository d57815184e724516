"""The scheduling order on real API servers (issue 35 item 7): a manager and one kwok worker of two
nodes, the controller in-process with placement RoomAware and scheduling FairShare.

Pods bound to the worker's nodes by the test ("hogs", as other tenants' pods) leave room for a
given number of 1-cpu pods; Jobs of 1 cpu then wait in the manager, and the tests watch who leaves
the line first when room appears: another tenant's Job before a burst's, a Job of a higher
PriorityClass before its own tenant's earlier ones, and a Job over its tenant's quota once the
tenant's running Job ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import EVENTS, JOBS, NODES, PODS, PRIORITY_CLASSES, Obj
from mirror.controller import MirrorController
from mirror.naming import ANNOTATION_CLUSTER
from mirror.room.quantity import amount
from mirror.room.requests import shape_of_template
from tests.conftest import WORKER_1, ensure_namespace, wait_for
from tests.integration.mirror_env import MirrorEnv, make_job, mirror_env

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]
ONE_CPU = shape_of_template({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})


def one_cpu(name: str, duration_ms: int, priority_class: str | None = None) -> Obj:
    pod_spec = {"priorityClassName": priority_class} if priority_class else None
    return make_job(name, duration_ms=duration_ms, requests={"cpu": "1"}, pod_spec=pod_spec)


@contextlib.asynccontextmanager
async def room_for(worker: ClusterClient, ns: str, slots: int) -> AsyncIterator[None]:
    """A 10-minute pod on each node requesting its cpu but what ``slots`` 1-cpu pods need over the
    worker (the first nodes keep 1 cpu each, the others none)."""
    nodes, _ = await worker.list_all(NODES)
    assert len(nodes) >= slots
    names = []
    for i, n in enumerate(sorted(nodes, key=lambda n: n["metadata"]["name"])):
        node = n["metadata"]["name"]
        # all of it but the slots, whatever else runs there: the room never exceeds the slots (the
        # room views show it once the pods of earlier tests have ended)
        hog = amount("cpu", n["status"]["allocatable"]["cpu"]) - (1000 if i < slots else 0)
        name = f"hog-{node}"[:63]
        await worker.create(PODS, ns, {"metadata": {"name": name, "annotations": {
            "jobmirror.dev/kwok-duration": "600000ms"}}, "spec": {
            "nodeName": node, "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": f"{max(hog, 0)}m"}}}]}})
        names.append(name)
    try:
        yield
    finally:
        for name in names:
            with contextlib.suppress(ApiError):
                await worker.delete(PODS, ns, name)


async def rooms_show(ctrl: MirrorController, slots: int) -> None:
    async def probe() -> bool:
        return bool(ctrl.rooms) and all(r.synced and r.nodes.cache and r.fit(ONE_CPU, 8).now == slots
                                        for r in ctrl.rooms.values())

    await wait_for(probe, timeout=45, what=f"the worker's room view showing room for {slots} 1-cpu pods")


async def worker_of(env: MirrorEnv, ns: str, name: str) -> str | None:
    j = await env.manager.get(JOBS, ns, name)
    return (j["metadata"].get("annotations") or {}).get(ANNOTATION_CLUSTER)


async def placed(env: MirrorEnv, ns: str, name: str, timeout: float = 30) -> None:
    async def probe() -> bool:
        return await worker_of(env, ns, name) is not None

    await wait_for(probe, timeout=timeout, what=f"{ns}/{name} placed")


async def waiting(env: MirrorEnv, ns: str, *names: str) -> None:
    """Each of ``names`` has been looked at and waits in the manager (its WaitingFor* event)."""
    for name in names:
        async def probe(name: str = name) -> bool:
            items, _ = await env.manager.list_all(EVENTS, ns, field_selector=f"involvedObject.name={name}")
            said = any(e["reason"].startswith("WaitingFor") for e in items)
            return said or await worker_of(env, ns, name) is not None

        await wait_for(probe, timeout=30, what=f"{ns}/{name} waiting in the manager")
        said = [(e["reason"], e["message"]) for e in (await env.manager.list_all(
            EVENTS, ns, field_selector=f"involvedObject.name={name}"))[0]]
        assert await worker_of(env, ns, name) is None, (name, said)


@pytest.mark.integration
async def test_a_tenants_burst_does_not_hold_another_tenants_job_past_the_next_free_room(
        client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    """Room for two: tenant a runs a long Job and a short one, then bursts three more; tenant b
    submits one after the burst. When the short Job ends, b's Job takes that room (a still runs the
    long one, b nothing), ahead of a's older waiting Jobs."""
    other = f"{ns}-b"
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1,), placement="RoomAware",
                          namespaces=[ns, other]) as env, room_for(env.workers["worker-1"], ns, 2):
        for c in (env.manager, env.workers["worker-1"]):
            await ensure_namespace(c, other)
        ctrl = await env.start()
        await rooms_show(ctrl, 2)
        await env.create(one_cpu("a-long", 30_000))
        await env.create(one_cpu("a-short", 3_000))
        await placed(env, ns, "a-long")
        await placed(env, ns, "a-short")
        for i in range(3):
            await env.create(one_cpu(f"a-burst-{i}", 500))
        await env.manager.create(JOBS, other, one_cpu("b-one", 2_000))  # runs while the test looks
        await waiting(env, ns, "a-burst-0", "a-burst-1", "a-burst-2")
        await waiting(env, other, "b-one")
        await env.wait_condition("a-short", "Complete", timeout=30)
        await placed(env, other, "b-one", timeout=20)  # the next free room: before a-long ends
        assert [await worker_of(env, ns, f"a-burst-{i}") for i in range(3)] == [None, None, None]
        b = await env.manager.get(JOBS, other, "b-one")
        assert b["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-1"
        await placed(env, ns, "a-burst-0", timeout=30)  # b's Job ran: a's line moves on
        await env.manager.delete(JOBS, ns, "a-long")  # its pod would hold room in the next test


@contextlib.asynccontextmanager
async def priority_class(clients: list[ClusterClient], name: str, value: int) -> AsyncIterator[None]:
    for c in clients:
        await c.create(PRIORITY_CLASSES, None, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                                "metadata": {"name": name}, "value": value})
    try:
        yield
    finally:
        for c in clients:
            with contextlib.suppress(ApiError):
                await c.delete(PRIORITY_CLASSES, None, name)


@pytest.mark.integration
async def test_a_high_priority_job_is_placed_before_its_tenants_earlier_ones(
        client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    """Room for one: a runs a Job, then submits two, then one of a PriorityClass of value 1000 (on
    the manager, and on the worker where its pods run). When the room frees, the urgent one takes it."""
    urgent = f"jm-urgent-{ns}"
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1,), placement="RoomAware") as env, \
            room_for(env.workers["worker-1"], ns, 1), \
            priority_class([env.manager, env.workers["worker-1"]], urgent, 1000):
        ctrl = await env.start()
        await rooms_show(ctrl, 1)
        await env.create(one_cpu("first", 3_000))
        await placed(env, ns, "first")
        await env.create(one_cpu("early-1", 500))
        await env.create(one_cpu("early-2", 500))
        await env.create(one_cpu("urgent", 2_000, urgent))  # runs while the test looks
        await waiting(env, ns, "early-1", "early-2", "urgent")
        await env.wait_condition("first", "Complete", timeout=30)
        await placed(env, ns, "urgent", timeout=20)
        assert [await worker_of(env, ns, n) for n in ("early-1", "early-2")] == [None, None]
        assert "UnknownPriorityClass" not in [e["reason"] for e in await env.events("urgent")]
        done = await env.wait_condition("urgent", "Complete", timeout=30)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-1"


@pytest.mark.integration
async def test_a_job_over_its_tenants_quota_waits_and_is_placed_when_the_tenants_work_ends(
        client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    """Tenant t (this namespace) may run 1 Job at once; the worker has room for both."""
    scheduling = {"tenants": [{"name": "t", "namespaces": [ns], "quota": {"jobs": 1, "cpu": "1"}}]}
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1,), placement="RoomAware",
                          scheduling=scheduling) as env, room_for(env.workers["worker-1"], ns, 2):
        ctrl = await env.start()
        await rooms_show(ctrl, 2)
        await env.create(one_cpu("running", 3_000))
        await placed(env, ns, "running")
        await env.create(one_cpu("over", 500))
        said = await env.wait_event("over", "WaitingForQuota")
        assert "tenant t is at its quota: Jobs 1+1 > quota 1; cpu 1+1 > quota 1" in said["message"]
        assert await worker_of(env, ns, "over") is None
        await env.wait_condition("running", "Complete", timeout=30)
        done = await env.wait_condition("over", "Complete", timeout=30)
        assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-1"
        assert [e["reason"] for e in await env.events("over")].count("WaitingForQuota") == 1
