"""The mirror's reliability invariants, checked from outside over a whole run.

Why from outside: a chaos run kills the controller, so nothing it remembers can be trusted
to judge it. :class:`InvariantChecker` watches (never polls: a copy that lives 300 ms is still
seen) the manager Jobs, and every worker's Jobs and Pods, and records per manager Job uid every
copy seen on every worker with its lifetime and its pods. With ``kinds`` naming ``JobSet`` it
watches the manager JobSets and every worker's JobSets too: a JobSet copy's pods are those of
the child Jobs the worker's JobSet controller made for it (JobSet labels each child Job and its
pods with the JobSet's uid), and those child Jobs are recorded, so they count as orphans when
they outlive their copy. :class:`Recorder` is that record,
fed with (event, object, time) and free of I/O; the verdict functions below it are pure and
table-tested (tests/unit/test_invariants.py).

The verdict (:func:`verdict`) names:

* **lost**: a manager Job that never reached Complete/Failed (a JobSet: Completed/Failed), or
  lost our finalizer while one of its copies still ran (unfinished and not deleted);
* **duplicates**: two copies of one manager Job with active pods at the same instant, split
  into overlaps that began inside a fault window and those that began outside any (after
  recovery: the real defect);
* **orphans**: copies, a JobSet copy's child Jobs, or pods of copies, still present when the
  checker is asked (callers ask one GC period after the end);
* **wrong outcomes**: the manager's terminal condition, counters or index sets not those of
  the copy that decided it (counters may be the max over runs: the mirror's documented rule);
  for a JobSet: its terminalState without its condition (or both conditions), its restarts
  outside what its copies reported, a Completed one whose replicatedJobs did not all succeed,
  or an outcome other than the one the workload expected (:meth:`Recorder.expect`);
* **run on the manager**: a child Job of a claimed JobSet created in the manager (its JobSet
  controller must leave a JobSet whose ``managedBy`` names another controller alone);
* **rejected status writes** and **reconcile errors by reason**, from the controller's metrics
  summed over every controller process of the run (:class:`MetricsLedger`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from jobapi import conditions as jc
from jobapi.names import CONTROLLER_UID_LABELS
from kruntime.client import ApiError, ClusterClient
from kruntime.informer import EventType, Informer
from kruntime.resources import JOBS, PODS, Obj
from mirror.jobsets import status_translation as jobset_status
from mirror.jobsets.kind import JOBSETS
from mirror.naming import FINALIZER, LABEL_ORIGIN, LABEL_ORIGIN_UID
from testkit.jobsets import JOBSET_UID_LABEL

#: how many examples of each kind of violation a verdict keeps
EXAMPLES = 10
JOB, JOBSET = "Job", "JobSet"


# --- the record ---------------------------------------------------------------------------------

@dataclass
class PodLife:
    uid: str
    worker: str
    name: str
    copy_uid: str
    created: float
    #: first instant it stopped counting as active: terminal phase, deletionTimestamp or gone
    inactive: float | None = None
    gone: float | None = None


@dataclass
class CopyLife:
    uid: str
    worker: str
    name: str
    manager_uid: str
    origin: str
    first_seen: float
    gone: float | None = None
    #: first instant it was going away (deletionTimestamp) or gone
    ending: float | None = None
    status: Obj = field(default_factory=dict)
    #: first instant it carried an outcome (SuccessCriteriaMet/FailureTarget or a terminal condition)
    decided_at: float | None = None
    outcome: str | None = None  # Complete | Failed, from the first outcome condition seen
    #: when a hand edit removed its origin labels: from then on it is not ours (a pod relabelled
    #: out of its ReplicaSet's selector is released the same way) and the controller must not touch it
    disowned_at: float | None = None
    kind: str = JOB


@dataclass
class ChildLife:
    """A Job the worker's JobSet controller made for a JobSet copy (``copy_uid``)."""

    uid: str
    worker: str
    name: str
    copy_uid: str
    first_seen: float
    gone: float | None = None


@dataclass
class ManagerLife:
    uid: str
    cluster: str
    key: str
    first_seen: float
    terminal: str | None = None
    terminal_at: float | None = None
    status: Obj = field(default_factory=dict)
    had_finalizer: bool = False
    released_at: float | None = None
    deleted_at: float | None = None
    #: what a live read of its copies found right after the release (the watches may lag
    #: behind a returned worker): "" = none left running; else the copy still running, or
    #: "unreachable: ..." when its worker did not answer
    release_check: str | None = None
    kind: str = JOB


