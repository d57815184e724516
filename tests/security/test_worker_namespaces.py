"""Worker namespaces the controller creates are never weaker than the tenant's namespace on the
manager, and it uses only the namespaces it is allowed to (issue 19 item 3), on real API servers:
Pod Security admission of the worker judges a privileged hostPath pod in the created namespace.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from jobapi.objects import labels_of
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import EVENTS, JOBS, NAMESPACES, PODS, Obj
from mirror.naming import ANNOTATION_PIN, LABEL_ORIGIN
from tests.conftest import MANAGER, ensure_namespace, wait_for
from tests.integration.mirror_env import MirrorEnv, make_job, mirror_env, wait_syncs

pytestmark = [pytest.mark.integration, pytest.mark.security]

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]
PIN = {ANNOTATION_PIN: "worker-1"}
PRIVILEGED_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "root"}, "spec": {
    "containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": True},
                    "volumeMounts": [{"name": "host", "mountPath": "/host"}]}],
    "volumes": [{"name": "host", "hostPath": {"path": "/"}}]}}


async def manager_namespace(client_for: ClientFor, name: str, labels: dict[str, str]) -> None:
    await (await client_for(MANAGER)).create(NAMESPACES, None, {"metadata": {"name": name, "labels": labels}})


async def created_on_worker(env: MirrorEnv, ns: str) -> Obj:
    async def probe() -> Obj | None:
        items, _ = await env.workers["worker-1"].list_all(JOBS, ns, label_selector=f"{LABEL_ORIGIN}={env.origin}")
        return items[0] if items else None

    await wait_for(probe, timeout=60, what=f"a copy in {ns} on worker-1")
    return await env.workers["worker-1"].get(NAMESPACES, None, ns)


async def privileged_pod_refused(worker: ClusterClient, ns: str) -> str:
    await ensure_namespace(worker, ns)  # its default ServiceAccount (no controller-manager in the bed)
    with pytest.raises(ApiError) as exc:
        await worker.create(PODS, ns, PRIVILEGED_POD, dry_run=True)
    assert exc.value.status == 403, exc.value
    return exc.value.message


async def test_a_created_worker_namespace_keeps_the_managers_pod_security(client_for: ClientFor,
                                                                          cluster: ClusterFn, ns: str) -> None:
    """the manager namespace's Pod Security labels (and configured extra keys) go to the namespace
    created on the worker; a privileged hostPath pod is then refused there as on the manager"""
    labelled, bare = f"{ns}-psa", f"{ns}-bare"
    await manager_namespace(client_for, labelled, {"pod-security.kubernetes.io/enforce": "restricted",
                                                   "pod-security.kubernetes.io/warn": "restricted",
                                                   "team": "a", "unrelated": "x"})
    await manager_namespace(client_for, bare, {})
    async with mirror_env(client_for, cluster, ns, namespaces=[labelled, bare], namespace_labels=["team"]) as env:
        await env.start()
        await env.manager.create(JOBS, labelled, make_job("j", outcome="hang", annotations=PIN))
        await env.manager.create(JOBS, bare, make_job("j", outcome="hang", annotations=PIN))
        got = labels_of(await created_on_worker(env, labelled))
        assert {k: v for k, v in got.items() if k != "kubernetes.io/metadata.name"} == {
            "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted",
            "team": "a"}, got
        assert "violates PodSecurity \"restricted" in await privileged_pod_refused(env.workers["worker-1"], labelled)
        # A manager namespace without Pod Security labels: never a privileged namespace on the worker.
        got = labels_of(await created_on_worker(env, bare))
        assert got.get("pod-security.kubernetes.io/enforce") == "baseline", got
        assert "violates PodSecurity \"baseline" in await privileged_pod_refused(env.workers["worker-1"], bare)


async def test_only_allowed_worker_namespaces_are_used(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    """workerNamespaces: a claimed Job in a namespace outside it gets an event and no copy, and no
    namespace is created for it on any worker; one inside it runs"""
    outside = f"{ns}-outside"
    await manager_namespace(client_for, outside, {})
    allowed = [f"{ns[:4]}*-keep", ns]  # a pattern that does not match, and the name
    async with mirror_env(client_for, cluster, ns, namespaces=[ns, outside], worker_namespaces=allowed) as env:
        await env.start()
        await env.manager.create(JOBS, outside, make_job("j", outcome="hang", annotations=PIN))
        await env.create(make_job("inside", annotations=PIN))
        await env.wait_condition("inside", "Complete", timeout=60)

        async def told() -> Obj | None:
            items, _ = await env.manager.list_all(EVENTS, outside, field_selector="involvedObject.name=j")
            return next((e for e in items if e["reason"] == "NamespaceNotAllowed"), None)

        event = await wait_for(told, timeout=30, what="NamespaceNotAllowed on the Job outside")
        assert outside in event["message"] and "workerNamespaces" in event["message"], event
        await wait_syncs(5)
        for name, worker in env.workers.items():
            with pytest.raises(ApiError) as exc:
                await worker.get(NAMESPACES, None, outside)
            assert exc.value.not_found, (name, exc.value)


def privileged_job(name: str, worker: str) -> Obj:
    """A Job whose pod mounts the node's root privileged, pinned to ``worker``."""
    return make_job(name, outcome="hang", annotations={ANNOTATION_PIN: worker},
                    container={"securityContext": {"privileged": True},
                               "volumeMounts": [{"name": "host", "mountPath": "/host"}]},
                    pod_spec={"volumes": [{"name": "host", "hostPath": {"path": "/"}}]})


