"""Pod writes for the Job controller, with their expectations bookkeeping and events.

Upstream's ``PodControl`` plus the expectation calls around each write: every create,
delete and finalizer removal first records what the informer should later show (see
``expectations``), and lowers that expectation again when the write fails, since the
informer will then never deliver it. Adoption and release patches live here too.
"""

from __future__ import annotations

import asyncio
import logging

from builtin_controller import fields, pods
from builtin_controller.expectations import ControllerExpectations, FinalizerExpectations
from kruntime.client import ApiError, ClusterClient
from kruntime.events import ObjectEvents
from kruntime.resources import PODS, Obj

log = logging.getLogger(__name__)

#: Pod creates start with a batch of 1 and double after each clean batch (client-go's slow start).
SLOW_START_INITIAL_BATCH = 1


class PodControl:
    def __init__(self, client: ClusterClient, events: ObjectEvents, expectations: ControllerExpectations,
                 finalizer_expectations: FinalizerExpectations) -> None:
        self.client = client
        self.events = events
        self.expectations = expectations
        self.finalizer_expectations = finalizer_expectations

    # -- ownership ----------------------------------------------------------------------------

    async def adopt(self, job: Obj, pod: Obj) -> None:
        await self._patch(pod, pods.adopt_patch(job, pod))

    async def release(self, job: Obj, pod: Obj) -> None:
        await self._patch(pod, pods.release_patch(job, pod))

    async def _patch(self, pod: Obj, patch: Obj) -> None:
        await self.client.patch(PODS, fields.namespace(pod), fields.name(pod), patch, patch_type="strategic")

    # -- creating -----------------------------------------------------------------------------

    async def create_pods(self, job: Obj, key: str, indexes: list[int | None],
                          replaced: dict[int, Obj]) -> tuple[int, int, Exception | None, int]:
        """Create pods in slow-start batches (1, 2, 4, …); stop after a batch with errors.

        The caller has raised the creation expectation by ``len(indexes)``. Returns
        (created, failed, first error, skipped). Every pod not created lowers the creation
        expectation, since the informer will never deliver it.
        """
        ok = failed = 0
        first_err: Exception | None = None
        pending = list(indexes)
        batch = min(len(pending), SLOW_START_INITIAL_BATCH)
        while pending:
            current, pending = pending[:batch], pending[batch:]
            results = await asyncio.gather(*(self._create_one(job, key, ix, replaced) for ix in current))
            errs = [e for e in results if e is not None]
            ok += len(results) - len(errs)
            failed += len(errs)
            if errs and first_err is None:
                first_err = errs[0]
            if errs and pending:
                for _ in pending:
                    self.expectations.creation_observed(key)
                return ok, failed, first_err, len(pending)
            batch = min(2 * batch, len(pending))
        return ok, failed, first_err, 0

    async def _create_one(self, job: Obj, key: str, index: int | None, replaced: dict[int, Obj]) -> Exception | None:
        body = pods.pod_from_template(job, index, replaced.get(index) if index is not None else None)
        try:
            created = await self.client.create(PODS, fields.namespace(job), body)
        except ApiError as exc:
            self.expectations.creation_observed(key)
            if exc.namespace_terminating:
                return None
            self.events.event(job, "Warning", "FailedCreate", f"Error creating: {exc.message}")
            return exc
        self.events.event(job, "Normal", "SuccessfulCreate", f"Created pod: {fields.name(created)}")
        return None

    # -- deleting -----------------------------------------------------------------------------

    async def delete_pod(self, job: Obj, pod: Obj) -> ApiError | None:
        try:
            await self.client.delete(PODS, fields.namespace(pod), fields.name(pod), propagation=None)
        except ApiError as exc:
            if not exc.not_found:
                self.events.event(job, "Warning", "FailedDelete", f"Error deleting: {exc.message}")
            return exc
        self.events.event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {fields.name(pod)}")
        return None

    async def delete_uncounted(self, job: Obj, key: str, doomed: list[Obj]) -> tuple[int, int, Exception | None]:
        """Delete pods that must not be counted (suspend, scale down): finalizer first.

        The caller has raised the deletion expectation by ``len(doomed)``. Returns
        (ready pods removed, pods removed, first error).
        """
        async def one(pod: Obj) -> tuple[bool, bool, Exception | None]:
            """(removed, counts towards deleted-ready, error). A pod already gone is removed."""
            patch = pods.remove_finalizer_patch(pod)
            try:
                if patch is not None:
                    await self._patch(pod, patch)
            except ApiError as exc:
                # The informer will never show this deletion.
                self.expectations.deletion_observed(key)
                return exc.not_found, False, None if exc.not_found else exc
            err = await self.delete_pod(job, pod)
            if err is not None:
                self.expectations.deletion_observed(key)
                if not err.not_found:
                    return False, fields.is_ready(pod), err
            return True, fields.is_ready(pod), None

        results = await asyncio.gather(*(one(p) for p in doomed))
        removed = sum(1 for ok, _, _ in results if ok)
        ready = sum(1 for _, r, _ in results if r)
        errs = [e for _, _, e in results if e is not None]
        return ready, removed, errs[0] if errs else None

    async def delete_active(self, job: Obj, active: list[Obj]) -> tuple[int, int, Exception | None]:
        """Delete the active pods of a finishing Job, keeping finalizers so they are counted."""
        results = await asyncio.gather(*(self.delete_pod(job, p) for p in active))
        errs = [e for e in results if e is not None and not e.not_found]
        removed = len(active) - len(errs)
        ready = sum(1 for p in active if fields.is_ready(p))
        return ready, removed, errs[0] if errs else None

    # -- tracking finalizers ------------------------------------------------------------------

    async def remove_finalizers(self, key: str, victims: list[Obj]) -> tuple[list[bool], Exception | None]:
        """Drop the tracking finalizer from counted pods, expecting each removal to show up."""
        self.finalizer_expectations.expect_removed(key, [fields.uid(p) for p in victims])

        async def one(pod: Obj) -> tuple[bool, Exception | None]:
            patch = pods.remove_finalizer_patch(pod)
            if patch is None:
                return False, None
            try:
                await self._patch(pod, patch)
            except ApiError as exc:
                self.finalizer_expectations.observed(key, fields.uid(pod))
                if not exc.not_found:
                    return False, exc
            return True, None

        results = await asyncio.gather(*(one(p) for p in victims))
        errs = [e for _, e in results if e is not None]
        return [ok for ok, _ in results], errs[0] if errs else None

    async def remove_orphan_finalizer(self, pod: Obj) -> None:
        """Drop the tracking finalizer from a pod no Job will count (no expectation: no Job waits)."""
        patch = pods.remove_finalizer_patch(pod)
        if patch is None:
            return
        try:
            await self._patch(pod, patch)
        except ApiError as exc:
            if not exc.not_found:
                raise