def _conds(obj: Obj) -> list[jc.Condition]:
    return jc.job_conditions(obj)


def job_terminal(obj: Obj) -> str | None:
    conds = _conds(obj)
    return next((t for t in jc.TERMINAL_TYPES if jc.is_true(conds, t)), None)


def terminal_of(kind: str, obj: Obj) -> str | None:
    """Complete/Failed (a Job) or Completed/Failed (a JobSet: its terminalState or terminal condition)."""
    if kind == JOBSET:
        return jobset_status.terminal_state(obj.get("status"))
    return job_terminal(obj)


def job_outcome(obj: Obj) -> str | None:
    """Complete/Failed once decided: the interim condition counts (the mirror finishes from it)."""
    conds = _conds(obj)
    if jc.is_true(conds, jc.COMPLETE) or jc.is_true(conds, jc.SUCCESS_CRITERIA_MET):
        return jc.COMPLETE
    if jc.is_true(conds, jc.FAILED) or jc.is_true(conds, jc.FAILURE_TARGET):
        return jc.FAILED
    return None


def outcome_of(kind: str, obj: Obj) -> str | None:
    """Once decided: a Job's interim condition counts; a JobSet has none, its outcome is its terminal state."""
    return terminal_of(kind, obj) if kind == JOBSET else job_outcome(obj)


def pod_active(pod: Obj) -> bool:
    """A pod counts as running work until it is terminal or being deleted (kwok then fails it)."""
    if pod["metadata"].get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def controller_uid(pod: Obj) -> str | None:
    labels = pod["metadata"].get("labels") or {}
    return next((labels[k] for k in CONTROLLER_UID_LABELS if labels.get(k)), None)


def copy_uid_of_pod(pod: Obj) -> str | None:
    """The copy a pod works for: a JobSet copy's (JobSet labels the pods of its child Jobs with its
    uid), else its Job's."""
    labels = pod["metadata"].get("labels") or {}
    return labels.get(JOBSET_UID_LABEL) or controller_uid(pod)


