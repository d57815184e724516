"""Counting finished pods exactly once (KEP-2307, job tracking with finalizers).

Every pod carries the ``batch.kubernetes.io/job-tracking`` finalizer, so it cannot vanish
before the Job counted it. Counting is a two-phase commit through the Job status:

1. a finished pod's UID is written to ``status.uncountedTerminatedPods``;
2. its finalizer is removed;
3. UIDs whose pods no longer carry the finalizer move from the uncounted lists into the
   ``succeeded`` / ``failed`` counters.

A crash between any two steps is harmless: a UID in the uncounted list is never added
again, and a pod without the finalizer is never looked at again. Indexed Jobs count
successes through ``completedIndexes`` instead of UIDs. At most ``MAX_UNCOUNTED_PODS`` pods
are handled per sync, which bounds the status size and shares the controller fairly.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from builtin_controller import fields
from builtin_controller.failure_policy import is_pod_failed, match
from jobapi import conditions as jc
from jobapi.intervals import Intervals
from kruntime.resources import Obj

MAX_UNCOUNTED_PODS = 500


def uncounted_lists(status: Obj) -> tuple[list[str], list[str]]:
    """The succeeded and failed UIDs of ``status.uncountedTerminatedPods``, read only."""
    u = status.get("uncountedTerminatedPods") or {}
    return list(u.get("succeeded") or []), list(u.get("failed") or [])


def ensure_uncounted(status: Obj) -> Obj:
    """Normalise ``status.uncountedTerminatedPods`` in place (both lists present) and return it
    for updating; the first step of a sync, on its private copy of the Job."""
    u: Obj = status.get("uncountedTerminatedPods") or {}
    u.setdefault("succeeded", [])
    u.setdefault("failed", [])
    if u["succeeded"] is None:
        u["succeeded"] = []
    if u["failed"] is None:
        u["failed"] = []
    status["uncountedTerminatedPods"] = u
    return u


def clean_uncounted_without_finalizers(status: Obj, uids_with_finalizer: set[str]) -> bool:
    """Step 3: move UIDs whose finalizer is gone into the counters. True if anything moved."""
    u = ensure_uncounted(status)
    changed = False
    for kind in ("succeeded", "failed"):
        keep = [x for x in u[kind] if x in uids_with_finalizer]
        if len(keep) != len(u[kind]):
            changed = True
            status[kind] = int(status.get(kind) or 0) + len(u[kind]) - len(keep)
            u[kind] = keep
    return changed


def can_remove_finalizer(job: Obj, pod: Obj, consider_failed: bool, finishing: bool,
                         delayed: dict[int, Obj]) -> bool:
    """Whether the pod's finalizer may go in this sync.

    Yes when the Job is being deleted or is finishing, when the pod succeeded, or when it
    failed — unless it is the failed pod whose failure count its index's replacement still
    has to inherit (``backoffLimitPerIndex``).
    """
    if fields.deletion_timestamp(job) is not None or finishing or fields.phase(pod) == fields.SUCCEEDED:
        return True
    if not consider_failed:
        return False
    if fields.has_backoff_limit_per_index(job):
        ix = fields.completion_index(pod)
        if ix != fields.UNKNOWN_INDEX:
            held = delayed.get(ix)
            if held is not None and fields.uid(held) == fields.uid(pod):
                return False
    return True


@dataclass
class TrackingPlan:
    pods_to_remove_finalizer: list[Obj] = field(default_factory=list)
    new_succeeded_indexes: list[int] = field(default_factory=list)
    policy_actions: Counter[str] = field(default_factory=Counter)
    reached_max_uncounted: bool = False
    needs_flush: bool = False


def plan(job: Obj, pods: list[Obj], *, expected_rm: frozenset[str], prev_uncounted_succeeded: set[str],
         prev_uncounted_failed: set[str], prev_succeeded_indexes: Intervals, finished_condition: Obj | None,
         delayed: dict[int, Obj]) -> TrackingPlan:
    """Steps 1 and the choice for 2: record newly finished pods in ``job``'s uncounted lists
    (mutating ``job``) and pick the pods whose finalizer to remove.

    ``pods`` must be in completion-index order for Indexed Jobs, so that indexes enter
    ``completedIndexes`` in order when the per-sync cap cuts the list short.
    """
    out = TrackingPlan()
    st = fields.status_for_update(job)
    u = ensure_uncounted(st)
    indexed = fields.is_indexed(job)
    completions = fields.completions(job) or 0
    policy = fields.pod_failure_policy(job)
    # A job that is failing (not succeeding) counts every unfinished pod as failed.
    failing = finished_condition is not None and not jc.holds(finished_condition, jc.SUCCESS_CRITERIA_MET)
    for pod in pods:
        pid = fields.uid(pod)
        if not fields.has_tracking_finalizer(pod) or pid in expected_rm:
            continue  # handled by an earlier sync
        consider_failed = is_pod_failed(pod, job)
        if not can_remove_finalizer(job, pod, consider_failed, finished_condition is not None, delayed):
            continue
        out.pods_to_remove_finalizer.append(pod)
        if fields.phase(pod) == fields.SUCCEEDED and pid not in prev_uncounted_failed:
            if indexed:
                ix = fields.completion_index(pod)
                if ix != fields.UNKNOWN_INDEX and ix < completions and not prev_succeeded_indexes.has(ix):
                    out.new_succeeded_indexes.append(ix)
                    out.needs_flush = True
            elif pid not in prev_uncounted_succeeded:
                out.needs_flush = True
                u["succeeded"].append(pid)
        elif consider_failed or failing:
            ix = fields.completion_index(pod)
            if pid not in prev_uncounted_failed and (not indexed or (ix != fields.UNKNOWN_INDEX and ix < completions)):
                if policy is not None:
                    v = match(policy, pod)
                    if v.action is not None:
                        out.policy_actions[v.action] += 1
                    if v.count_failed:
                        out.needs_flush = True
                        u["failed"].append(pid)
                else:
                    out.needs_flush = True
                    u["failed"].append(pid)
        if len(out.new_succeeded_indexes) + len(u["succeeded"]) + len(u["failed"]) >= MAX_UNCOUNTED_PODS:
            out.reached_max_uncounted = True
            break
    return out


def uids_with_finalizer(pods: list[Obj], expected_rm: frozenset[str]) -> set[str]:
    return {fields.uid(p) for p in pods if fields.has_tracking_finalizer(p) and fields.uid(p) not in expected_rm}


def new_finished_pods(job: Obj, pods: list[Obj], expected_rm: frozenset[str], uncounted_succeeded: set[str],
                      uncounted_failed: set[str]) -> tuple[list[Obj], list[Obj]]:
    """Pods that finished since the last sync and are in no uncounted list yet."""
    def valid(p: Obj, uncounted: set[str]) -> bool:
        if not fields.has_tracking_finalizer(p) or fields.uid(p) in uncounted or fields.uid(p) in expected_rm:
            return False
        if fields.is_indexed(job):
            ix = fields.completion_index(p)
            if ix == fields.UNKNOWN_INDEX or ix >= (fields.completions(job) or 0):
                return False
        return True

    succeeded = [p for p in pods if valid(p, uncounted_succeeded) and fields.phase(p) == fields.SUCCEEDED]
    failed = [p for p in pods if valid(p, uncounted_failed) and is_pod_failed(p, job)]
    return succeeded, failed


def succeeded_indexes(job: Obj, pods: list[Obj]) -> tuple[Intervals, Intervals]:
    """(indexes already in status, those plus indexes of succeeded pods not yet counted)."""
    completions = fields.completions(job) or 0
    prev = Intervals.parse(fields.status(job).get("completedIndexes") or "", completions)
    new = sorted({
        ix for p in pods
        if fields.phase(p) == fields.SUCCEEDED and fields.has_tracking_finalizer(p)
        and (ix := fields.completion_index(p)) != fields.UNKNOWN_INDEX and ix < completions
    })
    return prev, prev.with_indexes(new)


def is_index_failed(job: Obj, pod: Obj) -> bool:
    """The pod's failure exhausts its index: a FailIndex rule, or the per-index limit."""
    counted = False
    if is_pod_failed(pod, job):
        policy = fields.pod_failure_policy(job)
        if policy is not None:
            v = match(policy, pod)
            if v.action == fields.ACTION_FAIL_INDEX:
                return True
            counted = v.count_failed
        else:
            counted = True
    limit = int(fields.spec(job).get("backoffLimitPerIndex") or 0)
    return counted and fields.index_failure_count(pod) >= limit


def failed_indexes(job: Obj, pods: list[Obj]) -> Intervals:
    completions = fields.completions(job) or 0
    stored = fields.status(job).get("failedIndexes")
    prev = Intervals.parse(stored, completions) if stored is not None else Intervals()
    new = sorted({
        ix for p in pods
        if (ix := fields.completion_index(p)) != fields.UNKNOWN_INDEX and ix < completions
        and fields.has_tracking_finalizer(p) and is_index_failed(job, p)
    })
    return prev.with_indexes(new)
