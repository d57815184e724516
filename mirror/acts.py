"""The plan's actions performed: one function per :class:`mirror.plan.Do`, each one write or read.

An act gets the action and the group, and returns the group as it learned (the plan is asked
again) or :class:`mirror.acting.Done` with when to look at the object again. No act decides
what follows it: that is :func:`mirror.plan.next_action`'s. The second level (a placed Job's
worker let it down) is in :mod:`mirror.moves`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from kruntime.client import ApiError
from kruntime.resources import Obj
from mirror import metrics, moves
from mirror.acting import Acting, Done
from mirror.copy_cleanup import delete_copy, finalize, finish, finish_decided
from mirror.copy_namespaces import missing_namespace
from mirror.decisions import is_refusal
from mirror.event_reasons import STALE_COPY_OUTCOME_USED
from mirror.placing import confirm_placement, place
from mirror.plan import Action, Do, Found, Group
from mirror.remote_copy import find_or_create, patch_backoff, patch_copy, recreate_copy

Act = Callable[[Acting, Action, Group], Awaitable[Group | Done]]


async def _finalize(a: Acting, action: Action, g: Group) -> Group | Done:
    return Done(await finalize(a, g.job, dict(g.copies)))


async def _finish(a: Acting, action: Action, g: Group) -> Group | Done:
    return Done(await finish(a, g.job, dict(g.copies)))


async def _confirm_placement(a: Acting, action: Action, g: Group) -> Group | Done:
    confirmed = await confirm_placement(a, g.job, dict(g.copies))
    if confirmed is None:
        return Done(a.cfg.resync_period)
    return replace(g, job=confirmed, confirmed=True)


async def _use_stale_outcome(a: Acting, action: Action, g: Group) -> Group | Done:
    assert action.worker is not None and action.status is not None
    stale = g.copies[action.worker]
    job = await write_status(a, g.job, action.status, from_copy=True)
    a.say(job, STALE_COPY_OUTCOME_USED, f"the copy left on worker {action.worker} finished "
          f"({a.kind.state(stale)}) while the Job was re-dispatched to {g.placement.worker}; its outcome is used, "
          "the other copy is deleted")
    return replace(g, job=job, stale_used=True)


async def _delete_stale(a: Acting, action: Action, g: Group) -> Group | Done:
    # A lost worker came back, or a re-dispatch raced: the copy is ours (origin uid matches).
    assert action.worker is not None
    await delete_copy(a, g.job, a.workers[action.worker], g.copies[action.worker], "stale")
    return replace(g, handled=g.handled | {action.worker})


async def _place(a: Acting, action: Action, g: Group) -> Group | Done:
    job, placement = await place(a, g.job)  # one write: the finalizer and the placement
    if placement.worker is not None:
        return replace(g, job=job)
    # A Job waiting in line has no timer: the placer wakes the first in each worker's line
    # every few seconds and the next few when room appears there (Placer.recheck).
    return Done(a.places.recheck(job["metadata"]["uid"]))


async def _ensure_finalizer(a: Acting, action: Action, g: Group) -> Group | Done:
    return replace(g, job=await a.writes.ensure_finalizer(g.job))


async def _find_or_create(a: Acting, action: Action, g: Group) -> Group | Done:
    assert action.worker is not None
    worker = a.workers[action.worker]
    try:
        got, found = await find_or_create(a, g.job, worker, g.placement, action.if_absent)
    except ApiError as exc:
        if not is_refusal(exc.status, missing_namespace=missing_namespace(exc)):
            raise
        return replace(g, found=Found(refused=exc))
    copies = dict(g.copies) if got is None else {**g.copies, worker.name: got}
    return replace(g, copies=copies, found=found)


async def _finish_decided(a: Acting, action: Action, g: Group) -> Group | Done:
    if g.found is not None and g.found.vanished is not None:
        return Done(await finish_decided(a, g.job, g.found.vanished))
    assert g.setback is not None  # its worker is lost
    finished = await finish_decided(a, g.job, f"its worker {g.setback.worker} is lost")
    return Done(0.0 if finished is None else finished)


async def _write_status(a: Acting, action: Action, g: Group) -> Group | Done:
    assert action.status is not None
    written = await write_status(a, g.job, action.status, from_copy=action.worker is not None)
    return replace(g, job=written, wrote_status=True)


async def _patch_copy(a: Acting, action: Action, g: Group) -> Group | Done:
    assert action.worker is not None and action.patch is not None
    refused = await patch_copy(a, g.job, a.workers[action.worker], g.copies[action.worker], action.patch)
    if refused is None:
        return Done(a.cfg.resync_period)
    return replace(g, patch_refused=refused)


async def _recreate_copy(a: Acting, action: Action, g: Group) -> Group | Done:
    assert action.worker is not None and action.patch is not None and g.patch_refused is not None
    return Done(await recreate_copy(a, g.job, a.workers[action.worker], g.copies[action.worker], action.patch,
                                    g.patch_refused))


async def _patch_backoff(a: Acting, action: Action, g: Group) -> Group | Done:
    assert action.worker is not None and action.patch is not None and g.patch_refused is not None
    return Done(patch_backoff(a, g.job, a.workers[action.worker], g.copies[action.worker], action.patch,
                              g.patch_refused))


async def write_status(a: Acting, job: Obj, desired: Obj, *, from_copy: bool) -> Obj:
    """Write ``desired`` (the plan computed it); ``from_copy``: it mirrors a copy's status change,
    whose lag since the worker showed it is observed (jobmirror_status_propagation_seconds)."""
    written = await a.writes.put_status(job, desired)
    a.places.observe(a.kind, written, ())  # finished: its tenant's share and quota free up
    if from_copy and (waited := a.status_lag.mirrored(job["metadata"]["uid"])) is not None:
        metrics.STATUS_PROPAGATION.labels(waited[0]).observe(waited[1])
    return written


#: every action but REQUEUE (which ends the pass without an act), and who performs it
ACTS: dict[Do, Act] = {
    Do.FINALIZE: _finalize,
    Do.FINISH: _finish,
    Do.CONFIRM_PLACEMENT: _confirm_placement,
    Do.USE_STALE_OUTCOME: _use_stale_outcome,
    Do.DELETE_STALE: _delete_stale,
    Do.PLACE: _place,
    Do.ENSURE_FINALIZER: _ensure_finalizer,
    Do.LOST: moves.lost,
    Do.FIND_OR_CREATE: _find_or_create,
    Do.CREATE_REFUSED: moves.refused,
    Do.FINISH_DECIDED: _finish_decided,
    Do.DROPPED_FIELDS: moves.dropped_fields,
    Do.COLLISION: moves.collision,
    Do.WRITE_STATUS: _write_status,
    Do.MOVE_STUCK: moves.stuck,
    Do.PATCH_COPY: _patch_copy,
    Do.RECREATE_COPY: _recreate_copy,
    Do.PATCH_BACKOFF: _patch_backoff,
    Do.MOVE: moves.move,
    Do.DELETE_LEFT: moves.delete_left,
    Do.RECORD_MOVE: moves.record_move,
    Do.STAY: moves.stay,
}