class Recorder:
    """Everything the watches saw, by uid. Fed by :class:`InvariantChecker`; no I/O."""

    def __init__(self, *, managed_by: str, origins: set[str] | None) -> None:
        self.managed_by = managed_by
        #: origins whose copies are recorded; None: every copy with an origin uid
        self.origins = None if origins is None else set(origins)
        self.managers: dict[str, ManagerLife] = {}
        self.copies: dict[str, CopyLife] = {}
        self.pods: dict[str, PodLife] = {}
        #: Jobs the workers' JobSet controllers made for JobSet copies, by uid
        self.children: dict[str, ChildLife] = {}
        #: Jobs a JobSet controller made in a manager: uid -> (the JobSet's uid, what to report); judged
        #: for the JobSets claimed (an unclaimed JobSet is the manager's JobSet controller's to run)
        self.manager_children: dict[str, tuple[str, str]] = {}
        #: manager uids whose finalizer release awaits a live check of their copies
        self.released: list[str] = []
        #: (kind, "namespace/name") -> the outcome the workload meant it to end with
        self.expected: dict[tuple[str, str], str] = {}

    def expect(self, kind: str, key: str, outcome: str) -> None:
        """The manager ``kind`` ``key`` must end ``outcome`` (Complete/Failed; a JobSet Completed/Failed)."""
        self.expected[(kind, key)] = outcome

    def on_manager(self, cluster: str, etype: EventType, obj: Obj, now: float, kind: str = JOB) -> None:
        md = obj["metadata"]
        uid = md["uid"]
        m = self.managers.get(uid)
        if m is None:
            if (obj.get("spec") or {}).get("managedBy") != self.managed_by:
                js_uid = (md.get("labels") or {}).get(JOBSET_UID_LABEL)
                if kind == JOB and js_uid and etype != "DELETED":
                    self.manager_children.setdefault(uid, (js_uid, f"{cluster}:{md.get('namespace')}/{md['name']} "
                                                                   f"(child Job of claimed JobSet uid {js_uid})"))
                return
            m = self.managers[uid] = ManagerLife(uid, cluster, f"{md.get('namespace')}/{md['name']}", now,
                                                 kind=kind)
        m.status = obj.get("status") or {}
        if m.terminal is None and (t := terminal_of(kind, obj)):
            m.terminal, m.terminal_at = t, now
        has = FINALIZER in (md.get("finalizers") or [])
        if has:
            m.had_finalizer = True
            m.released_at = None
        elif m.had_finalizer and m.released_at is None:
            m.released_at = now
            self.released.append(uid)
        if etype == "DELETED" and m.deleted_at is None:
            m.deleted_at = now
            if m.had_finalizer and m.released_at is None:
                m.released_at = now
                self.released.append(uid)

    def on_copy(self, worker: str, etype: EventType, obj: Obj, now: float, kind: str = JOB) -> None:
        md = obj["metadata"]
        uid = md["uid"]
        c = self.copies.get(uid)
        if c is None:
            labels = md.get("labels") or {}
            if kind == JOB and not labels.get(LABEL_ORIGIN_UID) and labels.get(JOBSET_UID_LABEL):
                self.on_child(worker, etype, obj, now)
                return
            if not labels.get(LABEL_ORIGIN_UID) or (self.origins is not None
                                                   and labels.get(LABEL_ORIGIN) not in self.origins):
                return
            c = self.copies[uid] = CopyLife(uid, worker, f"{md.get('namespace')}/{md['name']}",
                                            labels[LABEL_ORIGIN_UID], labels.get(LABEL_ORIGIN, ""), now,
                                            kind=kind)
        if etype == "DELETED" or md.get("deletionTimestamp"):
            c.ending = c.ending or now
        if etype == "DELETED":
            c.gone = c.gone or now
            return
        labels = md.get("labels") or {}
        if c.disowned_at is None and (labels.get(LABEL_ORIGIN) != c.origin or labels.get(LABEL_ORIGIN_UID)
                                      != c.manager_uid):
            c.disowned_at = now
        c.status = obj.get("status") or {}
        if c.decided_at is None and (o := outcome_of(c.kind, obj)):
            c.decided_at, c.outcome = now, o

    def on_child(self, worker: str, etype: EventType, obj: Obj, now: float) -> None:
        """A worker Job labelled with a JobSet's uid: a child Job of that JobSet (a copy when it is ours)."""
        md = obj["metadata"]
        ch = self.children.get(md["uid"])
        if ch is None:
            ch = self.children[md["uid"]] = ChildLife(md["uid"], worker, f"{md.get('namespace')}/{md['name']}",
                                                      (md.get("labels") or {})[JOBSET_UID_LABEL], now)
        if etype == "DELETED":
            ch.gone = ch.gone or now

    def on_pod(self, worker: str, etype: EventType, obj: Obj, now: float) -> None:
        md = obj["metadata"]
        uid = md["uid"]
        p = self.pods.get(uid)
        if p is None:
            cuid = copy_uid_of_pod(obj)
            if cuid is None:
                return
            p = self.pods[uid] = PodLife(uid, worker, f"{md.get('namespace')}/{md['name']}", cuid, now)
        if etype == "DELETED":
            p.gone = p.gone or now
            p.inactive = p.inactive or now
        elif p.inactive is None and not pod_active(obj):
            p.inactive = now

    def pods_of(self, copy_uid: str) -> list[PodLife]:
        return [p for p in self.pods.values() if p.copy_uid == copy_uid]

    def copies_of(self, manager_uid: str) -> list[CopyLife]:
        return [c for c in self.copies.values() if c.manager_uid == manager_uid]

    def lagging(self) -> int:
        """Manager Jobs not yet in line with their copies: a decided copy but an unfinished
        manager, or an unfinished manager with no live copy. 0 = the mirror has caught up."""
        by_mgr: dict[str, list[CopyLife]] = {}
        for c in self.copies.values():
            by_mgr.setdefault(c.manager_uid, []).append(c)
        n = 0
        for uid, m in self.managers.items():
            if m.terminal is not None or m.deleted_at is not None:
                continue
            cs = by_mgr.get(uid, [])
            live = [c for c in cs if c.gone is None]
            if not live or any(terminal_of(c.kind, {"status": c.status}) for c in live):
                n += 1
        return n


# --- pure verdict functions ---------------------------------------------------------------------

