"""Typed views of the raw JSON bodies, and the one set of metadata accessors.

Objects stay the JSON the API server sent, end to end (fields this code has never heard of
must survive a round trip), so these are ``TypedDict``s, ``total=False``: they name the
fields the controllers read and give their types, without turning bodies into models.
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


class Condition(TypedDict, total=False):
    type: str
    status: str
    reason: str
    message: str
    lastProbeTime: str
    lastTransitionTime: str


class UncountedTerminatedPods(TypedDict, total=False):
    succeeded: list[str]
    failed: list[str]


class JobSpec(TypedDict, total=False):
    parallelism: int
    completions: int
    activeDeadlineSeconds: int
    podFailurePolicy: dict[str, Any]
    successPolicy: dict[str, Any]
    backoffLimit: int
    backoffLimitPerIndex: int
    maxFailedIndexes: int
    selector: dict[str, Any]
    manualSelector: bool
    template: dict[str, Any]
    ttlSecondsAfterFinished: int
    completionMode: str
    suspend: bool
    podReplacementPolicy: str
    managedBy: str


class JobStatus(TypedDict, total=False):
    conditions: list[Condition]
    startTime: str
    completionTime: str
    active: int
    succeeded: int
    failed: int
    terminating: int
    ready: int
    completedIndexes: str
    failedIndexes: str
    uncountedTerminatedPods: UncountedTerminatedPods


class Job(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JobSpec
    status: JobStatus


class PodStatus(TypedDict, total=False):
    phase: str
    conditions: list[dict[str, Any]]
    containerStatuses: list[dict[str, Any]]
    initContainerStatuses: list[dict[str, Any]]
    startTime: str


class Pod(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: dict[str, Any]
    status: PodStatus


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
