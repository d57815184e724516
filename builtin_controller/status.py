"""What a Job's status should say, given the Job and its pods: counters and conditions.

The order of evaluation is the contract (and the upstream controller's): an earlier
verdict is never overturned by a later one.

1. An existing ``SuccessCriteriaMet`` or ``FailureTarget`` stands (a previous sync decided).
2. Failure: a pod failure policy FailJob match, the backoff limit, the active deadline,
   then (Indexed, per-index backoff) too many failed indexes / all indexes finished with
   some failed.
3. Success: a success policy rule, or completions reached.
4. The decision is written first as the interim condition (``FailureTarget`` /
   ``SuccessCriteriaMet``); the terminal ``Failed`` / ``Complete`` (copying its reason and
   message) follows only once no pod is uncounted or terminating.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from builtin_controller import fields, success_policy
from builtin_controller.backoff import BackoffRecord
from builtin_controller.failure_policy import counts_as_failure, fail_job_message
from builtin_controller.pods import count_ready, past_backoff_limit_on_failure, pods_with_delayed_deletion_per_index
from builtin_controller.semantics import Semantics
from builtin_controller.tracking import failed_indexes, new_finished_pods, succeeded_indexes, uncounted_lists
from jobapi import conditions as jc
from jobapi.intervals import Intervals
from kruntime.resources import Obj


def new_condition(ctype: str, status: str, reason: str, message: str, now: datetime) -> Obj:
    return jc.new_condition(ctype, status, reason, message, fields.format_time(now))


def ensure_condition(conditions: list[Obj], ctype: str, status: str, reason: str, message: str,
                     now: datetime) -> bool:
    """Set a condition in place by the upstream controller's rule (any change restamps it)."""
    return jc.set_restamping(conditions, ctype, status, reason, message, fields.format_time(now))


def failed_from_failure_target(cond: Obj, now: datetime) -> Obj:
    return new_condition(fields.FAILED, "True", cond.get("reason") or "", cond.get("message") or "", now)


@dataclass
class SyncContext:
    """One sync's view of a Job (a private copy) and its claimed pods."""

    job: Obj
    key: str
    pods: list[Obj]
    #: the release whose Job controller this sync behaves like
    semantics: Semantics
    expected_rm: frozenset[str] = frozenset()
    active_pods: list[Obj] = field(default_factory=list)
    ready: int = 0
    terminating: int = 0
    uncounted_succeeded: set[str] = field(default_factory=set)
    uncounted_failed: set[str] = field(default_factory=set)
    new_succeeded_pods: list[Obj] = field(default_factory=list)
    new_failed_pods: list[Obj] = field(default_factory=list)
    succeeded: int = 0
    failed: int = 0
    prev_succeeded_indexes: Intervals = field(default_factory=Intervals)
    succeeded_indexes: Intervals = field(default_factory=Intervals)
    failed_indexes: Intervals | None = None
    finished_condition: Obj | None = None
    delayed_deletion: dict[int, Obj] = field(default_factory=dict)
    backoff: BackoffRecord | None = None

    def apply(self, verdict: FinishVerdict) -> None:
        """Take :func:`evaluate`'s decisions into this sync's working state."""
        self.finished_condition = verdict.finished_condition
        if verdict.indexed is not None:
            ix = verdict.indexed
            self.prev_succeeded_indexes, self.succeeded_indexes = ix.prev_succeeded, ix.succeeded
            self.succeeded = ix.succeeded.total()
            if ix.failed is not None:
                self.failed_indexes = ix.failed
                self.delayed_deletion = ix.delayed_deletion