Span = tuple[float, float]


def merge_spans(spans: list[Span]) -> list[Span]:
    """The union of intervals as disjoint sorted intervals (touching ones are joined)."""
    out: list[Span] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def active_spans(pods: list[PodLife], end: float) -> list[Span]:
    """When a copy had at least one active pod (a pod still active is active until ``end``)."""
    return merge_spans([(p.created, p.inactive if p.inactive is not None else end) for p in pods
                        if (p.inactive if p.inactive is not None else end) > p.created])


def clip(spans: list[Span], at: float | None) -> list[Span]:
    """The spans up to ``at`` (None: all of them)."""
    if at is None:
        return spans
    return [(s, min(e, at)) for s, e in spans if s < at]


@dataclass(frozen=True)
class Overlap:
    manager_uid: str
    copies: tuple[str, str]
    start: float
    end: float
    during_fault: bool


def overlaps(manager_uid: str, spans_by_copy: dict[str, list[Span]], faults: list[Span]) -> list[Overlap]:
    """Every instant two different copies both had active pods; classified by where it began."""
    out: list[Overlap] = []
    uids = sorted(spans_by_copy)
    for i, a in enumerate(uids):
        for b in uids[i + 1:]:
            for sa, ea in spans_by_copy[a]:
                for sb, eb in spans_by_copy[b]:
                    s, e = max(sa, sb), min(ea, eb)
                    if e > s:
                        during = any(fs <= s <= fe for fs, fe in faults)
                        out.append(Overlap(manager_uid, (a, b), s, e, during))
    return out


#: how soon after a fault ended an overlap of two copies made before it ended must be over to be the
#: fault's (see :func:`forced_by_fault`)
RECOVERY_GRACE = 5.0


def forced_by_fault(o: Overlap, copies: list[CopyLife], faults: list[Span]) -> bool:
    """Whether an overlap is the fault's doing: it began during one, or both copies were made before
    the last fault before it ended and it was over within RECOVERY_GRACE of that end.

    The second is a move the fault forced, made just before the worker came back: the new copy's pod
    starts as the returned worker's stale copy is being deleted, and that copy's pods take a moment
    to stop. A stale copy left running after the controller saw its worker again still counts
    against recovery."""
    if o.during_fault:
        return True
    fault_end = _last_fault_end(o, faults)
    if fault_end is None:
        return False
    return all(c.first_seen <= fault_end for c in copies) and o.end <= fault_end + RECOVERY_GRACE


def _last_fault_end(o: Overlap, faults: list[Span]) -> float | None:
    """The end of the last fault that ended before the overlap began (None: none did)."""
    return max((fe for _, fe in faults if fe <= o.start), default=None)


def _copy_name(c: CopyLife) -> str:
    return f"{c.worker}/{c.name}"


def _overlap_timeline(o: Overlap, copies: list[CopyLife], faults: list[Span]) -> str:
    """`` (from +1.20s after the fault ended; worker-1/x seen -30.1s, ending +2.0s; ...)``: when an
    overlap began and each copy was first seen and began to go, relative to the end of the last fault
    that ended before it began (so a failure says whether a late copy or a slow cleanup made it)."""
    t0 = _last_fault_end(o, faults)
    if t0 is None:
        return ""

    def at(t: float | None) -> str:
        return "never" if t is None else f"{t - t0:+.2f}s"

    parts = [f"{_copy_name(c)} seen {at(c.first_seen)}, ending {at(c.ending)}" for c in copies]
    return f" (from {at(o.start)} after the fault ended; " + "; ".join(parts) + ")"


def lost_reason(m: ManagerLife) -> str | None:
    """Why a manager Job counts as lost, or None.

    A release whose copy sat on a worker that did not answer is not counted here: the
    design leaves such a copy to GC, and the orphan check judges whether GC did its job.
    """
    if m.terminal is None and m.deleted_at is None:
        return "never reached Complete/Failed"
    if m.release_check and not m.release_check.startswith("unreachable"):
        return f"finalizer released while copy {m.release_check} still ran"
    return None


def running_copy(copy_obj: Obj | None, kind: str = JOB) -> bool:
    """A copy read live right after its manager's release still runs: present, unfinished, not being deleted."""
    return copy_obj is not None and not copy_obj["metadata"].get("deletionTimestamp") and terminal_of(
        kind, copy_obj) is None


