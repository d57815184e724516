"""The guarantees floor: exactly the manager writes jobmirror's guarantees need per Job, no more.

``python -m bench.floor`` watches manager Jobs of one ``managedBy`` and, per Job:

1. **claim** — one merge PATCH on the manager Job adding our finalizer (``jobmirror.dev/cleanup``)
   and recording the chosen worker (``jobmirror.dev/cluster``, ``remote-name``, ``claimed-by``),
   with a ``resourceVersion`` precondition: of two writers only one can claim it, and the
   placement is on record before any copy exists (a restart finds it, never makes a second);
2. **create** the copy on that worker (round robin; the body from the mirror's own
   :func:`mirror.jobs.remote_copy.build_remote_copy`);
3. **a status write for each deciding condition, when the worker writes it** (PUT of the status
   subresource with the resourceVersion it was computed from, built by
   :func:`mirror.jobs.status_translation.desired_manager_status`):
   the interim ``SuccessCriteriaMet`` / ``FailureTarget`` when the copy shows it, then the terminal
   condition — jobmirror's status contract, which never holds a decision back to write it with the
   next one; a copy seen only once it is terminal gets one write with both;
4. **delete** the copy (background propagation, uid precondition: its pods go, nobody else's
   object does);
5. **release** the finalizer (merge PATCH, ``resourceVersion`` precondition).

Four manager writes per Job (claim, interim and terminal status, release), three when the worker
wrote both conditions at once, two worker writes: what jobmirror's guarantees cost at the least.
No counters-only status, no events, no placement policy, no health checks. A manager Job deleted
while its copy runs gets steps 4-5 at once. ``bench compare`` runs it beside :mod:`bench.bare` (no
guarantees) at jobmirror's client QPS/burst, on the same event loop (uvloop) as jobmirror.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

from bench import kubetime, minimal
from bench.minimal import Handler, Minimal
from jobapi.objects import annotations_of
from jobapi.times import utcnow
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, Obj
from mirror.jobs.remote_copy import build_remote_copy
from mirror.jobs.status_translation import desired_manager_status
from mirror.naming import ANNOTATION_CLAIMED_BY, ANNOTATION_CLUSTER, ANNOTATION_REMOTE_NAME, FINALIZER

MANAGED_BY = "bench.jobmirror.dev/floor"
FIELD_MANAGER = "bench-floor"


# -- decisions (pure) -------------------------------------------------------------------------


def placed_on(job: Obj, origin: str) -> str | None:
    """The worker our claim recorded on ``job`` (finalizer, ``claimed-by`` us, a cluster), else None."""
    ann = annotations_of(job)
    fins = job["metadata"].get("finalizers") or []
    worker = ann.get(ANNOTATION_CLUSTER)
    return worker if FINALIZER in fins and ann.get(ANNOTATION_CLAIMED_BY) == origin and worker else None


def claim_patch(job: Obj, worker: str, origin: str) -> Obj | None:
    """The one write that claims ``job`` for ``worker``; None when it is claimed already (by us or another origin)."""
    md = job["metadata"]
    claimed_by = annotations_of(job).get(ANNOTATION_CLAIMED_BY)
    if placed_on(job, origin) is not None or (claimed_by is not None and claimed_by != origin):
        return None
    fins = md.get("finalizers") or []
    return {"metadata": {
        "resourceVersion": md["resourceVersion"],
        "finalizers": fins if FINALIZER in fins else [*fins, FINALIZER],
        "annotations": {ANNOTATION_CLUSTER: worker, ANNOTATION_REMOTE_NAME: md["name"],
                        ANNOTATION_CLAIMED_BY: origin},
    }}


#: the conditions that decide a Job before its terminal one (the strict validation's interim ones)
INTERIM = ("SuccessCriteriaMet", "FailureTarget")


def interim_to_write(copy: Obj, written: Obj) -> bool:
    """The copy shows a deciding interim condition that the manager Job as last written lacks
    (and is not terminal yet: the terminal write carries it)."""
    return (kubetime.terminal_condition(copy) is None
            and any(kubetime.condition_true(copy, t) and not kubetime.condition_true(written, t) for t in INTERIM))


def release_patch(job: Obj) -> Obj | None:
    """The write that drops our finalizer (resourceVersion precondition); None when it is not there."""
    md = job["metadata"]
    fins = md.get("finalizers") or []
    if FINALIZER not in fins:
        return None
    return {"metadata": {"resourceVersion": md["resourceVersion"], "finalizers": [f for f in fins if f != FINALIZER]}}


# -- the process --------------------------------------------------------------------------------


class Floor(Minimal):
    managed_by = MANAGED_BY
    field_manager = FIELD_MANAGER

    def __init__(self, manager: ClusterClient, workers: dict[str, ClusterClient], namespace: str, origin: str,
                 concurrency: int) -> None:
        super().__init__(manager, workers, namespace, origin, concurrency)
        #: claimed Jobs not yet released, as our last write returned them
        self.placed: dict[str, Obj] = {}
        #: the interim status write of a Job, awaited before its terminal one
        self.interim: dict[str, asyncio.Future[Obj | None]] = {}

    def on_manager(self, etype: str, old: Obj | None, new: Obj) -> None:
        name = new["metadata"]["name"]
        if not self.ours(etype, new):
            return
        if new["metadata"].get("deletionTimestamp"):
            worker = placed_on(new, self.origin)
            if worker is not None and name not in self.finished:
                self.finished.add(name)
                self.spawn(self._clean_up(new, worker, None))
            return
        if name not in self.dispatched:
            self.dispatched.add(name)
            self.spawn(self._dispatch(new))

    def worker_handler(self, worker: str) -> Handler:
        def handle(etype: str, old: Obj | None, new: Obj) -> None:
            name = new["metadata"]["name"]
            if etype == "DELETED" or name in self.finished or name not in self.placed:
                return
            if kubetime.terminal_condition(new) is not None:
                self.finished.add(name)
                self.spawn(self._finish(worker, new))
            elif name not in self.interim and interim_to_write(new, self.placed[name]):
                self.interim[name] = asyncio.ensure_future(self._write_status(new))
        return handle

    async def _dispatch(self, job: Obj) -> None:
        name, chosen = job["metadata"]["name"], self.round_robin()
        claimed = await self.retry(f"claim {name}", lambda: self._rv_write(
            job, lambda j: claim_patch(j, chosen, self.origin)))
        worker = placed_on(claimed, self.origin) if claimed else None
        if claimed is None or worker is None:
            return  # failed (logged), gone, or claimed by another origin
        self.placed[name] = claimed
        body = build_remote_copy(claimed, origin=self.origin, origin_cluster="manager", remote_name=name)
        await self.retry(f"create {name} in {worker}", lambda: self.workers[worker].create(JOBS, self.namespace, body))

    async def _write_status(self, copy: Obj) -> Obj | None:
        """One status write from the copy, whole (PUT with the resourceVersion it was computed from, as
        jobmirror writes it: a merge patch cannot drop the interim write's uncountedTerminatedPods, which
        a finished Job must not carry); the manager Job as written (None: refused, logged)."""
        name = copy["metadata"]["name"]
        job = self.placed[name]
        body = {**job, "status": desired_manager_status(job, copy, utcnow())}
        written = await self.retry(f"status {name}", lambda: self.manager.replace(
            JOBS, self.namespace, name, body, subresource="status"))
        if written:
            self.placed[name] = written
        return written

    async def _finish(self, worker: str, copy: Obj) -> None:
        name = copy["metadata"]["name"]
        interim = self.interim.pop(name, None)
        if interim is not None:
            await interim  # this write is computed from the Job that one returns (its resourceVersion)
        written = await self._write_status(copy)
        if written is None:
            return  # refused (logged): the finalizer stays, as does the copy
        await self._clean_up(written or self.placed[name], worker, copy["metadata"].get("uid"))

    async def _clean_up(self, job: Obj, worker: str, uid: str | None) -> None:
        """Delete the copy, then release the finalizer: never the other way round."""
        name = job["metadata"]["name"]

        async def delete() -> Obj:
            try:
                return await self.workers[worker].delete(JOBS, self.namespace, name, uid=uid)
            except ApiError as exc:
                if exc.conflict:  # the uid precondition: that name is no longer our copy
                    return {}
                raise

        if await self.retry(f"delete {name} in {worker}", delete) is None:
            return  # the copy may still run: keep the finalizer
        await self.retry(f"release {name}", lambda: self._rv_write(job, release_patch))
        self.placed.pop(name, None)

    async def _rv_write(self, job: Obj, patch_for: Callable[[Obj], Obj | None]) -> Obj:
        """Merge-patch the manager Job with ``patch_for``'s resourceVersion-guarded patch; on a conflict,
        read it again and decide again (once). Answers the object as written, or as read when no write
        is needed."""
        md = job["metadata"]
        for attempt in range(2):
            patch = patch_for(job)
            if patch is None:
                return job
            try:
                return await self.manager.patch(JOBS, md["namespace"], md["name"], patch)
            except ApiError as exc:
                if not exc.conflict or attempt == 1:
                    raise
            job = await self.manager.get(JOBS, md["namespace"], md["name"])
        raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> int:
    return minimal.main(argv, Floor, "python -m bench.floor", __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
