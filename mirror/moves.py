"""The second level: a placed Job whose worker let it down, and whether it moves.

Each step's act records what it learned as a :class:`mirror.plan.Setback` — the worker lost
(:func:`lost`), the create refused (:func:`refused`), fields dropped (:func:`dropped_fields`),
a name collision (:func:`collision`), a stuck copy of which nothing ran (:func:`stuck`) — and
the plan decides what follows: :func:`move` asks the chooser for another worker (the only act
besides PLACE that does), :func:`delete_left` deletes a stuck copy once another worker takes
the Job, :func:`record_move` writes the new placement (and the pass goes on there), and
:func:`stay` says why the Job stays and when it is looked at again.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kruntime.resources import Obj
from mirror import metrics
from mirror.acting import Acting, Done
from mirror.copy_cleanup import delete_copy
from mirror.copy_namespaces import WeakerNamespace
from mirror.decisions import REFUSAL_EXCLUSION, RETRY_CAP, SKEW_EXCLUSION, CollisionAction, LostStep, retry_delay
from mirror.event_reasons import (
    COPY_NOT_MOVED,
    NAME_COLLISION,
    NAMESPACE_WEAKER,
    REDISPATCHED,
    REPLACED,
    WORKER_DROPPED_FIELDS,
    WORKER_LOST,
    WORKER_NOT_CONFIGURED,
    WORKER_REFUSED,
    EventReason,
)
from mirror.identity import labels_of_copy
from mirror.naming import ANNOTATION_PIN
from mirror.placement import NoWorker
from mirror.placing import choose, clear_wait, place_on, say_not_placed
from mirror.plan import Action, Group, Setback, Why, collision_of
from mirror.progress import Finding, Verdict, cause_kind, causes_to_tell, copy_counts_ran, decide_move, nothing_ran
from mirror.remote_copy import copy_pods

log = logging.getLogger(__name__)


def _key(job: Obj) -> str:
    return f"{job['metadata']['namespace']}/{job['metadata']['name']}"


# -- the setbacks ----------------------------------------------------------------------------


async def lost(a: Acting, action: Action, g: Group) -> Group | Done:
    """The placed worker is unhealthy or not configured (:func:`mirror.decisions.lost_worker`)."""
    assert action.lost is not None
    job, old, timeout = g.job, action.worker or "", a.cfg.worker_lost_timeout
    worker = a.workers.get(old)
    step = action.lost.step
    if step is LostStep.WAIT:
        if action.lost.say_unconfigured:
            a.remember_about(job["metadata"]["uid"]).unconfigured_noted = True
            a.say(job, WORKER_NOT_CONFIGURED, f"placed on worker {old}, which is not in the configuration (removed, "
                  "or renamed without its copy being found on a configured worker): handled as a lost worker, "
                  f"re-dispatched once workerLostTimeout ({timeout:.0f}s) has passed since this controller "
                  "started, unless a configured worker shows its copy first")
        return Done(action.lost.recheck_in)
    if step is LostStep.MOVE_NOW:
        assert worker is not None
        return replace(g, setback=Setback(Why.UNREACHABLE, old, f"worker {old} became unreachable before the copy "
                                          f"was created ({worker.last_error})", REDISPATCHED))
    if worker is None:
        reason = (f"worker {old} is not in the configuration and no configured worker has this Job's copy "
                  f"(workerLostTimeout {timeout:.0f}s passed); a copy still running there is no longer "
                  "watched: delete it there, or configure the worker again and it is deleted as stale")
    else:
        reason = f"worker {old} unreachable for longer than workerLostTimeout ({timeout:.0f}s): {worker.last_error}"
    a.say(job, WORKER_LOST, reason)
    return replace(g, setback=Setback(Why.LOST, old, reason, REDISPATCHED))


async def refused(a: Acting, action: Action, g: Group) -> Group | Done:
    """The worker said no to the copy's create (the plan judged it a refusal)."""
    assert g.found is not None and g.found.refused is not None and action.worker is not None
    exc = g.found.refused
    if isinstance(exc, WeakerNamespace):
        return replace(g, setback=_refusal(a, g.job, action.worker, exc.message, NAMESPACE_WEAKER))
    md = g.job["metadata"]
    what = f"worker {action.worker} refused to create {md['namespace']}/{md['name']}: {exc.message}"
    return replace(g, setback=_refusal(a, g.job, action.worker, what, WORKER_REFUSED))


async def dropped_fields(a: Acting, action: Action, g: Group) -> Group | Done:
    """The worker would run the copy with other semantics: delete it at once, never let it run.

    Handled as a refusal of that worker for this Job (``SKEW_EXCLUSION``): placed elsewhere
    when unpinned and another worker can take it, else kept pending and retried with backoff.
    """
    assert g.found is not None and action.worker is not None
    job, worker = g.job, a.workers[action.worker]
    md = job["metadata"]
    deleted = await delete_copy(a, job, worker, g.copies[worker.name], "dropped fields")
    what = (f"worker {worker.name} dropped fields of {md['namespace']}/{md['name']} it does not know "
            f"(older Kubernetes?): {', '.join(g.found.dropped)}; the copy would run with other semantics, so it was "
            + ("deleted at once" if deleted else "not deleted yet (retried)"))
    return replace(g, setback=_refusal(a, job, worker.name, what, WORKER_DROPPED_FIELDS, exclusion=SKEW_EXCLUSION,
                                       verb="skew", left_copy=not deleted))


