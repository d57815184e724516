"""Worker namespaces: which ones the controller may use, and the security posture of those it creates.

The tenancy model: a namespace of one name belongs to one tenant on the manager and on every
worker. A copy of a manager Job in ``team-a`` runs in ``team-a`` on its worker, under that
namespace's rules there. When the controller creates the namespace (``missingNamespace:
Create``) it must not create it weaker than the tenant's namespace on the manager: an
unlabelled namespace is ``privileged`` under Pod Security admission, so a tenant limited to
``baseline`` on the manager would run a privileged hostPath pod on a worker. The labels of
:data:`POD_SECURITY` are therefore copied from the manager namespace, and where it has none
:attr:`~mirror.config.Config.created_namespace_labels` fills in (``enforce: baseline`` by
default). Namespaces that already exist on a worker are the worker admin's and are left as
they are, but a copy is made in one only when it enforces at least the manager namespace's
Pod Security level (:func:`weaker_posture`, issue 32): a tenant held to ``restricted`` on the
manager must not run a hostPath pod in an unlabelled namespace of the same name on a worker.

The controller cannot read an API server's admission configuration, so an unlabelled namespace
counts as ``privileged`` (the Pod Security admission default) on both sides. A cluster whose
admission configuration sets a stricter default should label its namespaces to say so; an
``enforce`` value Pod Security admission does not know counts as ``restricted``, the level it
falls back to. Only levels are compared, not ``enforce-version``.

``default`` and ``kube-*`` exist on every cluster and belong to its admins: they are used on
workers only when ``workerNamespaces`` names them (:func:`may_use`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from fnmatch import fnmatchcase

from jobapi.objects import labels_of
from kruntime.resources import Obj

#: Pod Security admission's namespace labels (enforce, audit, warn and their -version).
POD_SECURITY = "pod-security.kubernetes.io/"


#: ``enforce`` label of Pod Security admission, and its levels from weakest to strongest
ENFORCE = POD_SECURITY + "enforce"
LEVELS = ("privileged", "baseline", "restricted")


def reserved(namespace: str) -> bool:
    """``default`` and ``kube-*``: the cluster's own namespaces (patterns too: ``kube-*`` is one)."""
    return namespace == "default" or namespace.startswith("kube-")


def may_use(namespace: str, allowed: Sequence[str]) -> bool:
    """Whether the controller may create or use ``namespace`` on workers (``allowed`` holds names or
    shell patterns such as ``team-*``; empty = any). A reserved namespace needs an entry that is
    itself reserved (``default``, ``kube-system``, ``kube-*``): ``*`` or ``[]`` never lets it in."""
    if reserved(namespace):
        return any(reserved(pattern) and fnmatchcase(namespace, pattern) for pattern in allowed)
    return not allowed or any(fnmatchcase(namespace, pattern) for pattern in allowed)


def not_allowed_reason(namespace: str, allowed: Sequence[str]) -> str:
    """Why :func:`may_use` said no, for the NamespaceNotAllowed event."""
    if reserved(namespace):
        return (f"namespace {namespace} belongs to the cluster (default, kube-*) and is used on workers only "
                f"when workerNamespaces names it ({', '.join(allowed) or 'empty'}): no copy is made")
    return (f"namespace {namespace} is not among the workerNamespaces the controller may use on workers "
            f"({', '.join(allowed)}): no copy is made")


def enforce_level(namespace: Obj) -> str:
    """The Pod Security level ``namespace`` enforces: unlabelled = ``privileged`` (the admission
    default; see the module doc), a value admission does not know = ``restricted``."""
    level = labels_of(namespace).get(ENFORCE)
    if level is None:
        return LEVELS[0]
    return level if level in LEVELS else LEVELS[-1]


def weaker_posture(manager_namespace: Obj, worker_namespace: Obj, *, worker: str) -> str | None:
    """Why the worker's namespace is weaker than the manager's (a sentence), or None when it enforces
    at least the manager's level."""
    here, there = enforce_level(manager_namespace), enforce_level(worker_namespace)
    if LEVELS.index(there) >= LEVELS.index(here):
        return None
    name = (worker_namespace.get("metadata") or {}).get("name")
    said = "" if ENFORCE in labels_of(worker_namespace) else " (unlabelled: the Pod Security default)"
    return (f"namespace {name} on worker {worker} enforces Pod Security {there!r}{said}, weaker than {here!r} "
            f"of {name} on the manager: no copy is made there; its admin can label it {ENFORCE}={here}")


def _copied(key: str, extra: Sequence[str]) -> bool:
    return key.startswith(POD_SECURITY) or any(fnmatchcase(key, pattern) for pattern in extra)


def created_namespace_labels(manager_namespace: Obj, *, extra: Sequence[str],
                             defaults: Mapping[str, str]) -> dict[str, str]:
    """The labels of a worker namespace we create: the manager namespace's Pod Security labels and
    those matching ``extra`` (key patterns), over ``defaults`` for what the manager does not say."""
    out = dict(defaults)
    out.update({k: v for k, v in labels_of(manager_namespace).items() if _copied(k, extra)})
    return out


def worker_namespace(name: str, manager_namespace: Obj, *, extra: Sequence[str],
                     defaults: Mapping[str, str]) -> Obj:
    """The Namespace to create on a worker for a copy in ``name``."""
    labels = created_namespace_labels(manager_namespace, extra=extra, defaults=defaults)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


class RecentNamespaces:
    """Namespaces read in the last ``ttl`` seconds, by cluster: a burst of Jobs in one namespace
    costs one read of it per cluster, not one per copy — passes that ask while a read is under way
    wait for that read instead of sending their own. A read that fails is not kept."""

    def __init__(self, ttl: float = 30.0, clock: Callable[[], float] = time.monotonic, most: int = 4096) -> None:
        self.ttl, self.clock, self.most = ttl, clock, most
        self._seen: dict[tuple[str, str], tuple[float, Obj]] = {}
        self._reading: dict[tuple[str, str], asyncio.Future[Obj]] = {}

    async def get(self, cluster: str, name: str, read: Callable[[], Awaitable[Obj]]) -> Obj:
        key = (cluster, name)
        hit = self._seen.get(key)
        if hit is not None and self.clock() - hit[0] < self.ttl:
            return hit[1]
        pending = self._reading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Obj] = asyncio.get_running_loop().create_future()
        self._reading[key] = future
        try:
            obj = await read()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a read nobody else waited for is not "never retrieved"
            raise
        finally:
            self._reading.pop(key, None)
        future.set_result(obj)
        now = self.clock()
        if len(self._seen) >= self.most:
            self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.ttl}
        self._seen[key] = (now, obj)
        return obj