def new_context(job: Obj, key: str, pods: list[Obj], expected_rm: frozenset[str], semantics: Semantics) -> SyncContext:
    """Counters as they stand: stored ones plus pods finished since, minus ignored failures."""
    st = fields.status(job)
    uncounted_succeeded, uncounted_failed = uncounted_lists(st)
    ctx = SyncContext(job=job, key=key, pods=pods, semantics=semantics, expected_rm=expected_rm)
    ctx.active_pods = [p for p in pods if fields.is_active(p)]
    ctx.ready = count_ready(ctx.active_pods)
    ctx.terminating = sum(1 for p in pods if fields.is_terminating(p))
    ctx.uncounted_succeeded = set(uncounted_succeeded)
    ctx.uncounted_failed = set(uncounted_failed)
    ctx.new_succeeded_pods, ctx.new_failed_pods = new_finished_pods(
        job, pods, expected_rm, ctx.uncounted_succeeded, ctx.uncounted_failed)
    counted_failures = sum(1 for p in ctx.new_failed_pods if counts_as_failure(job, p))
    ctx.succeeded = int(st.get("succeeded") or 0) + len(ctx.new_succeeded_pods) + len(ctx.uncounted_succeeded)
    ctx.failed = int(st.get("failed") or 0) + counted_failures + len(ctx.uncounted_failed)
    return ctx


def past_active_deadline(job: Obj, now: datetime) -> bool:
    ads = fields.spec(job).get("activeDeadlineSeconds")
    start = fields.parse_time(fields.status(job).get("startTime"))
    if ads is None or start is None or fields.suspended(job):
        return False
    return (now - start).total_seconds() >= int(ads)


@dataclass(frozen=True)
class IndexedVerdict:
    """The Indexed bookkeeping a sync works with (see ``tracking``)."""

    prev_succeeded: Intervals
    succeeded: Intervals
    failed: Intervals | None = None
    delayed_deletion: dict[int, Obj] = field(default_factory=dict)


@dataclass(frozen=True)
class FinishVerdict:
    """What :func:`evaluate` decided about a Job, before completions-reached is checked."""

    #: the interim (or carried-over) finished condition, None while the Job runs on
    finished_condition: Obj | None = None
    #: seconds after which the active deadline must be checked again, when one is pending
    recheck: float | None = None
    indexed: IndexedVerdict | None = None


def evaluate(ctx: SyncContext, now: datetime) -> FinishVerdict:
    """Decide the finished condition (steps 1-3 minus completions reached) and, for Indexed
    Jobs, the index bookkeeping. Pure: ``ctx`` is read, never changed (see ``SyncContext.apply``)."""
    job = ctx.job
    recheck: float | None = None
    finished: Obj | None = None
    scm = fields.condition(job, fields.SUCCESS_CRITERIA_MET)
    if scm is not None and scm.get("status") == "True":
        finished = scm
    if finished is None:
        ft = fields.condition(job, fields.FAILURE_TARGET)
        if ft is not None and ft.get("status") == "True":
            finished = failed_from_failure_target(ft, now)
        elif (msg := fail_job_message(job, ctx.pods)) is not None:
            finished = new_condition(fields.FAILURE_TARGET, "True", fields.REASON_POD_FAILURE_POLICY, msg, now)
    if finished is None:
        if ctx.failed > fields.backoff_limit(job) or past_backoff_limit_on_failure(job, ctx.pods):
            finished = new_condition(fields.FAILURE_TARGET, "True", fields.REASON_BACKOFF_LIMIT_EXCEEDED,
                                     fields.MSG_BACKOFF_LIMIT, now)
        elif past_active_deadline(job, now):
            finished = new_condition(fields.FAILURE_TARGET, "True", fields.REASON_DEADLINE_EXCEEDED,
                                     fields.MSG_DEADLINE, now)
        elif fields.spec(job).get("activeDeadlineSeconds") is not None and not fields.suspended(job):
            start = fields.parse_time(fields.status(job).get("startTime")) or now
            recheck = int(fields.spec(job)["activeDeadlineSeconds"]) - (now - start).total_seconds()
    if not fields.is_indexed(job):
        return FinishVerdict(finished, recheck)
    completions = fields.completions(job) or 0
    prev_succeeded, succeeded = succeeded_indexes(job, ctx.pods)
    failed: Intervals | None = None
    delayed: dict[int, Obj] = {}
    if fields.has_backoff_limit_per_index(job):
        failed = failed_indexes(job, ctx.pods)
        if finished is None:
            max_failed = fields.spec(job).get("maxFailedIndexes")
            nfailed = failed.total()
            if max_failed is not None and nfailed > int(max_failed):
                finished = new_condition(fields.FAILURE_TARGET, "True", fields.REASON_MAX_FAILED_INDEXES_EXCEEDED,
                                         fields.MSG_MAX_FAILED_INDEXES, now)
            elif nfailed > 0 and nfailed + succeeded.total() >= completions:
                finished = new_condition(fields.FAILURE_TARGET, "True", fields.REASON_FAILED_INDEXES,
                                         fields.MSG_FAILED_INDEXES, now)
        delayed = pods_with_delayed_deletion_per_index(job, ctx.pods, ctx.active_pods, ctx.expected_rm, succeeded,
                                                       failed)
    if finished is None:
        msg = success_policy.match(fields.spec(job).get("successPolicy"), completions, succeeded)
        if msg is not None:
            finished = new_condition(fields.SUCCESS_CRITERIA_MET, "True", fields.REASON_SUCCESS_POLICY, msg, now)
    return FinishVerdict(finished, recheck, IndexedVerdict(prev_succeeded, succeeded, failed, delayed))