def deciding_copy(copies: list[CopyLife]) -> CopyLife | None:
    """The copy whose outcome the manager must carry: the first to be decided."""
    decided = [c for c in copies if c.decided_at is not None]
    return min(decided, key=lambda c: c.decided_at or 0.0) if decided else None


def _count(status: Obj, key: str) -> int:
    try:
        return int(status.get(key) or 0)
    except (TypeError, ValueError):
        return 0


def _uncounted(status: Obj, key: str) -> int:
    """Terminated pods a copy had not counted yet (a Job controller counts them before finishing)."""
    uids = (status.get("uncountedTerminatedPods") or {}).get(key)
    return len(set(uids)) if isinstance(uids, list) else 0


def outcome_mismatch(m: ManagerLife, copies: list[CopyLife]) -> str | None:
    """How a finished manager Job's status differs from the run that decided it, or None.

    ``succeeded``/``failed`` may exceed the deciding copy's (the mirror keeps the max over
    runs, the API server rejects a decrease; a copy's uncounted terminated pods count when the
    Job is finished without it) but never the largest any copy reported, uncounted pods included.
    """
    if m.terminal is None:
        return None
    d = deciding_copy(copies)
    if d is None:
        return f"{m.terminal} but no copy ever decided an outcome"
    if d.outcome != m.terminal:
        return f"manager {m.terminal}, deciding copy {d.worker}/{d.name} {d.outcome}"
    if m.kind == JOBSET:
        return jobset_status_mismatch(m, copies, d)
    for key in ("succeeded", "failed"):
        got, floor = _count(m.status, key), _count(d.status, key)
        ceiling = max(_count(c.status, key) + _uncounted(c.status, key) for c in copies)
        if not floor <= got <= ceiling:
            return f"{key}={got}, deciding copy {floor} (largest of any copy {ceiling})"
    for key in ("completedIndexes", "failedIndexes"):
        if (m.status.get(key) or "") != (d.status.get(key) or ""):
            return f"{key}={m.status.get(key)!r}, deciding copy {d.status.get(key)!r}"
    return None


def jobset_status_mismatch(m: ManagerLife, copies: list[CopyLife], d: CopyLife) -> str | None:
    """How a finished manager JobSet's status breaks JobSet's own rules or its copies', or None.

    ``terminalState`` must come with its condition True and the other terminal condition not True;
    ``restarts`` must lie between the deciding copy's and the largest any copy reported (the mirror
    keeps the max; a copy's restarts only grow); a Completed JobSet's every replicatedJob must have
    succeeded Jobs, at least as many as the deciding copy counted (default success policy: all).
    """
    st = m.status
    if st.get("terminalState") != m.terminal:
        return f"terminalState {st.get('terminalState')!r} but the manager ended {m.terminal}"
    true = {c.get("type") for c in st.get("conditions") or [] if isinstance(c, dict) and c.get("status") == "True"}
    if m.terminal not in true:
        return f"terminalState {m.terminal} without its condition True"
    if set(jobset_status.TERMINAL) <= true:
        return "both Completed and Failed True"
    got, floor = _count(st, "restarts"), _count(d.status, "restarts")
    ceiling = max(_count(c.status, "restarts") for c in copies)
    if not floor <= got <= ceiling:
        return f"restarts={got}, deciding copy {floor} (largest of any copy {ceiling})"
    if m.terminal == jobset_status.COMPLETED:
        mine = {r.get("name"): r for r in st.get("replicatedJobsStatus") or [] if isinstance(r, dict)}
        for r in d.status.get("replicatedJobsStatus") or []:
            if not isinstance(r, dict):
                continue
            have = _count(mine.get(r.get("name")) or {}, "succeeded")
            if have < max(1, _count(r, "succeeded")):
                return (f"Completed with replicatedJob {r.get('name')} succeeded={have}, deciding copy "
                        f"{_count(r, 'succeeded')}")
    return None


def expectation_mismatch(m: ManagerLife, expected: str | None) -> str | None:
    """A finished manager object that ended otherwise than its workload meant, or None."""
    if expected is None or m.terminal is None or m.terminal == expected:
        return None
    return f"ended {m.terminal}, the workload meant {expected}"


