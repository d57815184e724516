"""Memory follows the objects a controller handles (issue 11 item 10): filtered caches, bounded maps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kruntime.bounded import LruDict
from kruntime.events import EventRecorder
from kruntime.informer import Informer, NamespacedInformers
from kruntime.resources import JOBS, Obj, Resource


def job(name: str, rv: str, *, ours: bool, ns: str = "ns") -> Obj:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv, "uid": f"u-{name}",
                         "labels": {"ours": "yes"} if ours else {}}}


def ours(o: Obj) -> bool:
    return bool(o["metadata"]["labels"])


class _Server:
    """A list answer and one watch stream, as the informer asks for them."""

    name = "test"

    def __init__(self) -> None:
        self.items: list[Obj] = []
        self.events: list[dict[str, Any]] = []
        self.namespaces: list[str | None] = []

    async def list_pages(self, resource: Resource, namespace: str | None,
                         **_: Any) -> AsyncIterator[tuple[list[Obj], str]]:
        self.namespaces.append(namespace)
        yield [o for o in self.items if namespace in (None, o["metadata"]["namespace"])], "9"

    async def watch(self, resource: Resource, namespace: str | None, **_: Any) -> AsyncIterator[dict[str, Any]]:
        for ev in self.events:
            yield ev


def test_lru_dict_keeps_the_most_recently_written() -> None:
    d: LruDict[str, int] = LruDict(3)
    for i in range(10):
        d[f"k{i}"] = i
    assert list(d) == ["k7", "k8", "k9"]
    d["k7"] = 70  # rewritten: now the newest
    d["k10"] = 10
    assert list(d) == ["k9", "k7", "k10"]
    assert d.setdefault("k9", 0) == 9 and list(d)[-1] == "k9"
    with pytest.raises(ValueError):
        LruDict(0)


async def test_informer_caches_only_kept_objects() -> None:
    server = _Server()
    inf = Informer(server, JOBS, keep=ours)  # type: ignore[arg-type]
    seen: list[tuple[str, str]] = []
    inf.add_handler(lambda etype, old, new: seen.append((etype, new["metadata"]["name"])))
    server.items = [job(f"n{i}", "1", ours=False) for i in range(100)] + [job("mine", "1", ours=True)]
    await inf._relist()
    assert [o["metadata"]["name"] for o in inf.items()] == ["mine"]
    assert seen == [("ADDED", "mine")]
    # Watch: a foreign object is ignored; ours losing the label leaves the cache as a deletion.
    server.events = [{"type": "ADDED", "object": job("n200", "2", ours=False)},
                     {"type": "MODIFIED", "object": job("mine", "3", ours=False)},
                     {"type": "MODIFIED", "object": job("n1", "4", ours=True)}]
    await inf._watch_once()
    assert [o["metadata"]["name"] for o in inf.items()] == ["n1"]
    assert seen[1:] == [("DELETED", "mine"), ("ADDED", "n1")]


async def test_namespaced_informers_watch_only_listed_namespaces() -> None:
    server = _Server()
    server.items = [job("a", "1", ours=True, ns="a"), job("b", "1", ours=True, ns="b"),
                    job("c", "1", ours=True, ns="c")]
    group = NamespacedInformers(server, JOBS, ["a", "b", "a"])  # type: ignore[arg-type]
    for m in group.members.values():
        await m._relist()
    assert sorted(server.namespaces, key=str) == ["a", "b"]  # never a cluster-wide list
    assert group.get("a/a") is not None and group.get("c/c") is None and group.get("b/b") is not None
    assert sorted(o["metadata"]["name"] for o in group.items()) == ["a", "b"]


class _EventSink:
    name = "sink"

    def __init__(self) -> None:
        self.created = 0

    async def create(self, resource: Resource, ns: str, body: Obj) -> Obj:
        self.created += 1
        return {"metadata": {"name": f"e{self.created}"}}

    async def patch(self, resource: Resource, ns: str, name: str, body: Obj) -> Obj:
        return {}


async def test_event_dedupe_map_is_bounded() -> None:
    sink = _EventSink()
    rec = EventRecorder(sink, "test", max_tracked=50)  # type: ignore[arg-type]
    for i in range(500):
        await rec._write(job(f"j{i}", "1", ours=True), "Normal", "Dispatched", "created")
    assert len(rec._seen) == 50 and sink.created == 500
