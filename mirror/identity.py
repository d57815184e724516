"""A copy's identity: what the controller stamps on it, and the one place that reads it back.

A copy carries three labels — our ``origin``, the manager object's uid, the manager cluster's
identity — and one annotation per kind naming the manager object (``<namespace>/<name>``).
Nothing else writes them (no ``jobmirror.dev/`` key of a manager object is ever copied), and
nothing else reads them: the reconciler, the worker caches, worker events, GC, ``inspect``
and ``check-config`` all ask here. What may be trusted follows from who can edit a copy: a
user who may edit Jobs in one worker namespace can rewrite these labels there, so a copy
counts as an object's only when origin, uid **and** its own namespace/name agree
(:func:`is_copy_of`), and it never names an object outside its own namespace
(:func:`manager_key_of`).
"""

from __future__ import annotations

from dataclasses import dataclass

from jobapi.objects import annotations_of, labels_of
from kruntime.names import dns1123_label_error, dns1123_subdomain_error
from kruntime.resources import Obj, key_of
from mirror.naming import LABEL_ORIGIN, LABEL_ORIGIN_CLUSTER, LABEL_ORIGIN_UID, origin_annotation


@dataclass(frozen=True)
class CopyLabels:
    """What a copy's labels say (any may be missing or edited; see the module doc)."""

    origin: str | None
    manager_uid: str | None
    manager_cluster: str | None


def stamp(kind: str, manager: Obj, *, origin: str, origin_cluster: str) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations that make an object the copy of ``manager`` (a ``kind``)."""
    md = manager["metadata"]
    labels = {LABEL_ORIGIN: origin, LABEL_ORIGIN_UID: md["uid"], LABEL_ORIGIN_CLUSTER: origin_cluster}
    return labels, {origin_annotation(kind): f"{md['namespace']}/{md['name']}"}


def selector(origin: str) -> str:
    """The label selector of the copies made under ``origin``."""
    return f"{LABEL_ORIGIN}={origin}"


def labels_of_copy(copy: Obj) -> CopyLabels:
    labels = labels_of(copy)
    return CopyLabels(labels.get(LABEL_ORIGIN), labels.get(LABEL_ORIGIN_UID), labels.get(LABEL_ORIGIN_CLUSTER))


def manager_key_of(kind: str, copy: Obj) -> str | None:
    """The ``namespace/name`` of the manager object (a ``kind``) the copy came from, if it says so
    for its own namespace with names the API server accepts: one naming an object elsewhere, or a
    name such as ``..`` that no object can have (it would walk the URL path), claims nothing."""
    key = annotations_of(copy).get(origin_annotation(kind))
    if not isinstance(key, str):
        return None
    ns, _, name = key.partition("/")
    if ns != (copy.get("metadata") or {}).get("namespace"):
        return None
    return key if dns1123_label_error(ns) is None and dns1123_subdomain_error(name) is None else None


def is_copy_of(kind: str, copy: Obj, manager: Obj, *, origin: str) -> bool:
    """Whether ``copy`` is the copy ``manager`` made: our origin, its uid and its namespace/name."""
    said = labels_of_copy(copy)
    return (said.origin == origin and said.manager_uid == manager["metadata"].get("uid")
            and manager_key_of(kind, copy) == key_of(manager))