@dataclass
class ChaosVerdict:
    jobs: int
    lost: list[str] = field(default_factory=list)
    duplicates_during_fault: list[str] = field(default_factory=list)
    duplicates_after_recovery: list[str] = field(default_factory=list)
    orphan_copies: list[str] = field(default_factory=list)
    #: child Jobs of JobSet copies (the workers' JobSet controllers made them) still present
    orphan_children: list[str] = field(default_factory=list)
    orphan_pods: list[str] = field(default_factory=list)
    #: child Jobs of a claimed JobSet made in a manager
    ran_on_manager: list[str] = field(default_factory=list)
    wrong_outcomes: list[str] = field(default_factory=list)
    rejected_writes: int = 0
    reconcile_errors: dict[str, int] = field(default_factory=dict)
    copies_seen: int = 0
    #: finalizers released while a copy sat on a worker that did not answer (left to GC by design)
    released_with_copy_unreachable: list[str] = field(default_factory=list)
    #: copies whose origin labels a hand edit removed: no longer ours, neither orphans nor duplicates after that
    disowned: list[str] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    #: of ``jobs``, how many were JobSets, their copies seen and their child Jobs seen
    jobsets: int = 0
    jobset_copies_seen: int = 0
    child_jobs_seen: int = 0
    jobset_outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """The invariants a chaos run must keep (overlaps inside a fault window are reported, not failed)."""
        return not (self.lost or self.duplicates_after_recovery or self.orphan_copies or self.orphan_children
                    or self.orphan_pods or self.wrong_outcomes or self.rejected_writes or self.ran_on_manager)

    def summary(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs, "copiesSeen": self.copies_seen, "outcomes": self.outcomes,
            "lost": len(self.lost), "duplicatesDuringFault": len(self.duplicates_during_fault),
            "duplicatesAfterRecovery": len(self.duplicates_after_recovery),
            "orphans": len(self.orphan_copies) + len(self.orphan_children) + len(self.orphan_pods),
            "orphanCopies": len(self.orphan_copies), "orphanChildJobs": len(self.orphan_children),
            "orphanPods": len(self.orphan_pods), "wrongOutcomes": len(self.wrong_outcomes),
            "ranOnManager": len(self.ran_on_manager),
            "jobSets": self.jobsets, "jobSetCopiesSeen": self.jobset_copies_seen,
            "childJobsSeen": self.child_jobs_seen, "jobSetOutcomes": self.jobset_outcomes,
            "rejectedWrites": self.rejected_writes, "disownedByHand": len(self.disowned),
            "releasedWithCopyUnreachable": len(self.released_with_copy_unreachable),
            "reconcileErrors": self.reconcile_errors,
            "examples": {k: v[:EXAMPLES] for k, v in (
                ("lost", self.lost), ("duplicatesDuringFault", self.duplicates_during_fault),
                ("duplicatesAfterRecovery", self.duplicates_after_recovery), ("orphanCopies", self.orphan_copies),
                ("orphanChildJobs", self.orphan_children), ("orphanPods", self.orphan_pods),
                ("wrongOutcomes", self.wrong_outcomes), ("ranOnManager", self.ran_on_manager),
                ("releasedWithCopyUnreachable", self.released_with_copy_unreachable)) if v},
        }

    def explain(self) -> str:
        s = self.summary()
        keys = ("jobs", "lost", "duplicatesDuringFault", "duplicatesAfterRecovery", "orphans", "wrongOutcomes",
                "rejectedWrites") + (("jobSets", "orphanChildJobs", "ranOnManager") if self.jobsets else ())
        head = ", ".join(f"{k}={s[k]}" for k in keys)
        return head + "".join(f"\n  {k}: {v}" for k, v in s["examples"].items())


