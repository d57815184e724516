"""Fakes for one garbage-collection round (``mirror.gc.collect_once``) without servers.

GC needs little of its clients: a manager ``get`` per copy it confirms and a worker ``delete``;
these record both, so a table can say which copies were read and which deleted.
"""

from __future__ import annotations

from typing import Any

from kruntime.client import ApiError
from kruntime.resources import Obj, Resource
from mirror.naming import (
    ANNOTATION_CLUSTER,
    ANNOTATION_ORIGIN_JOB,
    LABEL_ORIGIN,
    LABEL_ORIGIN_CLUSTER,
    LABEL_ORIGIN_UID,
)

#: the origin and manager cluster the fake copies carry (pass them to ``collect_once``)
ORIGIN, MANAGER_CLUSTER = "o", "mc"


def worker_copy(name: str, *, ns: str = "ns", origin_job: str | None = None, ours: bool = True,
                rv: str = "1") -> Obj:
    """A copy on a worker of manager Job ``ns/name`` (uid ``u-<name>``); ``ours`` False: a forged one
    (our origin, no origin-cluster label)."""
    labels = {LABEL_ORIGIN: ORIGIN, LABEL_ORIGIN_UID: f"u-{name}"}
    if ours:
        labels[LABEL_ORIGIN_CLUSTER] = MANAGER_CLUSTER
    return {"metadata": {"name": name, "namespace": ns, "uid": f"c-{ns}-{name}", "resourceVersion": rv,
                         "labels": labels, "annotations": {ANNOTATION_ORIGIN_JOB: origin_job or f"{ns}/{name}"}}}


def manager_job(name: str, worker: str, *, ns: str = "ns") -> Obj:
    """Manager Job ``ns/name`` (uid ``u-<name>``, what ``worker_copy`` names) placed on ``worker``."""
    return {"metadata": {"name": name, "namespace": ns, "uid": f"u-{name}",
                         "annotations": {ANNOTATION_CLUSTER: worker}}}


class FakeManager:
    """The manager's Job reads: ``jobs`` (by ns/name) exist, ``broken`` names raise, any other read
    answers ``status`` (404: gone). ``reads`` lists the names read, in order."""

    def __init__(self, jobs: dict[str, Obj] | None = None, *, broken: tuple[str, ...] = (), status: int = 404) -> None:
        self.jobs, self.broken, self.status = jobs or {}, broken, status
        self.reads: list[str] = []

    @property
    def gets(self) -> int:
        return len(self.reads)

    async def get(self, resource: Resource, ns: str, name: str) -> Obj:
        self.reads.append(name)
        if name in self.broken:
            raise RuntimeError(f"cannot read {name}")
        if f"{ns}/{name}" in self.jobs:
            return self.jobs[f"{ns}/{name}"]
        raise ApiError(self.status, "NotFound" if self.status == 404 else "InternalError", "no", {})


class FakeDeletes:
    """A worker client that only deletes, and remembers what."""

    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def delete(self, resource: Resource, ns: str, name: str, **_: Any) -> Obj:
        self.deleted.append(name)
        return {}


class FakeWorker:
    """A healthy worker whose cache holds ``copies`` (of every kind)."""

    healthy = True

    def __init__(self, name: str, copies: list[Obj]) -> None:
        self.name, self._copies, self.client = name, copies, FakeDeletes()

    def copies(self, kind: Any) -> list[Obj]:
        return self._copies
