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
they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase

from jobapi.objects import labels_of
from kruntime.resources import Obj

#: Pod Security admission's namespace labels (enforce, audit, warn and their -version).
POD_SECURITY = "pod-security.kubernetes.io/"


def may_use(namespace: str, allowed: Sequence[str]) -> bool:
    """Whether the controller may create or use ``namespace`` on workers (``allowed`` holds names or
    shell patterns such as ``team-*``; empty = any)."""
    return not allowed or any(fnmatchcase(namespace, pattern) for pattern in allowed)


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