def verdict(rec: Recorder, *, faults: list[Span], end: float, rejected_writes: int = 0,
            reconcile_errors: dict[str, int] | None = None) -> ChaosVerdict:
    """Judge a run from its record. ``end``: the instant the checker was asked (orphans = still present)."""
    v = ChaosVerdict(jobs=len(rec.managers), copies_seen=len(rec.copies), rejected_writes=rejected_writes,
                     reconcile_errors=dict(reconcile_errors or {}),
                     jobsets=sum(1 for m in rec.managers.values() if m.kind == JOBSET),
                     jobset_copies_seen=sum(1 for c in rec.copies.values() if c.kind == JOBSET),
                     child_jobs_seen=sum(1 for ch in rec.children.values() if ch.copy_uid in rec.copies))
    copies_by_mgr: dict[str, list[CopyLife]] = {}
    for c in rec.copies.values():
        copies_by_mgr.setdefault(c.manager_uid, []).append(c)
    pods_by_copy: dict[str, list[PodLife]] = {}
    for p in rec.pods.values():
        pods_by_copy.setdefault(p.copy_uid, []).append(p)
    for uid, m in sorted(rec.managers.items(), key=lambda kv: kv[1].key):
        cs = copies_by_mgr.get(uid, [])
        v.outcomes[m.terminal or "unfinished"] = v.outcomes.get(m.terminal or "unfinished", 0) + 1
        if m.kind == JOBSET:
            v.jobset_outcomes[m.terminal or "unfinished"] = v.jobset_outcomes.get(m.terminal or "unfinished", 0) + 1
        if m.release_check and m.release_check.startswith("unreachable"):
            v.released_with_copy_unreachable.append(f"{m.cluster}:{m.key}: {m.release_check}")
        if (why := lost_reason(m)) is not None:
            v.lost.append(f"{m.cluster}:{m.key}: {why}")
        if (bad := outcome_mismatch(m, cs) or expectation_mismatch(m, rec.expected.get((m.kind, m.key)))) is not None:
            v.wrong_outcomes.append(f"{m.cluster}:{m.key}: {bad}")
        spans = {c.uid: clip(active_spans(pods_by_copy.get(c.uid, []), end), c.disowned_at) for c in cs}
        by_uid = {c.uid: c for c in cs}
        for o in overlaps(uid, spans, faults):
            pair = [by_uid[u] for u in o.copies]
            line = (f"{m.cluster}:{m.key}: {_copy_name(pair[0])} and {_copy_name(pair[1])} "
                    f"both active for {o.end - o.start:.2f}s{_overlap_timeline(o, pair, faults)}")
            found = v.duplicates_during_fault if forced_by_fault(o, pair, faults) else v.duplicates_after_recovery
            found.append(line)
    for c in rec.copies.values():
        if c.disowned_at is not None:
            v.disowned.append(f"{c.worker}/{c.name}")
        elif c.gone is None:
            v.orphan_copies.append(f"{c.worker}/{c.name} (copy of {c.manager_uid})")
    for ch in rec.children.values():
        owner = rec.copies.get(ch.copy_uid)
        if ch.gone is None and owner is not None and owner.disowned_at is None:
            v.orphan_children.append(f"{ch.worker}/{ch.name} (child Job of {owner.worker}/{owner.name})")
    for p in rec.pods.values():
        owner = rec.copies.get(p.copy_uid)
        if p.gone is None and owner is not None and owner.disowned_at is None:
            v.orphan_pods.append(f"{p.worker}/{p.name}")
    v.ran_on_manager = sorted(text for js_uid, text in rec.manager_children.values()
                              if (js := rec.managers.get(js_uid)) is not None and js.kind == JOBSET)
    return v


