"""What passes remember about one manager object between passes (nothing else is kept per object).

One :class:`JobMemory` per manager uid, in a bounded map: made on first write
(:func:`remember_about`), read without being stored (:func:`recalled`), dropped whole when the
object is handled to its end or leaves the cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kruntime.bounded import LruDict
from mirror.decisions import retry_delay
from mirror.progress import Finding, Stuck

#: the most Jobs any per-uid record of the reconciler holds at once (a backstop, see Reconciler.forget)
MAX_TRACKED_JOBS = 50_000


@dataclass
class JobMemory:
    """What passes remember about one manager object."""

    #: workers whose same-named object is not our copy: not placed there again
    collided: set[str] = field(default_factory=set)
    #: collisions reported so far (their retry backoff)
    collision_reports: int = 0
    #: workers that refused its copy, each until a monotonic deadline
    refused: dict[str, float] = field(default_factory=dict)
    #: refusals in a row of its copy's create (or of its fields), patch and delete, by verb: each its own backoff
    refusals: dict[str, int] = field(default_factory=dict)
    #: when a refused spec patch may be tried again (monotonic)
    patch_not_before: float = 0.0
    #: told once that its worker is not configured (not repeated each pass)
    unconfigured_noted: bool = False
    #: the NoWorker message last evented (not repeated every pass while it holds)
    no_worker_said: str | None = None
    #: told it waits for room (once per wait)
    waiting_said: bool = False
    #: told its headOfLineHold ended (once per wait)
    hold_ended_said: bool = False
    #: workers whose copy made no progress past a phase's deadline, with the phase and cause (worker events)
    stuck: dict[str, Stuck] = field(default_factory=dict)
    #: the findings that moved it for being stuck, oldest first (mirror.progress.decide_move bounds them)
    stuck_moves: list[Finding] = field(default_factory=list)
    #: the stuck causes it was told it stays for (CopyNotMoved: once per cause kind)
    causes_told: set[str] = field(default_factory=set)


Memories = LruDict[str, JobMemory]


def remember_about(memories: Memories, uid: str) -> JobMemory:
    """The record kept for ``uid``, made on first use (for writing)."""
    memory = memories.get(uid)
    if memory is None:
        memory = memories[uid] = JobMemory()
    return memory


def recalled(memories: Memories, uid: str) -> JobMemory:
    """The record kept for ``uid``, or a blank one that is not kept (for reading and clearing)."""
    return memories.get(uid) or JobMemory()


def count_refusal(memory: JobMemory, verb: str, base: float) -> float:
    """Count one more refusal of ``verb`` (create, patch, delete); the seconds until it is tried
    again (doubling from ``base``, capped)."""
    memory.refusals[verb] = memory.refusals.get(verb, 0) + 1
    return retry_delay(memory.refusals[verb], base=base)
