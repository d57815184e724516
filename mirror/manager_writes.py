"""Every write to a manager object, and reading our own writes back before the cache has them.

The informer delivers our writes a few milliseconds late; a pass that ran on the older object
could re-create a copy we just deleted, or delete one we just placed. So each write (and live
read) is recorded (:class:`kruntime.ownwrites.OwnWrites`) and a pass starts from the newer of the
cache and that record. Every write carries the object's resourceVersion: a write on a stale
object fails with a conflict and the pass is retried, never applied on top of a newer one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from jobapi.objects import annotations_of
from kruntime.client import ApiError, ClusterClient
from kruntime.ownwrites import OwnWrites
from kruntime.resources import Obj, Resource
from mirror import metrics
from mirror.decisions import Placement
from mirror.event_reasons import STATUS_REJECTED, EventReason
from mirror.naming import (
    ANNOTATION_CLAIMED_BY,
    ANNOTATION_CLUSTER,
    ANNOTATION_PLACEMENT_REASON,
    ANNOTATION_REMOTE_NAME,
    FINALIZER,
)


class StatusRejected(Exception):
    """The manager API server refused the translated status (counted, evented, retried)."""

    expected = True


@dataclass(eq=False)
class ManagerWrites:
    """The writes of one kind's manager objects (``resource``), stamped with our ``origin``."""

    manager: ClusterClient
    resource: Resource
    origin: str
    #: an event on the manager object (a refused status is said there)
    say: Callable[[Obj, EventReason, str], None]
    own: OwnWrites = field(default_factory=OwnWrites)

    def remember(self, obj: Obj) -> Obj:
        return self.own.record(obj)

    def is_echo(self, obj: Obj) -> bool:
        """``obj`` is what a pass of ours wrote (or read live) and then acted on, or a version before it
        (every write here is conditional on the resourceVersion the pass read, so that pass saw it): no
        pass needed for it."""
        return self.own.is_echo(obj) or self.own.is_behind(obj)

    def forget(self, key: str) -> None:
        """The object left the cache: our last write of it is of no further use."""
        self.own.forget(key)

    def fresher(self, key: str, cached: Obj | None) -> Obj | None:
        """The cached object, unless our own last write or read of it is newer than the cache."""
        ahead = self.own.ahead_of(key, cached)
        return ahead.obj if ahead is not None else cached

    async def read(self, obj: Obj) -> Obj:
        """The object as the server has it now (recorded; ApiError, not_found when it is gone)."""
        md = obj["metadata"]
        return self.remember(await self.manager.get(self.resource, md["namespace"], md["name"]))

    async def _patch_metadata(self, obj: Obj, meta: Obj) -> Obj:
        md = obj["metadata"]
        return self.remember(await self.manager.patch(self.resource, md["namespace"], md["name"], {"metadata": {
            "resourceVersion": md["resourceVersion"], **meta}}))

    async def record_placement(self, obj: Obj, worker: str, remote_name: str, why: str) -> tuple[Obj, Placement]:
        """One write records the placement and, if missing, the finalizer."""
        meta: Obj = {"annotations": {ANNOTATION_CLUSTER: worker, ANNOTATION_REMOTE_NAME: remote_name,
                                     ANNOTATION_CLAIMED_BY: self.origin, ANNOTATION_PLACEMENT_REASON: why}}
        fins = obj["metadata"].get("finalizers") or []
        if FINALIZER not in fins:
            meta["finalizers"] = [*fins, FINALIZER]
        return await self._patch_metadata(obj, meta), Placement(worker, remote_name)

    async def ensure_finalizer(self, obj: Obj) -> Obj:
        """Our finalizer, stamped with our origin (so we can release it if we stop claiming the object)."""
        fins = obj["metadata"].get("finalizers") or []
        if FINALIZER in fins and annotations_of(obj).get(ANNOTATION_CLAIMED_BY) == self.origin:
            return obj
        return await self._patch_metadata(obj, {"annotations": {ANNOTATION_CLAIMED_BY: self.origin},
                                                "finalizers": fins if FINALIZER in fins else [*fins, FINALIZER]})

    async def drop_finalizer(self, obj: Obj) -> None:
        fins = obj["metadata"].get("finalizers") or []
        if FINALIZER not in fins:
            return
        try:
            await self._patch_metadata(obj, {"finalizers": [f for f in fins if f != FINALIZER]})
        except ApiError as exc:
            if not exc.not_found:  # gone already (a deletion completed under a stale cache): nothing to release
                raise

    async def put_status(self, obj: Obj, desired: Obj) -> Obj:
        """Write ``desired`` through the status subresource; a refusal is evented, counted, raised."""
        md = obj["metadata"]
        try:
            written = self.remember(await self.manager.replace(self.resource, md["namespace"], md["name"],
                                                               {**obj, "status": desired}, subresource="status"))
        except ApiError as exc:
            if exc.conflict:
                metrics.STATUS_WRITES.labels("conflict").inc()
            elif exc.invalid or exc.status == 403:
                # Validation or an admission policy said no: retrying as is will not help by
                # itself, so say it loudly (event + metric); the backoff retry picks up fixes.
                metrics.STATUS_WRITES.labels("rejected").inc()
                self.say(obj, STATUS_REJECTED, f"manager API server rejected the mirrored status: {exc.message}")
                raise StatusRejected(exc.message) from exc
            else:
                metrics.STATUS_WRITES.labels("error").inc()
            raise
        metrics.STATUS_WRITES.labels("ok").inc()
        return written
