"""The one set of metadata accessors over raw JSON bodies, and the typed metadata they return.

Objects stay the JSON the API server sent, end to end (fields this code has never heard of
must survive a round trip). Only metadata is typed (``ObjectMeta``, ``OwnerReference``,
``TypedDict``s, ``total=False``), because every kind shares it; Job and Pod bodies are read
through ``jobapi.conditions`` and the kind's own pure modules, not through typed views that
would be half-used.
Every accessor here reads only: none adds a missing key to the object it is given, so
reading an informer's cached object can never change the cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict, cast


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    deletionGracePeriodSeconds: int
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    finalizers: list[str]
    managedFields: list[dict[str, Any]]


# -- metadata accessors (any object) ------------------------------------------------------------

def md(obj: Mapping[str, Any]) -> ObjectMeta:
    """The object's metadata; an empty one (not stored) when it has none."""
    m = obj.get("metadata")
    return cast(ObjectMeta, m) if isinstance(m, dict) else ObjectMeta()


def uid(obj: Mapping[str, Any]) -> str:
    return str(md(obj).get("uid", ""))


def name(obj: Mapping[str, Any]) -> str:
    return str(md(obj).get("name", ""))


def namespace(obj: Mapping[str, Any]) -> str:
    return str(md(obj).get("namespace", ""))


def deletion_timestamp(obj: Mapping[str, Any]) -> str | None:
    v = md(obj).get("deletionTimestamp")
    return str(v) if v else None


def controller_ref(obj: Mapping[str, Any]) -> OwnerReference | None:
    for ref in md(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    a = md(obj).get("annotations")
    return a if isinstance(a, dict) else {}


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    lb = md(obj).get("labels")
    return lb if isinstance(lb, dict) else {}


def not_ended(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """Names of the pods that may still run a container: not Succeeded or Failed, whether or not
    their deletion has begun (a terminating pod runs until its grace period ends)."""
    return [name(p) for p in pods if ((p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))]
