"""kruntime.informer's secondary indexes follow the cache through relists and updates."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from kruntime.informer import Informer
from kruntime.resources import JOBS, Obj, Resource


def obj(name: str, rv: str, owner: str | None) -> Obj:
    labels = {"owner": owner} if owner else {}
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "labels": labels}}


class _Lists:
    name = "test"

    def __init__(self) -> None:
        self.items: list[Obj] = []

    async def list_pages(self, resource: Resource, namespace: str | None,
                         **_: Any) -> AsyncIterator[tuple[list[Obj], str]]:
        yield list(self.items), "9"


def by_owner(o: Obj) -> list[str]:
    owner = (o["metadata"].get("labels") or {}).get("owner")
    return [owner] if owner else []


def names(objs: list[Obj]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


async def test_index_follows_relists() -> None:
    client = _Lists()
    inf = Informer(client, JOBS)  # type: ignore[arg-type]
    seen: list[list[str]] = []
    inf.add_handler(lambda etype, old, new: seen.append(names(inf.by_index("owner", "a"))))
    client.items = [obj("x", "1", "a"), obj("y", "1", "a"), obj("z", "1", "b")]
    inf.add_index("owner", by_owner)  # added before the first list
    await inf._relist()
    assert names(inf.by_index("owner", "a")) == ["x", "y"] and names(inf.by_index("owner", "b")) == ["z"]
    assert seen[0] == ["x", "y"]  # handlers see the index already updated
    # x moves to owner b (and becomes the most recently updated), y is deleted, z unchanged.
    client.items = [obj("x", "2", "b"), obj("z", "1", "b")]
    await inf._relist()
    assert inf.by_index("owner", "a") == []
    assert names(inf.by_index("owner", "b")) == ["z", "x"]
    assert inf.by_index("owner", "nobody") == []


async def test_index_added_after_the_cache_filled() -> None:
    client = _Lists()
    inf = Informer(client, JOBS)  # type: ignore[arg-type]
    client.items = [obj("x", "1", "a"), obj("n", "1", None)]
    await inf._relist()
    inf.add_index("owner", by_owner)
    assert names(inf.by_index("owner", "a")) == ["x"]