def _refusal(a: Acting, job: Obj, worker: str, what: str, reason: EventReason, *,
             exclusion: float = REFUSAL_EXCLUSION, verb: str = "create", left_copy: bool = False) -> Setback:
    """Count a refusal: the worker is excluded for this Job for ``exclusion`` seconds (quota frees up,
    policies change); nothing runs there, so it is not counted as load."""
    uid = job["metadata"]["uid"]
    a.places.not_dispatched(worker, uid)
    if not left_copy:
        a.attempted[worker].discard(uid)  # a refused create left nothing behind
    metrics.WORKER_REFUSALS.labels(worker, verb).inc()
    a.remember_about(uid).refused[worker] = a.clock() + exclusion
    delay = a.refusal_delay(uid, "create")
    why = Why.DROPPED_FIELDS if reason is WORKER_DROPPED_FIELDS else Why.REFUSED
    return Setback(why, worker, what, reason, delay)


async def collision(a: Acting, action: Action, g: Group) -> Group | Done:
    """The placed worker has an object of the copy's name that is not our copy: never touch it."""
    assert action.worker is not None
    job, remote, uid = g.job, g.copies[action.worker], g.job["metadata"]["uid"]
    md = remote["metadata"]
    a.places.not_dispatched(action.worker, uid)  # nothing of ours runs there: not load
    metrics.NAME_COLLISIONS.labels(action.worker).inc()
    what = (f"worker {action.worker} already has {a.kind.name} {md.get('namespace')}/{md['name']} that jobmirror "
            f"did not create for this {a.kind.name} (origin {labels_of_copy(remote).origin!r}); it is left "
            "untouched")
    if collision_of(job, remote) is CollisionAction.REPLACE:
        a.remember_about(uid).collided.add(action.worker)  # never placed there again
    return replace(g, setback=Setback(Why.COLLISION, action.worker, what, NAME_COLLISION))


async def stuck(a: Acting, action: Action, g: Group) -> Group | Done:
    """The copy made no progress past a phase's deadline. It may move only when nothing can have run
    (mirror.progress.nothing_ran: no container of any pod of the copy, read live, has ever started,
    and the copy counts no finished or ready pod), and only as far as mirror.progress.decide_move
    allows: a bounded number of moves with backoff, none to a worker that failed it the same way.
    Staying, the Job is told once per cause (CopyNotMoved)."""
    assert action.worker is not None and g.stuck is not None
    worker, remote, uid = a.workers[action.worker], g.copies[action.worker], g.job["metadata"]["uid"]
    started = a.kind.pods is None or copy_counts_ran(remote)
    if not started:
        started = not nothing_ran(remote, await copy_pods(a, worker, remote))
    memory = a.remember_about(uid)
    if started:
        memory.stuck.pop(worker.name, None)
        log.info("%s: the copy on %s is not moved: a container of it has started", _key(g.job), worker.name)
        return Done(a.cfg.resync_period)
    now = a.clock()
    found = Finding(worker.name, g.stuck.phase, g.stuck.cause, now)
    decision = decide_move(memory.stuck_moves, found, a.places.may_use(g.job), now, a.cfg.progress.move_limits)
    if decision.verdict is Verdict.LATER:
        assert decision.at is not None
        log.info("%s: the copy stuck on %s moves later: %s", _key(g.job), worker.name, decision.why)
        return Done(max(0.5, decision.at - now))  # still remembered stuck: decided again then
    if decision.verdict is Verdict.STAY:
        memory.stuck.pop(worker.name, None)  # asked again if it is found stuck in a further phase
        this = cause_kind(found.phase, found.cause)  # the earlier causes were told with their moves (Replaced)
        same = [m for m in memory.stuck_moves if cause_kind(m.phase, m.cause) == this]
        for kind, message in causes_to_tell([*same, found], memory.causes_told):
            memory.causes_told.add(kind)
            a.say(g.job, COPY_NOT_MOVED, f"{message}; {decision.why}")
        metrics.STUCK_NOT_MOVED.labels(worker.name).inc()
        return Done(a.cfg.resync_period)
    return replace(g, setback=Setback(Why.STUCK, worker.name, g.stuck.message, REPLACED, avoid=decision.avoid))


# -- what the plan decides after a setback ---------------------------------------------------


async def move(a: Acting, action: Action, g: Group) -> Group | Done:
    """Ask the chooser for another worker (never one of ``action.exclude``); fold the answer."""
    async with a.places.turn():
        try:
            return replace(g, chosen=choose(a, g.job, action.exclude))
        except NoWorker as exc:
            return replace(g, no_alternative=exc)


