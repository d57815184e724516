"""kruntime/informer.py against a real API server: events, cache, selectors, restarts, 410 Gone.

The cluster shape is this module's own, because one test kills and restarts its API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from prometheus_client import REGISTRY

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient
from kruntime.informer import EventType, Informer
from kruntime.resources import Obj, Resource
from tests.conftest import ensure_namespace, wait_for

pytestmark = pytest.mark.integration

INFORMER = ClusterSpec("informer", controller_manager=False, nodes=0)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")

ClusterFor = Callable[[ClusterSpec], LocalCluster]


@dataclass
class Recorder:
    """Every event an informer delivered, in order."""

    events: list[tuple[EventType, str, Obj | None, Obj]] = field(default_factory=list)

    def __call__(self, etype: EventType, old: Obj | None, new: Obj) -> None:
        md = new["metadata"]
        self.events.append((etype, f"{md.get('namespace')}/{md['name']}", old, new))

    def of(self, key: str) -> list[EventType]:
        return [e[0] for e in self.events if e[1] == key]

    def has(self, etype: EventType, key: str) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            return etype in self.of(key)
        return probe


def cm(name: str, labels: dict[str, str] | None = None, data: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}},
            "data": data or {"v": "1"}}


def relists(client: ClusterClient) -> float:
    return REGISTRY.get_sample_value("jobmirror_runtime_relists_total",
                                     {"cluster": client.name, "resource": "configmaps"}) or 0.0


@pytest.fixture
async def informer_cluster(cluster: ClusterFor) -> AsyncIterator[LocalCluster]:
    c = await asyncio.to_thread(cluster, INFORMER)
    yield c
    if "kube-apiserver" in c._stopped:  # a failed restart test must not break the next one
        await asyncio.to_thread(c.start)


@pytest.fixture
async def client(informer_cluster: LocalCluster) -> AsyncIterator[ClusterClient]:
    # A client (and so a metrics label) of its own per test.
    cl = await ClusterClient.from_kubeconfig(f"informer-{uuid.uuid4().hex[:6]}", informer_cluster.kubeconfig,
                                             qps=0, timeout=5)
    yield cl
    await cl.close()


@contextlib.asynccontextmanager
async def running(inf: Informer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(inf.run())
    try:
        await inf.wait_synced(timeout=30)
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def server_keys(items: list[Obj]) -> set[str]:
    return {f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in items}


async def cache_matches_server(inf: Informer, client: ClusterClient, ns: str, selector: str | None = None) -> bool:
    items, _ = await client.list_all(CONFIGMAPS, ns, label_selector=selector)
    want = {f"{ns}/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in items}
    have = {k: o["metadata"]["resourceVersion"] for k, o in inf.cache.items() if k.startswith(f"{ns}/")}
    return want == have


@pytest.mark.parametrize("scope", ["namespaced", "all-namespaces"])
async def test_add_modify_delete_are_delivered_and_cached(client: ClusterClient, ns: str, scope: str) -> None:
    await ensure_namespace(client, ns)
    await client.create(CONFIGMAPS, ns, cm("before"))
    inf = Informer(client, CONFIGMAPS, namespace=ns if scope == "namespaced" else None)
    rec = Recorder()
    inf.add_handler(rec)
    async with running(inf):
        # The initial list arrives as ADDED and fills the cache.
        assert rec.of(f"{ns}/before") == ["ADDED"]
        assert inf.get(f"{ns}/before") is not None
        if scope == "namespaced":
            assert {k.split("/")[0] for k in inf.cache} == {ns}
        else:
            assert any(k.startswith("kube-system/") for k in inf.cache)

        key = f"{ns}/a"
        created = await client.create(CONFIGMAPS, ns, cm("a", data={"v": "1"}))
        await wait_for(rec.has("ADDED", key), timeout=10, what="ADDED a")
        assert inf.get(key) is not None and inf.get(key)["data"] == {"v": "1"}  # type: ignore[index]

        patched = await client.patch(CONFIGMAPS, ns, "a", {"data": {"v": "2"}})
        await wait_for(rec.has("MODIFIED", key), timeout=10, what="MODIFIED a")
        _, _, old, new = next(e for e in rec.events if e[1] == key and e[0] == "MODIFIED")
        assert old is not None and old["data"] == {"v": "1"}
        assert old["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        assert new["data"] == {"v": "2"}
        assert inf.get(key)["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]  # type: ignore[index]

        await client.delete(CONFIGMAPS, ns, "a")
        await wait_for(rec.has("DELETED", key), timeout=10, what="DELETED a")
        assert inf.get(key) is None
        assert rec.of(key) == ["ADDED", "MODIFIED", "DELETED"]
        deleted = next(e for e in rec.events if e[1] == key and e[0] == "DELETED")
        assert deleted[2] is not None and deleted[2]["data"] == {"v": "2"}  # old = last cached state
        assert await cache_matches_server(inf, client, ns)
        assert inf.healthy and inf.last_error is None


@pytest.mark.parametrize(
    ("selector", "expected", "marker_labels"),
    [
        ("app=a", {"a1", "a2"}, {"app": "a"}),
        ("app in (a,b)", {"a1", "a2", "b1"}, {"app": "b"}),
        ("app!=a", {"b1", "none"}, {}),
        ("!app", {"none"}, {}),
        ("app=a,tier=web", {"a2"}, {"app": "a", "tier": "web"}),
    ],
    ids=["equality", "set", "inequality", "absent", "conjunction"],
)
async def test_label_selector_is_honoured(client: ClusterClient, ns: str, selector: str, expected: set[str],
                                          marker_labels: dict[str, str]) -> None:
    await ensure_namespace(client, ns)
    objs = {"a1": {"app": "a"}, "a2": {"app": "a", "tier": "web"}, "b1": {"app": "b"}, "none": {}}
    names = list(objs)
    for name in names[:2]:  # some exist before the initial list, the rest arrive through the watch
        await client.create(CONFIGMAPS, ns, cm(name, objs[name]))
    inf = Informer(client, CONFIGMAPS, namespace=ns, label_selector=selector)
    rec = Recorder()
    inf.add_handler(rec)
    async with running(inf):
        for name in names[2:]:
            await client.create(CONFIGMAPS, ns, cm(name, objs[name]))
        # Created last and matching the selector: once it is delivered, the watch has caught up.
        await client.create(CONFIGMAPS, ns, cm("marker", marker_labels))
        await wait_for(rec.has("ADDED", f"{ns}/marker"), timeout=10, what="marker delivered")
        assert {k.split("/")[1] for k in inf.cache} == expected | {"marker"}
        assert {e[1].split("/")[1] for e in rec.events} == expected | {"marker"}
        assert await cache_matches_server(inf, client, ns, selector)


async def test_object_leaving_the_selector_is_delivered_as_deleted(client: ClusterClient, ns: str) -> None:
    await ensure_namespace(client, ns)
    inf = Informer(client, CONFIGMAPS, namespace=ns, label_selector="app=a")
    rec = Recorder()
    inf.add_handler(rec)
    key = f"{ns}/x"

    def sequence(*want: EventType) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            return rec.of(key) == list(want)
        return probe

    async with running(inf):
        await client.create(CONFIGMAPS, ns, cm("x", {"app": "a"}))
        await wait_for(sequence("ADDED"), timeout=10, what="x ADDED")
        await client.patch(CONFIGMAPS, ns, "x", {"metadata": {"labels": {"app": "b"}}})
        await wait_for(sequence("ADDED", "DELETED"), timeout=10, what="x DELETED when it stops matching")
        assert inf.get(key) is None
        await client.patch(CONFIGMAPS, ns, "x", {"metadata": {"labels": {"app": "a"}}})
        await wait_for(sequence("ADDED", "DELETED", "ADDED"), timeout=10, what="x ADDED when it matches again")
        assert inf.get(key) is not None


async def test_watch_survives_an_api_server_restart(informer_cluster: LocalCluster, client: ClusterClient,
                                                    ns: str) -> None:
    await ensure_namespace(client, ns)
    for name in ("keep", "doomed", "changed"):
        await client.create(CONFIGMAPS, ns, cm(name))
    inf = Informer(client, CONFIGMAPS, namespace=ns, backoff_base=0.1, backoff_cap=0.5)
    rec = Recorder()
    inf.add_handler(rec)
    async with running(inf):
        assert inf.healthy
        relists_before = relists(client)
        await asyncio.to_thread(informer_cluster.stop)

        async def unhealthy() -> bool:
            return not inf.healthy
        await wait_for(unhealthy, timeout=15, what="informer unhealthy while the API server is down")
        assert inf.last_error
        with pytest.raises(ApiError) as down:
            await client.get(CONFIGMAPS, ns, "keep")
        assert down.value.status == 0  # a transport failure: nobody answers

        # Restart and change the world before the informer can reconnect: these calls block
        # the event loop on purpose, so the informer sees the changes only once it is back.
        informer_cluster.start()
        informer_cluster.kubectl("-n", ns, "delete", "configmap", "doomed")
        informer_cluster.kubectl("-n", ns, "create", "configmap", "born-while-away", "--from-literal=v=1")
        informer_cluster.kubectl("-n", ns, "patch", "configmap", "changed", "-p", '{"data":{"v":"2"}}')

        async def healthy() -> bool:
            return inf.healthy
        await wait_for(healthy, timeout=30, what="informer healthy after the restart")
        await wait_for(rec.has("DELETED", f"{ns}/doomed"), timeout=30, what="deletion while away delivered")
        await wait_for(rec.has("ADDED", f"{ns}/born-while-away"), timeout=30, what="creation while away delivered")
        await wait_for(rec.has("MODIFIED", f"{ns}/changed"), timeout=30, what="change while away delivered")

        # The resumed watch delivers live events again.
        await client.create(CONFIGMAPS, ns, cm("after-restart"))
        await wait_for(rec.has("ADDED", f"{ns}/after-restart"), timeout=15, what="creation after restart")
        assert inf.get(f"{ns}/doomed") is None
        assert inf.get(f"{ns}/changed")["data"] == {"v": "2"}  # type: ignore[index]
        assert rec.of(f"{ns}/keep") == ["ADDED"]  # unchanged objects are not re-delivered
        assert await cache_matches_server(inf, client, ns)
        assert relists(client) > relists_before  # the old resourceVersion is gone: a relist
        assert inf.healthy and inf.last_error is None


async def test_410_gone_leads_to_a_relist_with_a_correct_cache(client: ClusterClient, ns: str) -> None:
    await ensure_namespace(client, ns)
    await client.create(CONFIGMAPS, ns, cm("one"))
    inf = Informer(client, CONFIGMAPS, namespace=ns, watch_timeout=1)
    rec = Recorder()
    inf.add_handler(rec)
    async with running(inf):
        before = relists(client)
        assert before >= 1  # the initial list
        # A stale cache entry only a relist can correct, then a resourceVersion long compacted
        # away from the watch cache: the next watch (within ~2s) gets 410 Gone.
        ghost = cm("ghost")
        ghost["metadata"].update(namespace=ns, resourceVersion="1")
        inf.cache[f"{ns}/ghost"] = ghost
        inf._rv = "1"

        async def relisted() -> bool:
            return relists(client) > before
        await wait_for(relisted, timeout=20, what="a relist after 410 Gone")
        await wait_for(rec.has("DELETED", f"{ns}/ghost"), timeout=10, what="ghost dropped by the relist")
        assert inf.get(f"{ns}/ghost") is None
        assert inf._rv not in ("", "1")
        await client.create(CONFIGMAPS, ns, cm("two"))
        await wait_for(rec.has("ADDED", f"{ns}/two"), timeout=10, what="events flow after the relist")
        assert rec.of(f"{ns}/one") == ["ADDED"]  # an unchanged object is not re-delivered by the relist
        assert await cache_matches_server(inf, client, ns)
        assert inf.healthy
