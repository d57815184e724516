"""The namespace a copy is created in on a worker: never one weaker than the tenant's on the manager.

Before a create, the worker's namespace (if it exists) must enforce at least the Pod Security level
the manager's namespace of that name enforces; a namespace the worker lacks is made from the
manager's labels (``missingNamespace: Create``) or reported (``Report``). The rules are pure
(:mod:`mirror.tenancy`); this module performs the reads and the one create.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from kruntime.client import ApiError, ClusterClient
from kruntime.resources import NAMESPACES, Obj
from mirror import tenancy
from mirror.config import Config, MissingNamespace
from mirror.decisions import is_refusal
from mirror.event_reasons import NAMESPACE_MISSING, EventReason
from mirror.worker_calls import WorkerCalls
from mirror.workers import WorkerCluster

log = logging.getLogger(__name__)


def missing_namespace(exc: ApiError) -> bool:
    """The create failed because the namespace does not exist (not because the object does not)."""
    return exc.not_found and (exc.body.get("details") or {}).get("kind") == "namespaces"


class WeakerNamespace(ApiError):
    """Refused by the controller itself, not the worker: the Job's namespace there enforces a weaker
    Pod Security level than on the manager, or its level could not be read (handled as a refusal)."""

    def __init__(self, message: str, cluster: str) -> None:
        super().__init__(403, "Forbidden", message, cluster=cluster)


def _posture_unknown(exc: ApiError, ns: str, where: str, worker: str) -> ApiError:
    """A failed namespace read: retried as it is when it may pass, refused when it will not."""
    if not is_refusal(exc.status):
        return exc
    return WeakerNamespace(f"the Pod Security level of namespace {ns} on {where} could not be read ({exc.message}): "
                           f"no copy is made on worker {worker} until it can", worker)


@dataclass(eq=False)
class CopyNamespaces:
    cfg: Config
    manager: ClusterClient
    calls: WorkerCalls
    #: an event on the manager object
    say: Callable[[Obj, EventReason, str], None]
    #: namespaces read to compare their Pod Security levels, by cluster (tenancy.weaker_posture)
    recent: tenancy.RecentNamespaces = field(default_factory=tenancy.RecentNamespaces)

    async def check_posture(self, worker: WorkerCluster, ns: str) -> None:
        """Raise WeakerNamespace unless ``ns`` on ``worker`` is missing (then made from the manager's
        labels) or enforces at least the Pod Security level of ``ns`` on the manager."""
        try:
            there = await self.recent.get(worker.name, ns, lambda: self.calls.call(
                worker, worker.client.get(NAMESPACES, None, ns)))
        except ApiError as exc:
            if exc.not_found:
                return
            raise _posture_unknown(exc, ns, f"worker {worker.name}", worker.name) from exc
        try:
            here = await self.recent.get("", ns, lambda: self.manager.get(NAMESPACES, None, ns))
        except ApiError as exc:
            raise _posture_unknown(exc, ns, "the manager", worker.name) from exc
        weaker = tenancy.weaker_posture(here, there, worker=worker.name)
        if weaker is not None:
            raise WeakerNamespace(weaker, worker.name)

    async def make(self, job: Obj, worker: WorkerCluster, ns: str) -> bool:
        """Make ``ns`` on ``worker`` from the manager's namespace of that name; False (said on ``job``)
        when the config says to report it instead, or the manager's labels cannot be read."""
        if self.cfg.missing_namespace == MissingNamespace.REPORT:
            self.say(job, NAMESPACE_MISSING, f"namespace {ns} does not exist on worker {worker.name}; create it "
                     "there (missingNamespace: Report)")
            return False
        try:
            source = await self.manager.get(NAMESPACES, None, ns)
        except ApiError as exc:
            # Never a namespace weaker than the tenant's: no posture known, no namespace made.
            self.say(job, NAMESPACE_MISSING, f"namespace {ns} does not exist on worker {worker.name} and is not "
                     f"created there: its Pod Security labels could not be read from the manager's namespace {ns} "
                     f"({exc}); the controller needs get on namespaces in the manager")
            return False
        namespace = tenancy.worker_namespace(ns, source, extra=self.cfg.namespace_labels,
                                             defaults=self.cfg.created_namespace_labels)
        try:
            await self.calls.call(worker, worker.client.create(NAMESPACES, None, namespace))
        except ApiError as exc:
            if not exc.already_exists:
                raise
        else:
            log.info("created namespace %s on worker %s with labels %s", ns, worker.name,
                     namespace["metadata"]["labels"])
        return True