@dataclass
class MetricsLedger:
    """Controller counters summed over every process of a run (a SIGKILLed one keeps its last scrape)."""

    rejected: dict[str, float] = field(default_factory=dict)
    errors: dict[str, dict[str, float]] = field(default_factory=dict)

    def record(self, instance: str, rejected: float, errors: dict[str, float]) -> None:
        self.rejected[instance] = max(rejected, self.rejected.get(instance, 0.0))
        self.errors[instance] = errors

    def rejected_total(self) -> int:
        return int(sum(self.rejected.values()))

    def errors_by_reason(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for per in self.errors.values():
            for reason, n in per.items():
                out[reason] = out.get(reason, 0) + int(n)
        return dict(sorted(out.items()))


# --- the watching I/O ---------------------------------------------------------------------------

class InvariantChecker:
    """Watch managers and workers for a whole run and judge it (see module docstring).

    ``managers``/``workers``: clients by cluster name; ``namespaces``: where the run's Jobs
    live (one watch per cluster, namespace and resource); ``origins``: the origin label values
    of the installations under test; ``kinds``: the kinds mirrored (with ``JobSet``, every
    cluster must serve the JobSet CRD).
    """

    def __init__(self, managers: dict[str, ClusterClient], workers: dict[str, ClusterClient], namespaces: list[str],
                 *, managed_by: str, origins: set[str], kinds: tuple[str, ...] = (JOB,)) -> None:
        self.recorder = Recorder(managed_by=managed_by, origins=origins)
        self.ledger = MetricsLedger()
        self.faults: list[Span] = []
        self._open_faults: dict[str, float] = {}
        self._informers: list[Informer] = []
        self._by_cluster: dict[str, list[Informer]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.workers = workers
        rec = self.recorder
        for name, c in managers.items():
            for ns in namespaces:
                self._add(name, Informer(c, JOBS, namespace=ns, backoff_cap=2.0),
                          lambda et, old, new, n=name: rec.on_manager(n, et, new, time.time()))
                if JOBSET in kinds:
                    self._add(name, Informer(c, JOBSETS, namespace=ns, backoff_cap=2.0),
                              lambda et, old, new, n=name: rec.on_manager(n, et, new, time.time(), JOBSET))
        for name, c in workers.items():
            for ns in namespaces:
                # Job copies, and the child Jobs of JobSet copies (Recorder.on_copy tells them apart)
                self._add(name, Informer(c, JOBS, namespace=ns, backoff_cap=2.0),
                          lambda et, old, new, n=name: rec.on_copy(n, et, new, time.time()))
                if JOBSET in kinds:
                    self._add(name, Informer(c, JOBSETS, namespace=ns, backoff_cap=2.0),
                              lambda et, old, new, n=name: rec.on_copy(n, et, new, time.time(), JOBSET))
                self._add(name, Informer(c, PODS, namespace=ns, backoff_cap=2.0),
                          lambda et, old, new, n=name: rec.on_pod(n, et, new, time.time()))

    def _add(self, cluster: str, inf: Informer, handler: Any) -> None:
        inf.add_handler(handler)
        self._informers.append(inf)
        self._by_cluster.setdefault(cluster, []).append(inf)

    async def start(self, timeout: float = 60) -> None:
        self._tasks = [asyncio.create_task(i.run()) for i in self._informers]
        await asyncio.gather(*(i.wait_synced(timeout) for i in self._informers))
        self._tasks.append(asyncio.create_task(self._check_releases()))

    def watching(self, cluster: str) -> bool:
        """Every watch on ``cluster`` is connected (after an outage: it has relisted)."""
        return all(i.healthy for i in self._by_cluster.get(cluster, []))

    async def _check_releases(self) -> None:
        """Read the copies of each just-released manager Job live: the watches of a worker that just
        came back may not have caught up, the server has."""
        rec = self.recorder
        while True:
            while rec.released:
                m = rec.managers[rec.released.pop(0)]
                m.release_check = ""
                for c in rec.copies_of(m.uid):
                    if c.gone is not None or c.disowned_at is not None:
                        continue
                    ns, name = c.name.split("/", 1)
                    resource = JOBSETS if c.kind == JOBSET else JOBS
                    try:
                        live = await asyncio.wait_for(self.workers[c.worker].get(resource, ns, name), 5)
                    except ApiError as exc:
                        if exc.not_found:
                            continue
                        m.release_check = f"unreachable: {c.worker}/{c.name} ({exc.status})"
                        continue
                    except (TimeoutError, OSError) as exc:
                        m.release_check = f"unreachable: {c.worker}/{c.name} ({type(exc).__name__})"
                        continue
                    if live["metadata"]["uid"] == c.uid and running_copy(live, c.kind):
                        m.release_check = f"{c.worker}/{c.name}"
                        break
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def fault_began(self, name: str) -> None:
        self._open_faults[name] = time.time()

    def fault_ended(self, name: str) -> None:
        self.faults.append((self._open_faults.pop(name), time.time()))

    @contextlib.contextmanager
    def fault(self, name: str) -> Iterator[None]:
        """Mark a fault window: overlaps that begin inside it are reported apart."""
        self.fault_began(name)
        try:
            yield
        finally:
            self.fault_ended(name)

    def verdict(self) -> ChaosVerdict:
        now = time.time()
        faults = self.faults + [(s, now) for s in self._open_faults.values()]
        return verdict(self.recorder, faults=faults, end=now, rejected_writes=self.ledger.rejected_total(),
                       reconcile_errors=self.ledger.errors_by_reason())
