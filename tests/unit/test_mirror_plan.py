"""The pass plan as a table: a group in, the next action out (mirror/plan.py).

Each row is one situation a pass can meet; the fleet tables (test_reconciler_passes.py) run
the same plan against fake API servers, the integration tests against real ones.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from kruntime.client import ApiError
from kruntime.resources import Obj
from mirror.decisions import Lost, LostStep, WorkerState
from mirror.jobs.kind import JOB_KIND
from mirror.naming import (
    ANNOTATION_CLAIMED_BY,
    ANNOTATION_CLUSTER,
    ANNOTATION_PIN,
    ANNOTATION_REMOTE_NAME,
    FINALIZER,
)
from mirror.plan import Action, Do, Found, Group, next_action
from testkit.fakefleet import job as user_job

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
ORIGIN = "jobmirror-test"
T0 = "2026-11-25T11:00:00Z"
UP = WorkerState(healthy=True)
COMPLETE = {"conditions": [{"type": t, "status": "True", "lastProbeTime": T0, "lastTransitionTime": T0}
                           for t in ("SuccessCriteriaMet", "Complete")],
            "succeeded": 1, "startTime": T0, "completionTime": T0}


def manager(*, placed: str | None = "w1", ours: bool = True, suspend: bool = False, deleted: bool = False,
            status: Obj | None = None) -> Obj:
    obj = user_job("a", suspend=suspend)
    md = obj["metadata"]
    md.update(uid="uid-a", resourceVersion="5")
    if ours:
        md["finalizers"] = [FINALIZER]
        md["annotations"][ANNOTATION_CLAIMED_BY] = ORIGIN
    if placed:
        md["annotations"].update({ANNOTATION_CLUSTER: placed, ANNOTATION_REMOTE_NAME: "a"})
    if deleted:
        md["deletionTimestamp"] = T0
    if status is not None:
        obj["status"] = status
    return obj


def copy_of(job: Obj, *, status: Obj | None = None, parallelism: int | None = None) -> Obj:
    c = JOB_KIND.build_copy(job, origin=ORIGIN, origin_cluster="mgr", remote_name="a")
    c["metadata"]["uid"] = "copy-uid"
    if status is not None:
        c["status"] = status
    if parallelism is not None:
        c["spec"]["parallelism"] = parallelism
    return c


def mirrored(job: Obj, remote: Obj | None) -> Obj:
    """``job`` with the status a pass would already have written for ``remote``."""
    return {**job, "status": JOB_KIND.desired_status(job, remote, NOW)}


def group(job: Obj, copies: dict[str, Obj] | None = None, workers: dict[str, WorkerState] | None = None,
          **kw: Any) -> Group:
    return Group(job, copies or {}, workers if workers is not None else {"w1": UP, "w2": UP}, now=NOW,
                 origin=ORIGIN, resync=30.0, worker_lost_timeout=900.0, **kw)


J = manager()
RUNNING_COPY = copy_of(J, status={"active": 1, "startTime": T0})
READY_COPY = copy_of(J, status={"active": 1, "ready": 1, "startTime": T0})
FOREIGN = {**copy.deepcopy(RUNNING_COPY), "metadata": {**RUNNING_COPY["metadata"], "labels": {}}}
REFUSED = ApiError(403, "Forbidden", "quota")
PINNED = manager()
PINNED["metadata"]["annotations"][ANNOTATION_PIN] = "w1"

CASES: list[tuple[str, Group, Action]] = [
    ("deleted", group(manager(deleted=True), {"w1": RUNNING_COPY}), Action(Do.FINALIZE)),
    ("finished", group(manager(status=COMPLETE)), Action(Do.FINISH)),
    ("copy-off-placement", group(J, {"w2": RUNNING_COPY}), Action(Do.CONFIRM_PLACEMENT)),
    ("stale-copy-finished", group(J, {"w1": RUNNING_COPY, "w2": copy_of(J, status=COMPLETE)}, confirmed=True),
     Action(Do.USE_STALE_OUTCOME, worker="w2")),
    ("stale-copy-deleted", group(J, {"w2": RUNNING_COPY}, confirmed=True), Action(Do.DELETE_STALE, worker="w2")),
    ("stale-copies-handled", group(J, {"w2": RUNNING_COPY}, confirmed=True, handled=frozenset({"w2"})),
     Action(Do.FIND_OR_CREATE, worker="w1")),
    ("new", group(manager(placed=None, ours=False)), Action(Do.PLACE)),
    ("suspended-unclaimed", group(manager(placed=None, ours=False, suspend=True)), Action(Do.ENSURE_FINALIZER)),
    ("suspended-status", group(manager(placed=None, suspend=True)), Action(Do.WRITE_STATUS)),
    ("suspended-written", group(manager(placed=None, suspend=True), wrote_status=True),
     Action(Do.REQUEUE, after=30.0)),
    ("suspended-said", group(mirrored(manager(placed=None, suspend=True), None)), Action(Do.REQUEUE, after=30.0)),
    ("finalizer-removed", group(manager(ours=False)), Action(Do.ENSURE_FINALIZER)),
    ("worker-down", group(J, workers={"w1": WorkerState(healthy=False, unhealthy_for=10.0)}),
     Action(Do.LOST, worker="w1", lost=Lost(LostStep.WAIT, recheck_in=30.0))),
    ("worker-down-never-sent", group(J, workers={"w1": WorkerState(healthy=False, never_sent=True)}),
     Action(Do.LOST, worker="w1", lost=Lost(LostStep.MOVE_NOW))),
    ("worker-lost", group(J, workers={"w1": WorkerState(healthy=False, unhealthy_for=901.0)}),
     Action(Do.LOST, worker="w1", lost=Lost(LostStep.MOVE))),
    ("worker-unconfigured", group(J, workers={"w2": UP}, configured_for=5.0),
     Action(Do.LOST, worker="w1", lost=Lost(LostStep.WAIT, recheck_in=30.0, say_unconfigured=True))),
    ("no-copy", group(J), Action(Do.FIND_OR_CREATE, worker="w1")),
    ("refused", group(J, found=Found(refused=REFUSED)), Action(Do.CREATE_REFUSED, worker="w1")),
    ("vanished", group(J, found=Found(vanished="gone")), Action(Do.FINISH_DECIDED)),
    ("held", group(manager(suspend=True), found=Found(held=True)), Action(Do.WRITE_STATUS)),
    ("nothing-made", group(J, found=Found()), Action(Do.REQUEUE, after=30.0)),
    ("dropped-fields", group(J, {"w1": RUNNING_COPY}, found=Found(dropped=("spec.successPolicy",))),
     Action(Do.DROPPED_FIELDS, worker="w1")),
    ("collision", group(J, {"w1": FOREIGN}), Action(Do.COLLISION, worker="w1")),
    ("status-changed", group(J, {"w1": RUNNING_COPY}), Action(Do.WRITE_STATUS, worker="w1")),
    # Counters only, 0.25 s old, a 1 s batch: held for the rest of the second, then written with the next ones.
    ("counters-held", group(mirrored(J, RUNNING_COPY), {"w1": READY_COPY}, status_pending_for=0.25,
                            status_batch_period=1.0), Action(Do.REQUEUE, after=0.75, status_held=True)),
    ("counters-due", group(mirrored(J, RUNNING_COPY), {"w1": READY_COPY}, status_pending_for=1.5,
                           status_batch_period=1.0), Action(Do.WRITE_STATUS, worker="w1")),
    ("counters-undated", group(mirrored(J, RUNNING_COPY), {"w1": READY_COPY}, status_batch_period=1.0),
     Action(Do.WRITE_STATUS, worker="w1")),
    ("counters-no-batching", group(mirrored(J, RUNNING_COPY), {"w1": READY_COPY}, status_pending_for=0.25),
     Action(Do.WRITE_STATUS, worker="w1")),
    ("outcome-never-held", group(mirrored(J, RUNNING_COPY), {"w1": copy_of(J, status=COMPLETE)},
                                 status_pending_for=0.0, status_batch_period=1.0),
     Action(Do.WRITE_STATUS, worker="w1")),
    ("held-counters-yield-to-a-spec-patch", group(mirrored(J, copy_of(J, parallelism=3)), {"w1": copy_of(
        J, parallelism=3, status={"active": 3})}, status_pending_for=0.5, status_batch_period=1.0),
     Action(Do.PATCH_COPY, worker="w1", patch={"spec": {"parallelism": 1}})),
    ("spec-changed", group(mirrored(J, copy_of(J, parallelism=3)), {"w1": copy_of(J, parallelism=3)}),
     Action(Do.PATCH_COPY, worker="w1", patch={"spec": {"parallelism": 1}})),
    ("in-sync", group(mirrored(J, RUNNING_COPY), {"w1": RUNNING_COPY}), Action(Do.IN_SYNC, worker="w1")),
    ("status-written-once", group(J, {"w1": RUNNING_COPY}, wrote_status=True), Action(Do.IN_SYNC, worker="w1")),
    ("stuck", group(mirrored(J, RUNNING_COPY), {"w1": RUNNING_COPY}, stuck="unschedulable"),
     Action(Do.MOVE_STUCK, worker="w1")),
    ("stuck-pinned", group(mirrored(PINNED, copy_of(PINNED)), {"w1": copy_of(PINNED)}, stuck="unschedulable"),
     Action(Do.IN_SYNC, worker="w1")),  # a pinned copy only gets the event
]


@pytest.mark.parametrize(("situation", "g", "want"), CASES, ids=[c[0] for c in CASES])
def test_next_action(situation: str, g: Group, want: Action) -> None:
    got = next_action(JOB_KIND, g)
    assert replace(got, status=None) == want
    if got.do is Do.WRITE_STATUS:  # the status the plan computed is the one to write, once
        remote = g.copies.get(got.worker) if got.worker else None
        assert got.status == JOB_KIND.desired_status(g.job, remote, NOW) and got.status != g.job.get("status")


def test_a_status_that_finishes_the_job_is_followed_by_finish() -> None:
    done_copy = copy_of(J, status=COMPLETE)
    g = group(J, {"w1": done_copy})
    assert replace(next_action(JOB_KIND, g), status=None) == Action(Do.WRITE_STATUS, worker="w1")
    written = replace(g, job=mirrored(J, done_copy), wrote_status=True)
    assert next_action(JOB_KIND, written) == Action(Do.FINISH)
