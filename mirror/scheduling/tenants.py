"""Whose a Job is: its namespace's tenant (configured groups of namespaces, else the namespace)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase

from mirror.access import selects
from mirror.config import Tenant


def tenant_of(namespace: str, labels: Mapping[str, str] | None, tenants: Sequence[Tenant]) -> Tenant | None:
    """The first configured tenant that lists ``namespace`` (by name or pattern) or selects its
    labels; None: the namespace is a tenant of its own. Labels not known (None) select nothing, so
    a namespace the cache has not seen yet is its own tenant until it has."""
    for t in tenants:
        if any(fnmatchcase(namespace, p) for p in t.namespaces):
            return t
        if t.namespace_selector is not None and labels is not None and selects(t.namespace_selector, labels):
            return t
    return None


def tenant_name(namespace: str, labels: Mapping[str, str] | None, tenants: Sequence[Tenant]) -> str:
    t = tenant_of(namespace, labels, tenants)
    return t.name if t is not None else namespace