def completions_reached(job: Obj, succeeded: int, active: int) -> bool:
    """Work-queue Jobs (no ``completions``) finish on the first success once none runs."""
    c = fields.completions(job)
    if c is None:
        return succeeded > 0 and active == 0
    return succeeded >= c and active == 0


def completions_reached_condition(now: datetime) -> Obj:
    return new_condition(fields.SUCCESS_CRITERIA_MET, "True", fields.REASON_COMPLETIONS_REACHED,
                         fields.MSG_COMPLETIONS_REACHED, now)


def ensure_suspend_condition(job: Obj, now: datetime, semantics: Semantics) -> str | None:
    """Bring ``Suspended`` in line with ``spec.suspend``; the event reason when it changed.

    Resuming restarts ``startTime``: ``activeDeadlineSeconds`` counts continuous activity,
    so time spent suspended must not count against it. From 1.36 suspending also clears it
    (``Semantics.clear_start_time_on_suspend``).
    """
    conds = fields.status_for_update(job).setdefault("conditions", [])
    if fields.suspended(job):
        if ensure_condition(conds, fields.SUSPENDED, "True", fields.REASON_JOB_SUSPENDED, "Job suspended", now):
            if semantics.clear_start_time_on_suspend:
                fields.status_for_update(job).pop("startTime", None)
            return "Suspended"
        return None
    if ensure_condition(conds, fields.SUSPENDED, "False", fields.REASON_JOB_RESUMED, "Job resumed", now):
        fields.status_for_update(job)["startTime"] = fields.format_time(now)
        return "Resumed"
    return None


def promote_interim(ctx: SyncContext, now: datetime) -> bool:
    """Write the interim condition now and turn the decision into its terminal form.

    Returns whether the status changed (an interim condition was appended).
    """
    cond = ctx.finished_condition
    if cond is None:
        return False
    conds = fields.status_for_update(ctx.job).setdefault("conditions", [])
    changed = False
    if cond.get("type") == fields.FAILURE_TARGET:
        conds.append(cond)
        changed = True
        ctx.finished_condition = failed_from_failure_target(cond, now)
    elif jc.holds(cond, jc.SUCCESS_CRITERIA_MET):
        if not fields.condition_true(ctx.job, fields.SUCCESS_CRITERIA_MET):
            conds.append(cond)
            changed = True
        ctx.finished_condition = new_condition(fields.COMPLETE, "True", cond.get("reason") or "",
                                               cond.get("message") or "", now)
    return changed


def enact_finished(ctx: SyncContext, now: datetime) -> bool:
    """Add the terminal condition (and ``completionTime`` with Complete) once allowed."""
    cond = ctx.finished_condition
    if cond is None:
        return False
    st = fields.status_for_update(ctx.job)
    u = st.get("uncountedTerminatedPods") or {}
    if (u.get("succeeded") or []) or (u.get("failed") or []):
        return False
    if ctx.terminating > 0:
        return False
    conds = st.setdefault("conditions", [])
    ensure_condition(conds, cond["type"], cond["status"], cond.get("reason") or "", cond.get("message") or "", now)
    if cond["type"] == fields.COMPLETE:
        st["completionTime"] = cond["lastTransitionTime"]
    return True
