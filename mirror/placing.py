"""Placing a manager object: asking the Placer for a worker and recording the answer on the object.

:func:`choose` is the one way an act asks the chooser (the PLACE and MOVE acts only; a test
holds every other act to it). A Job no worker takes now waits in the manager, told once per
wait; a placement is recorded on the manager object (one write, resourceVersion checked)
before any copy is created. :func:`confirm_placement` re-reads the object before a copy off
its placement is deleted, and adopts a copy whose placement was lost.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from jobapi.objects import annotations_of
from kruntime.client import ApiError
from kruntime.resources import Obj
from mirror.acting import Acting
from mirror.decisions import Placement, adoption_target, placement_of, refusal_exclusions, says_something_new
from mirror.event_reasons import (
    HEAD_OF_LINE_HOLD_ENDED,
    NO_WORKER,
    PLACEMENT_MOVED,
    UNKNOWN_PRIORITY_CLASS,
    WAITING_FOR_ROOM,
)
from mirror.job_memory import JobMemory
from mirror.naming import ANNOTATION_PIN, derived_remote_name
from mirror.placement import NoWorker, WaitingForRoom
from mirror.placer import Choice, WaitingForQuota

log = logging.getLogger(__name__)


def choose(a: Acting, job: Obj, exclude: Collection[str]) -> Choice:
    """The placer's worker for ``job``, never one that refused its name, nor (unpinned) lately its copy.

    Raises NoWorker.
    """
    memory = a.recalled(job["metadata"]["uid"])
    excluded = {*exclude, *memory.collided}
    if not annotations_of(job).get(ANNOTATION_PIN):
        excluded |= refusal_exclusions(memory.refused, a.clock())
    return a.places.choose(a.kind, job, excluded)


async def place(a: Acting, job: Obj) -> tuple[Obj, Placement]:
    """Place an unplaced Job (one write: the finalizer and the placement), or say why it waits."""
    async with a.places.turn():
        try:
            chosen = choose(a, job, ())
        except NoWorker as exc:
            say_not_placed(a, job, exc)
            return job, Placement(None, job["metadata"]["name"])
    clear_wait(a, job["metadata"]["uid"])
    return await place_on(a, job, chosen)


def say_not_placed(a: Acting, job: Obj, exc: NoWorker) -> None:
    """Why no worker takes the Job now, said once per wait (its figures change while it waits)."""
    uid, message = job["metadata"]["uid"], f"cannot dispatch: {exc}"
    memory = a.remember_about(uid)
    if isinstance(exc, WaitingForRoom | WaitingForQuota):
        if not memory.waiting_said:
            memory.waiting_said = True
            a.recorder.event(job, WAITING_FOR_ROOM.type, exc.reason, f"waits in the manager: {exc}; it is "
                             "placed when room appears, in the scheduling order (kubectl jobmirror queue)")
            _say_unknown_priority(a, job)
        _say_hold_ended(a, job, memory)
    elif says_something_new(memory.no_worker_said, message):
        memory.no_worker_said = message
        a.recorder.event(job, NO_WORKER.type, exc.reason, message)
    else:
        log.debug("%s/%s still cannot be dispatched: %s", job["metadata"]["namespace"], job["metadata"]["name"], exc)


def clear_wait(a: Acting, uid: str) -> None:
    """The Job is placed: a later wait is told afresh (its events are once per wait)."""
    memory = a.recalled(uid)
    memory.no_worker_said, memory.waiting_said, memory.hold_ended_said = None, False, False


def _say_unknown_priority(a: Acting, job: Obj) -> None:
    """A Job naming a PriorityClass the manager does not serve waits at the default priority: say so."""
    _, unknown = a.places.priority(a.kind, job)
    if unknown is not None and a.places.fair:
        a.say(job, UNKNOWN_PRIORITY_CLASS, f"priorityClassName {unknown!r} is not a PriorityClass of the "
              f"manager cluster: the Job waits at the default priority ({a.places.default_priority()})")


def _say_hold_ended(a: Acting, job: Obj, memory: JobMemory) -> None:
    """Once per wait, when the Job is first in line for a worker and its headOfLineHold ran out:
    later Jobs may take room there from now on (it still waits, and is placed when room appears)."""
    if memory.hold_ended_said:
        return
    ahead_of = a.places.hold_ended(job["metadata"]["uid"])
    if not ahead_of:
        return  # it still holds them, or held nothing: nothing to say
    memory.hold_ended_said = True
    a.say(job, HEAD_OF_LINE_HOLD_ENDED, f"waited {a.cfg.head_of_line_hold:g} s for room (headOfLineHold): it no "
          f"longer holds {', '.join(ahead_of)} against Jobs created after it, which may take room there now; it "
          "still waits and is placed when room for it appears")


async def place_on(a: Acting, job: Obj, choice: Choice) -> tuple[Obj, Placement]:
    """Record ``choice`` on the manager object (counted against the worker before the write)."""
    chosen = choice.worker
    name = job["metadata"]["name"]
    remote_name = derived_remote_name(name, a.origin) if a.workers[chosen].is_manager else name
    uid = job["metadata"]["uid"]
    a.places.placing(job, choice, remote_name)
    try:
        return await a.writes.record_placement(job, chosen, remote_name, choice.why)
    except BaseException:
        a.places.unplaced(uid, chosen)
        raise


async def confirm_placement(a: Acting, job: Obj, copies: dict[str, Obj]) -> Obj | None:
    """Placement read from the server, before a copy is deleted for being off-placement.

    Deleting a copy is irreversible, and the manager cache can lag our own placement
    write by a few milliseconds: a copy we just created would look stray and be
    deleted (seen in the 100-Job benchmark). A copy with no placement at all (someone
    removed the annotation) is adopted rather than deleted, so no work is lost.
    None: the Job is gone or was replaced; the informer event that follows drives the
    next pass. A lost race on the adoption patch raises the conflict (queue retry).
    """
    md = job["metadata"]
    try:
        fresh = await a.writes.read(job)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise
    if fresh["metadata"].get("uid") != md["uid"]:
        return None
    placement = placement_of(fresh)
    adopted = adoption_target(placement.worker, a.workers, (name for name in copies if a.workers[name].healthy))
    if adopted is None:
        return fresh
    remote_name = copies[adopted]["metadata"]["name"]
    log.info("adopting copy %s on %s for %s/%s (placement was %s)", remote_name, adopted,
             md["namespace"], md["name"], placement.worker or "missing")
    fresh, _ = await a.writes.record_placement(fresh, adopted, remote_name,
                                               f"adopted: worker {adopted} has this Job's copy {remote_name}")
    if placement.worker is not None:
        a.say(fresh, PLACEMENT_MOVED, f"worker {placement.worker} is no longer configured and worker {adopted} has "
              f"this Job's copy {remote_name} (the same cluster under a new name, or the copy moved there): the "
              f"placement moves to {adopted} and the copy keeps running")
    return fresh
