"""The Job controller: informers, work queues, Job events and the per-Job sync.

The sync reads the Job and its pods from the informer caches, asks the pure modules what
the status and the pod set should be, then acts: adopt/release pods, create or delete
pods, remove tracking finalizers (all through ``pod_control.PodControl``), write the
status subresource (PUT with the cached resourceVersion, so a stale view fails with a
conflict and is retried), and records events and metrics. Pod events and the pod index
live in ``pod_events.PodEvents``. The structure — and every decision — follows the upstream
controller so that, for the same pod outcomes, a Job ends in the same state.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable
from datetime import datetime

from builtin_controller import backoff, fields, metrics, pods, semantics, status, tracking
from builtin_controller.expectations import ControllerExpectations, FinalizerExpectations
from builtin_controller.pod_control import PodControl
from builtin_controller.pod_events import SYNC_BATCH_PERIOD, OrphanKey, PodEvents
from builtin_controller.semantics import Semantics
from builtin_controller.status import SyncContext
from kruntime.client import ApiError, ClusterClient
from kruntime.events import EventRecorder, ObjectEvents
from kruntime.informer import Informer, without_managed_fields
from kruntime.ownwrites import OwnWrites
from kruntime.resources import JOBS, PODS, Obj, key_of
from kruntime.workqueue import WorkQueue

log = logging.getLogger(__name__)

#: Work-queue retry backoff after a failed sync.
API_BACKOFF_BASE = 1.0
API_BACKOFF_CAP = 60.0
MAX_POD_CREATE_DELETE_PER_SYNC = 500
#: How long a sync waits for the informer to show our own last status write.
STALE_CACHE_GRACE = 5.0
#: Attempts to read the API server's version at start, and the pause between them (seconds).
VERSION_ATTEMPTS = 5
VERSION_RETRY_DELAY = 1.0

class JobController:
    """Reconciles ``batch/v1`` Jobs that no other controller claims through ``managedBy``."""

    def __init__(
        self,
        client: ClusterClient,
        *,
        workers: int = 5,
        component: str = "job-controller",
        namespace: str | None = None,
        namespace_filter: Callable[[str], bool] | None = None,
        clock: Callable[[], datetime] = fields.utcnow,
        pod_backoff_base: float = backoff.DEFAULT_BACKOFF,
        pod_backoff_cap: float = backoff.MAX_BACKOFF,
        semantics: Semantics | None = None,
    ) -> None:
        self.client = client
        #: whose Job controller to behave like; None: chosen from the API server's version at start
        self.semantics = semantics
        self.workers = workers
        self.clock = clock
        self.pod_backoff_base = pod_backoff_base
        self.pod_backoff_cap = pod_backoff_cap
        self.namespace_filter = namespace_filter
        self.job_informer = Informer(client, JOBS, namespace=namespace, transform=without_managed_fields)
        self.pod_informer = Informer(client, PODS, namespace=namespace, transform=without_managed_fields)
        self.queue: WorkQueue[str] = WorkQueue("builtin_job", backoff_base=API_BACKOFF_BASE,
                                               backoff_cap=API_BACKOFF_CAP)
        self.orphan_queue: WorkQueue[OrphanKey] = WorkQueue("builtin_job_orphan_pod", backoff_base=API_BACKOFF_BASE,
                                                            backoff_cap=API_BACKOFF_CAP)
        self.expectations = ControllerExpectations()
        self.finalizer_expectations = FinalizerExpectations()
        self.backoff_store = backoff.BackoffStore()
        self.finished_expectations: set[str] = set()
        self.recorder = EventRecorder(client, component)
        self.events = ObjectEvents(self.recorder, JOBS)
        self.pod_control = PodControl(client, self.events, self.expectations, self.finalizer_expectations)
        self._external_logged: set[str] = set()
        # What our own status writes returned: a cache older than that is stale, and a
        # sync from it would only conflict.
        self._own_writes = OwnWrites()
        self._tasks: list[asyncio.Task[None]] = []
        self._run_task: asyncio.Task[None] | None = None
        self.synced = asyncio.Event()
        self.job_informer.add_handler(self._on_job)
        self.pod_events = PodEvents(self.job_informer, self.pod_informer, self.expectations,
                                    self.finalizer_expectations, self.pod_control, self.orphan_queue,
                                    self._enqueue, self._watched)

    # -- lifecycle --------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until :meth:`stop`; informers first, workers once both caches are synced."""
        chosen = self.semantics or await self._detect_semantics()
        self.semantics = chosen
        self._tasks = [asyncio.create_task(self.job_informer.run(), name="builtin-jobs-informer"),
                       asyncio.create_task(self.pod_informer.run(), name="builtin-pods-informer")]
        try:
            await asyncio.gather(self.job_informer.wait_synced(), self.pod_informer.wait_synced())
            self.synced.set()
            log.info("job controller started (%d workers) on %s, with Kubernetes %s Job controller semantics",
                     self.workers, self.client.name, chosen.release)
            await asyncio.gather(self.queue.run_workers(self.workers, self._sync_handler),
                                 self.orphan_queue.run_workers(self.workers, self.pod_events.handle_orphans))
        finally:
            for t in self._tasks:
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _detect_semantics(self) -> Semantics:
        """The semantics of the API server's release (``GET /version``), logged once."""
        info: Obj = {}
        for attempt in range(VERSION_ATTEMPTS):
            try:
                info = await self.client.request("GET", "/version")
                break
            except Exception as exc:  # any failure: unknown version, newest semantics
                log.warning("reading the API server version of %s (attempt %d/%d): %s", self.client.name,
                            attempt + 1, VERSION_ATTEMPTS, exc)
                if attempt + 1 < VERSION_ATTEMPTS:
                    await asyncio.sleep(VERSION_RETRY_DELAY)
        chosen = semantics.select(semantics.parse_version(info))
        if chosen.note is not None:
            log.log(logging.WARNING if chosen.warning else logging.INFO, "%s (%s: gitVersion %s)", chosen.note,
                    self.client.name, info.get("gitVersion"))
        return chosen.semantics

    def start(self) -> asyncio.Task[None]:
        self._run_task = asyncio.create_task(self.run(), name="builtin-job-controller")
        return self._run_task

    async def stop(self, grace: float = 10.0) -> None:
        """Finish in-flight syncs (up to ``grace`` seconds), then stop watching."""
        await self.queue.shutdown()
        await self.orphan_queue.shutdown()
        task = self._run_task
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), grace)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            except Exception:
                log.exception("job controller stopped with an error")
        await self.recorder.flush()
        log.info("job controller stopped")

    def liveness(self) -> tuple[bool, str]:
        """Liveness: the controller loop is running. API trouble is not a reason to restart."""
        task = self._run_task
        if task is not None and task.done():
            return False, "controller loop exited"
        return True, "ok"

    def readiness(self) -> tuple[bool, str]:
        """Readiness: caches synced and both watches currently connected."""
        if not self.synced.is_set():
            return False, "caches not synced"
        if not (self.job_informer.healthy and self.pod_informer.healthy):
            err = self.job_informer.last_error or self.pod_informer.last_error
            return False, f"informers reconnecting: {err}"
        return True, "ok"

    # -- event handlers ---------------------------------------------------------------------

    def _watched(self, obj: Obj) -> bool:
        return self.namespace_filter is None or self.namespace_filter(fields.namespace(obj))

    def _skip_external(self, job: Obj) -> bool:
        name = fields.managed_by_external(job)
        if name is None:
            return False
        u = fields.uid(job)
        if u not in self._external_logged:
            if len(self._external_logged) > 100_000:
                self._external_logged.clear()
            self._external_logged.add(u)
            log.info("skipping Job %s: managed by external controller %s", key_of(job), name)
        return True

    def _enqueue(self, job: Obj, delay: float = 0.0) -> None:
        if self._skip_external(job):
            return
        self.queue.add_after(key_of(job), delay) if delay > 0 else self.queue.add(key_of(job))

    def _on_job(self, etype: str, old: Obj | None, new: Obj) -> None:
        if not self._watched(new):
            return
        key = key_of(new)
        if etype == "ADDED":
            ext = fields.managed_by_external(new)
            if ext is not None:
                metrics.JOBS_BY_EXTERNAL_CONTROLLER.labels(ext).inc()
            self._enqueue(new)
        elif etype == "MODIFIED":
            assert old is not None
            if fields.is_finished(new):
                # Finalizers should be gone before a Job finishes; this is a safety net.
                self.pod_events.enqueue_selector(new)
                return
            if fields.md(new).get("generation") == fields.md(old).get("generation"):
                self._enqueue(new, SYNC_BATCH_PERIOD)
            else:
                self._enqueue(new)
            start = fields.parse_time(fields.status(new).get("startTime"))
            ads = fields.spec(new).get("activeDeadlineSeconds")
            if start is not None and ads is not None and not fields.managed_by_external(new):
                old_ads = fields.spec(old).get("activeDeadlineSeconds")
                if old_ads is None or int(old_ads) != int(ads):
                    remaining = int(ads) - (self.clock() - start).total_seconds()
                    self.queue.add_after(key, remaining)
        elif etype == "DELETED":
            self.queue.add(key)
            # A new Job of the same name must not inherit these (upstream does this from 1.37).
            self.expectations.delete(key)
            self.finished_expectations.discard(fields.uid(new))
            self.pod_events.enqueue_selector(new)
            self.backoff_store.remove(key)
            self.events.forget(fields.uid(new))
            self._own_writes.forget(key)

    # -- the sync ---------------------------------------------------------------------------

    async def _sync_handler(self, key: str) -> None:
        await self.sync_job(key)

    async def sync_job(self, key: str) -> None:
        started = time.monotonic()
        shared = self.job_informer.get(key)
        if shared is None:
            self.expectations.delete(key)
            self.finalizer_expectations.delete(key)
            self.backoff_store.remove(key)
            return
        if self._skip_external(shared):
            return
        if self._cache_is_stale(key, shared):
            metrics.STALE_SYNC_SKIPS.labels("batch", "jobs").inc()
            self.queue.add_after(key, SYNC_BATCH_PERIOD)
            return
        if fields.is_finished(shared):
            self.backoff_store.remove(key)
            self.finished_expectations.discard(fields.uid(shared))
            return
        if fields.uid(shared) in self.finished_expectations:
            return  # we finished it; our own update has not reached the cache yet
        mode = fields.spec(shared).get("completionMode")
        if mode is not None and mode not in (fields.NON_INDEXED, fields.INDEXED):
            self.events.event(shared, "Warning", "UnknownCompletionMode",
                             "Skipped Job sync because completion mode is unknown")
            return
        job = copy.deepcopy(shared)
        action = metrics.ACTION_RECONCILING
        result = "error"
        try:
            action = await self._sync(key, job)
            result = "success"
        finally:
            elapsed = time.monotonic() - started
            cm = fields.completion_mode(job)
            metrics.SYNC_DURATION.labels(cm, result, action).observe(elapsed)
            metrics.SYNCS.labels(cm, result, action).inc()
            log.debug("synced job %s in %.3fs (%s, %s)", key, elapsed, action, result)

    def _cache_is_stale(self, key: str, cached: Obj) -> bool:
        """The cached Job predates our own last status write (bounded: a lost event must
        not stall the Job, a conflict would then sort it out)."""
        ahead = self._own_writes.ahead_of(key, cached)
        if ahead is not None and ahead.age < STALE_CACHE_GRACE:
            return True
        self._own_writes.forget(key)
        return False

    async def _sync(self, key: str, job: Obj) -> str:
        """One reconcile pass; returns the sync action for metrics. Raises to retry."""
        st = fields.status_for_update(job)  # ``job`` is this sync's private copy
        tracking.ensure_uncounted(st)
        # Expectations first: a pod that shows up after this check only delays the sync.
        satisfied = self.expectations.satisfied(key)
        claimed = await self._pods_for_job(job)
        assert self.semantics is not None, "semantics are chosen before the first sync"
        ctx = status.new_context(job, key, claimed, self.finalizer_expectations.expected(key), self.semantics)
        now = self.clock()
        if st.get("startTime") is None and not fields.suspended(job):
            st["startTime"] = fields.format_time(now)
        ctx.backoff = backoff.new_backoff_record(self.backoff_store, key, ctx.new_succeeded_pods, ctx.new_failed_pods)
        verdict = status.evaluate(ctx, now)
        ctx.apply(verdict)
        if verdict.recheck is not None:
            self.queue.add_after(key, verdict.recheck)

        active = len(ctx.active_pods)
        action = metrics.ACTION_RECONCILING
        manage_err: Exception | None = None
        suspend_changed = False
        if ctx.finished_condition is not None:
            deleted_ready, deleted, manage_err = await self.pod_control.delete_active(job, ctx.active_pods)
            if deleted != active or not satisfied:
                # Not final yet: some pods may survive or be missing from the cache.
                ctx.finished_condition = None
            active -= deleted
            ctx.terminating += deleted
            ctx.ready -= deleted_ready
        else:
            managed = False
            if satisfied and fields.deletion_timestamp(job) is None:
                active, action, manage_err = await self._manage(key, ctx)
                managed = True
            if status.completions_reached(job, ctx.succeeded, active):
                ctx.finished_condition = status.completions_reached_condition(self.clock())
            elif managed:
                reason = status.ensure_suspend_condition(job, self.clock(), ctx.semantics)
                if reason is not None:
                    suspend_changed = True
                    self.events.event(job, "Normal", reason, f"Job {reason.lower()}")

        needs_update = (suspend_changed or active != int(st.get("active") or 0)
                        or st.get("ready") != ctx.ready or st.get("terminating") != ctx.terminating)
        st["active"] = active
        st["ready"] = ctx.ready
        st["terminating"] = ctx.terminating
        try:
            await self._track_status_and_remove_finalizers(ctx, needs_update)
        except ApiError as exc:
            raise ApiError(exc.status, exc.reason, f"tracking status: {exc.message}", exc.body, exc.cluster) from exc
        if manage_err is not None:
            raise manage_err
        return action

    # -- claiming pods ----------------------------------------------------------------------

    async def _pods_for_job(self, job: Obj) -> list[Obj]:
        """The Job's pods: owned ones matching its selector, plus orphans it adopts.

        Owned pods that no longer match are released. Adoption is refused once the Job is
        being deleted (checked against a fresh read, not the cache).
        """
        selector = fields.spec(job).get("selector")
        job_deleting = fields.deletion_timestamp(job) is not None
        claimed: list[Obj] = []
        errors: list[Exception] = []
        can_adopt: bool | None = None
        for pod in self.pod_events.candidate_pods(job):
            ref = fields.controller_ref(pod)
            matches = pods.selector_matches(selector, fields.labels_of(pod))
            if ref is not None:
                if ref.get("uid") != fields.uid(job):
                    continue
                if matches:
                    claimed.append(pod)
                    continue
                if job_deleting:
                    continue
                try:
                    await self.pod_control.release(job, pod)
                except ApiError as exc:
                    if not (exc.not_found or exc.invalid):
                        errors.append(exc)
                continue
            if job_deleting or not matches or fields.deletion_timestamp(pod) is not None:
                continue
            if fields.namespace(pod) != fields.namespace(job):
                continue
            if can_adopt is None:
                can_adopt = await self._can_adopt(job)
            if not can_adopt:
                errors.append(RuntimeError(f"can't adopt pod {key_of(pod)}: Job {key_of(job)} is being deleted"))
                continue
            try:
                await self.pod_control.adopt(job, pod)
            except ApiError as exc:
                if not exc.not_found:
                    errors.append(exc)
                continue
            claimed.append(pods.with_tracking_finalizer(pod))
        if errors:
            raise errors[0]
        return claimed

    async def _can_adopt(self, job: Obj) -> bool:
        fresh = await self.client.get(JOBS, fields.namespace(job), fields.name(job))
        if fields.uid(fresh) != fields.uid(job):
            raise RuntimeError(f"original Job {key_of(job)} is gone: got uid {fields.uid(fresh)}, "
                               f"wanted {fields.uid(job)}")
        return fields.deletion_timestamp(fresh) is None

    # -- managing pods ----------------------------------------------------------------------

    async def _manage(self, key: str, ctx: SyncContext) -> tuple[int, str, Exception | None]:
        """Create or delete pods towards the wanted number of active pods.

        Deletions take precedence; a sync never does both. Returns the new active count,
        the sync action and the first error (after doing all the work it could).
        """
        job = ctx.job
        active = len(ctx.active_pods)
        parallelism = fields.parallelism(job)
        if fields.suspended(job):
            doomed = pods.active_pods_for_removal(job, ctx.active_pods, active)
            self.expectations.expect_deletions(key, len(doomed))
            ready, removed, err = await self.pod_control.delete_uncounted(job, key, doomed)
            ctx.terminating += removed
            ctx.ready -= ready
            return active - removed, metrics.ACTION_PODS_DELETED, err

        completions = fields.completions(job)
        if completions is None:
            want = active if ctx.succeeded > 0 else parallelism
        else:
            want = max(0, min(completions - ctx.succeeded, parallelism))
        doomed = pods.active_pods_for_removal(job, ctx.active_pods, max(0, active - want))
        doomed = doomed[:MAX_POD_CREATE_DELETE_PER_SYNC]
        if doomed:
            self.expectations.expect_deletions(key, len(doomed))
            ready, removed, err = await self.pod_control.delete_uncounted(job, key, doomed)
            ctx.terminating += removed
            ctx.ready -= ready
            return active - removed, metrics.ACTION_PODS_DELETED, err

        terminating = ctx.terminating if fields.only_replace_failed_pods(job) else 0
        diff = want - terminating - active
        if diff <= 0:
            return active, metrics.ACTION_TRACKING, None
        now = self.clock()
        per_index = fields.has_backoff_limit_per_index(job)
        if not per_index and ctx.backoff is not None:
            remaining = ctx.backoff.remaining(now, self.pod_backoff_base, self.pod_backoff_cap)
            if remaining > 0:
                self._enqueue(job, max(remaining, SYNC_BATCH_PERIOD))
                return active, metrics.ACTION_PODS_CREATED, None
        diff = min(diff, MAX_POD_CREATE_DELETE_PER_SYNC)
        indexes: list[int | None] = [None] * diff
        if fields.is_indexed(job):
            wanted = pods.first_pending_indexes(job, ctx.pods, ctx.active_pods, ctx.succeeded_indexes,
                                                ctx.failed_indexes, diff, completions or 0)
            if per_index:
                wanted, remaining = self._indexes_ready_for_creation(wanted, ctx.delayed_deletion, now)
                if remaining > 0:
                    self._enqueue(job, max(remaining, SYNC_BATCH_PERIOD))
                    return active, metrics.ACTION_PODS_CREATED, None
            indexes = list(wanted)
            diff = len(indexes)

        self.expectations.expect_creations(key, diff)
        ok, failed_count, err, skipped = await self.pod_control.create_pods(job, key, indexes, ctx.delayed_deletion)
        metrics.record_pods_created(job, ctx.failed, ctx.terminating, ok, failed_count)
        return active + diff - failed_count - skipped, metrics.ACTION_PODS_CREATED, err

    def _indexes_ready_for_creation(self, wanted: list[int], delayed: dict[int, Obj],
                                    now: datetime) -> tuple[list[int], float]:
        """Indexes whose own backoff has passed; else the shortest remaining wait."""
        ready: list[int] = []
        shortest: float | None = None
        for ix in wanted:
            rem = backoff.remaining_for_index(delayed.get(ix), now, self.pod_backoff_base, self.pod_backoff_cap)
            if rem == 0:
                ready.append(ix)
            elif shortest is None or rem < shortest:
                shortest = rem
        if ready:
            return ready, 0.0
        return ready, shortest or 0.0

    # -- tracking and status ----------------------------------------------------------------

    async def _track_status_and_remove_finalizers(self, ctx: SyncContext, needs_flush: bool) -> None:
        job = ctx.job
        st = fields.status_for_update(job)
        indexed = fields.is_indexed(job)
        if indexed:
            ctx.pods = sorted(ctx.pods, key=fields.completion_index)
        with_finalizer = tracking.uids_with_finalizer(ctx.pods, ctx.expected_rm)
        old_counters = _counters(st)
        if tracking.clean_uncounted_without_finalizers(st, with_finalizer):
            needs_flush = True
        plan = tracking.plan(
            job, ctx.pods, expected_rm=ctx.expected_rm, prev_uncounted_succeeded=ctx.uncounted_succeeded,
            prev_uncounted_failed=ctx.uncounted_failed, prev_succeeded_indexes=ctx.prev_succeeded_indexes,
            finished_condition=ctx.finished_condition, delayed=ctx.delayed_deletion)
        needs_flush = needs_flush or plan.needs_flush
        if indexed:
            ctx.succeeded_indexes = ctx.succeeded_indexes.with_indexes(sorted(plan.new_succeeded_indexes))
            text = str(ctx.succeeded_indexes)
            if text != (st.get("completedIndexes") or ""):
                needs_flush = True
            st["succeeded"] = ctx.succeeded_indexes.total()
            st["completedIndexes"] = text
            failed_text = str(ctx.failed_indexes) if ctx.failed_indexes is not None else None
            if st.get("failedIndexes") != failed_text:
                needs_flush = True
            st["failedIndexes"] = failed_text
        now = self.clock()
        if status.promote_interim(ctx, now):
            needs_flush = True
        needs_flush, rm_err = await self._flush_and_remove_finalizers(ctx, plan, with_finalizer, old_counters,
                                                                      needs_flush)
        if rm_err is not None:
            raise rm_err
        finished = not plan.reached_max_uncounted and status.enact_finished(ctx, self.clock())
        if finished:
            needs_flush = True
        if needs_flush:
            ctx.job = await self._update_status(ctx.job)
            if finished and ctx.finished_condition is not None:
                self._record_finished(ctx.job, ctx.finished_condition)
                self.finished_expectations.add(fields.uid(ctx.job))
            metrics.record_pods_finished(ctx.job, old_counters)

    async def _flush_and_remove_finalizers(self, ctx: SyncContext, plan: tracking.TrackingPlan,
                                           with_finalizer: set[str], old_counters: Obj,
                                           needs_flush: bool) -> tuple[bool, Exception | None]:
        """Commit the uncounted UIDs, remove finalizers, fold removed ones into counters."""
        if needs_flush:
            ctx.job = await self._update_status(ctx.job)
            if ctx.backoff is not None:
                self.backoff_store.update(ctx.backoff)
            metrics.record_pods_finished(ctx.job, old_counters)
            old_counters.clear()
            old_counters.update(_counters(fields.status(ctx.job)))
            needs_flush = False
        for action, n in plan.policy_actions.items():
            metrics.POD_FAILURES_HANDLED_BY_FAILURE_POLICY.labels(action).inc(n)
        rm_err: Exception | None = None
        if plan.pods_to_remove_finalizer:
            done, rm_err = await self.pod_control.remove_finalizers(ctx.key, plan.pods_to_remove_finalizer)
            for p, ok in zip(plan.pods_to_remove_finalizer, done, strict=True):
                if ok:
                    with_finalizer.discard(fields.uid(p))
        if tracking.clean_uncounted_without_finalizers(fields.status_for_update(ctx.job), with_finalizer):
            needs_flush = True
        if rm_err is not None and needs_flush:
            await self._update_status(ctx.job)
        return needs_flush, rm_err

    async def _update_status(self, job: Obj) -> Obj:
        body = copy.copy(job)
        st = copy.deepcopy(fields.status(job))
        u = st.get("uncountedTerminatedPods") or {}
        st["uncountedTerminatedPods"] = {k: v for k, v in u.items() if v}
        for k in ("completedIndexes",):
            if not st.get(k):
                st.pop(k, None)
        if st.get("failedIndexes") is None:
            st.pop("failedIndexes", None)
        body["status"] = st
        return self._own_writes.record(
            await self.client.replace(JOBS, fields.namespace(job), fields.name(job), body, subresource="status"))

    def _record_finished(self, job: Obj, cond: Obj) -> None:
        mode = fields.completion_mode(job)
        if cond["type"] == fields.COMPLETE:
            c = fields.completions(job)
            if c is not None and int(fields.status(job).get("succeeded") or 0) > c:
                self.events.event(job, "Warning", "TooManySucceededPods",
                                 "Too many succeeded pods running after completion count reached")
            self.events.event(job, "Normal", "Completed", "Job completed")
            metrics.JOBS_FINISHED.labels(mode, "succeeded", cond.get("reason") or "").inc()
        else:
            self.events.event(job, "Warning", cond.get("reason") or "", cond.get("message") or "")
            metrics.JOBS_FINISHED.labels(mode, "failed", cond.get("reason") or "").inc()


def _counters(st: Obj) -> Obj:
    return {k: st.get(k) for k in ("succeeded", "failed", "completedIndexes", "failedIndexes")}