async def copies_in(env: MirrorEnv, worker: str, ns: str) -> list[Obj]:
    items, _ = await env.workers[worker].list_all(JOBS, ns, label_selector=f"{LABEL_ORIGIN}={env.origin}")
    return items


async def test_an_existing_worker_namespace_weaker_than_the_managers_gets_no_copy(
        client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    """issue 32 item 5: the namespace exists on worker-1 unlabelled (privileged) while the manager's
    enforces restricted: a privileged hostPath Job pinned there gets a NamespaceWeaker Warning and no
    copy; worker-2's namespace enforcing restricted takes its copy; once worker-1's is labelled
    restricted too, the copy is made there"""
    strict = f"{ns}-strict"
    await manager_namespace(client_for, strict, {"pod-security.kubernetes.io/enforce": "restricted"})
    async with mirror_env(client_for, cluster, ns, namespaces=[strict]) as env:
        await ensure_namespace(env.workers["worker-1"], strict)  # unlabelled: privileged
        await env.workers["worker-2"].create(NAMESPACES, None, {"metadata": {
            "name": strict, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
        await env.start()
        await env.manager.create(JOBS, strict, privileged_job("root", "worker-1"))
        await env.manager.create(JOBS, strict, make_job("fine", outcome="hang",
                                                        annotations={ANNOTATION_PIN: "worker-2"}))

        async def warned() -> Obj | None:
            items, _ = await env.manager.list_all(EVENTS, strict, field_selector="involvedObject.name=root")
            return next((e for e in items if e["reason"] == "NamespaceWeaker"), None)

        event = await wait_for(warned, timeout=60, what="NamespaceWeaker on the Job pinned to worker-1")
        assert event["type"] == "Warning", event
        for said in ("worker-1", "'privileged'", "'restricted'", "unlabelled"):
            assert said in event["message"], (said, event["message"])
        await wait_for(lambda: copies_in(env, "worker-2", strict), timeout=60, what="the copy on worker-2")
        await env.look_again(f"{strict}/root")
        assert await copies_in(env, "worker-1", strict) == []

        await env.workers["worker-1"].patch(NAMESPACES, None, strict, {"metadata": {"labels": {
            "pod-security.kubernetes.io/enforce": "restricted"}}})
        await wait_for(lambda: copies_in(env, "worker-1", strict), timeout=120,
                       what="the copy on worker-1 once its namespace enforces restricted")


async def test_default_and_kube_namespaces_are_used_only_when_named(client_for: ClientFor, cluster: ClusterFn,
                                                                    ns: str) -> None:
    """issue 32 item 5: ``default`` (which exists on every worker, unlabelled) gets no copy with an
    empty workerNamespaces, nor with ``*``"""
    name = f"{ns}-j"
    async with mirror_env(client_for, cluster, ns, namespaces=["default"], worker_namespaces=["*"]) as env:
        await env.start()
        await env.manager.create(JOBS, "default", make_job(name, outcome="hang", annotations=PIN))
        try:
            async def told() -> Obj | None:
                items, _ = await env.manager.list_all(EVENTS, "default", field_selector=f"involvedObject.name={name}")
                return next((e for e in items if e["reason"] == "NamespaceNotAllowed"), None)

            event = await wait_for(told, timeout=30, what="NamespaceNotAllowed on the Job in default")
            assert "default" in event["message"] and "workerNamespaces" in event["message"], event
            await wait_syncs(5)
            for worker in env.workers:
                assert [c for c in await copies_in(env, worker, "default")
                        if c["metadata"]["name"] == name] == [], worker
        finally:
            await env.manager.delete(JOBS, "default", name)

            async def gone() -> bool:
                try:
                    await env.manager.get(JOBS, "default", name)
                except ApiError as exc:
                    return exc.not_found
                return False

            await wait_for(gone, timeout=30, what=f"default/{name} deleted (its finalizer released)")