async def delete_left(a: Acting, action: Action, g: Group) -> Group | Done:
    """Delete the stuck copy the Job leaves (another worker takes it): nothing of it ran, and it must
    not start beside the new one. Not gone: tried again with backoff, the Job stays."""
    assert action.worker is not None
    job, worker = g.job, a.workers[action.worker]
    if not await delete_copy(a, job, worker, g.copies[worker.name], "moved: stuck before it ran", unchanged=True):
        return Done(retry_delay(a.recalled(job["metadata"]["uid"]).refusals.get("delete", 0),
                                base=min(a.cfg.resync_period, 5.0)))
    memory = a.remember_about(job["metadata"]["uid"])
    left = memory.stuck.pop(worker.name, None)
    if left is not None:  # the move counts from here: the copy is gone (decide_move bounds the count)
        memory.stuck_moves.append(Finding(worker.name, left.phase, left.cause, a.clock()))
    memory.refused[worker.name] = a.clock() + a.cfg.progress.avoid_for  # avoided for this Job a while
    return replace(g, left_deleted=True)


async def record_move(a: Acting, action: Action, g: Group) -> Group | Done:
    """Place the Job on the chosen worker instead of the one it leaves, and say why (the one write of a
    move); the pass goes on there (the copy is created on the new worker in the same pass)."""
    s, choice = g.setback, g.chosen
    assert s is not None and choice is not None and s.reason is not None
    to, left = choice.worker, s.worker
    if s.why in (Why.UNREACHABLE, Why.LOST):
        clear_wait(a, g.job["metadata"]["uid"])
    job, _ = await place_on(a, g.job, choice)
    a.say(job, s.reason, _moved_message(s, to))
    if s.reason is REPLACED:
        metrics.REPLACEMENTS.labels(left).inc()
    else:
        metrics.REDISPATCHES.labels(left, to).inc()
    return replace(g, job=job, copies={w: c for w, c in g.copies.items() if w != left}, found=None, stuck=None,
                   handled=g.handled | {left}, setback=None, chosen=None, no_alternative=None, left_deleted=False)


def _moved_message(s: Setback, to: str) -> str:
    if s.why is Why.LOST:
        return f"moved from {s.worker} to {to}; the copy on {s.worker} is deleted when it comes back"
    if s.why is Why.STUCK:
        return (f"moved from worker {s.worker} to {to}: {s.what}; none of its pods had started, so nothing ran "
                "twice")
    return f"{s.what}; placed on {to} instead"


async def stay(a: Acting, action: Action, g: Group) -> Group | Done:
    """The Job stays on its worker (pinned, or no other worker takes it now): say why, back off."""
    s, job = g.setback, g.job
    assert s is not None
    if s.why in (Why.UNREACHABLE, Why.LOST):
        assert g.no_alternative is not None
        say_not_placed(a, job, g.no_alternative)  # as for a Job never placed: once per wait
        # Still placed on the lost worker, it leaves the line at its next pass: a timer of its own.
        return Done(a.cfg.resync_period)
    if s.why is Why.STUCK:
        # Still remembered stuck: the next pass asks for another worker again (worker events tell a phase
        # once, so a stuck copy forgotten here would wait for good once room appears elsewhere).
        log.info("%s: the copy stuck on %s stays for now, asked again in %.0fs: %s", _key(job), s.worker,
                 a.cfg.resync_period, g.no_alternative)
        return Done(a.cfg.resync_period)
    if s.why is Why.COLLISION:
        return Done(_collision_reported(a, job, s, g.no_alternative))
    assert s.reason is not None
    why = (f"the Job is pinned to {s.worker}" if g.no_alternative is None
           else f"no other worker accepts it now ({g.no_alternative})")
    a.say(job, s.reason, f"{s.what}; {why}: retried with backoff (at most every {RETRY_CAP:.0f}s)")
    log.warning("%s: %s; next try in %.0fs", _key(job), s.what, s.delay)
    return Done(s.delay)


def _collision_reported(a: Acting, job: Obj, s: Setback, no_alternative: NoWorker | None) -> float:
    """A pinned Job, our copy under another origin, or no other worker: reported with doubling backoff."""
    if no_alternative is not None:
        why = f"no other worker can take it ({no_alternative})"
    elif ANNOTATION_PIN in (job["metadata"].get("annotations") or {}):
        why = f"the Job is pinned to {s.worker}"
    else:
        why = "it carries this Job's uid under another origin, so running it elsewhere would run it twice"
    memory = a.remember_about(job["metadata"]["uid"])
    memory.collision_reports += 1
    delay = retry_delay(memory.collision_reports, base=a.cfg.resync_period)
    a.say(job, NAME_COLLISION, f"{s.what}; {why}: retried with backoff (at most every {RETRY_CAP:.0f}s)")
    log.warning("%s: name collision on %s (%s); next look in %.0fs", _key(job), s.worker, why, delay)
    return delay
