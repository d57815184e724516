"""Does a copy make progress on its worker? A pure decision over what the worker shows (issue 36).

A worker can accept a copy and never run it: no Job controller (no pod, no status), a Job
controller that cannot create pods (``FailedCreate``: ResourceQuota, LimitRange, webhook,
missing ServiceAccount or PriorityClass), pods that never get a node, or bound pods whose
containers never start (``ErrImagePull``, ``CreateContainerConfigError``, a Secret volume
that is not there). Each phase a copy goes through has a deadline; past it the cause is
named from the worker's own evidence, so the user reads the worker's message, not ours.

Phases: *created* (the copy exists) → *pods created* → *pods bound* → *container started* →
*running*. Once a container has started, side effects may have run: the copy is never
judged stuck again (a crash loop is the workload's, mirrored as the worker's ``BackOff``).

Nothing here reads a cluster: the caller passes the copy, its pods and the worker's Warning
events about both (oldest first), and the time.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import IntEnum

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from jobapi.times import parse_time
from kruntime.resources import Obj


class Phase(IntEnum):
    """How far a copy got on its worker; ordered, so ``a > b`` means further."""

    CREATED = 1
    PODS_CREATED = 2
    PODS_BOUND = 3
    CONTAINER_STARTED = 4
    RUNNING = 5

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", " ")


#: container waiting reasons that say it will not start by itself (the kubelet's own words)
FAILING_WAITING = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                             "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
                             "PreCreateHookError", "PreStartHookError"})
#: Warning events about a bound pod that say why its containers cannot be created
FAILING_POD_EVENTS = frozenset({"FailedMount", "FailedAttachVolume", "FailedCreatePodSandBox",
                                "FailedPostStartHook"})
#: the Warning a Job (or JobSet) controller writes when the API server refuses a pod it creates
FAILED_CREATE = "FailedCreate"


class ProgressConfig(BaseModel):
    """Deadlines of a copy's phases on its worker (meant to hang under Config as ``progress``).

    Pods that stay unbound keep ``unschedulableTimeout`` (one setting for one thing).
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    pods_created_timeout: float = Field(default=120.0, gt=0, description=(
        "Seconds a copy may exist on its worker without a pod (and without a finished one) before it is "
        "reported stuck in phase `created`, naming the worker's FailedCreate message or, with none, "
        "\"no pod and no status from this worker's Job controller\". A healthy Job controller makes the "
        "first pod within seconds; 120 s leaves room for a busy one."))
    container_start_timeout: float = Field(default=300.0, gt=0, description=(
        "Seconds a pod of the copy may be bound to a node with no container ever started before the copy "
        "is reported stuck in phase `pods bound` — only when the kubelet names a failure (ErrImagePull, "
        "ImagePullBackOff, InvalidImageName, CreateContainerConfigError, CreateContainerError, FailedMount, "
        "...) or reports no container status at all: an image still pulling is progress."))
    stalled_copies: int = Field(default=3, ge=1, description=(
        "A worker with this many copies in phase `created` past podsCreatedTimeout, with no pod and no "
        "FailedCreate (its Job controller says nothing), is marked stalled: placement avoids it, "
        "jobmirror_worker_stalled is 1, alert JobmirrorWorkerStalled. Cleared when one of its copies "
        "shows its Job controller at work again."))
    max_moves: int = Field(default=3, ge=0, description=(
        "Moves of one Job in all for being stuck (any phase); then it stays where it is, with a CopyNotMoved "
        "Warning. 0: stuck copies are reported, never moved."))
    move_backoff: float = Field(default=60.0, gt=0, description=(
        "Seconds between a Job's first move for being stuck and its second; doubled for each further move, "
        "up to moveBackoffMax. The first move is not delayed."))
    move_backoff_max: float = Field(default=900.0, gt=0, description="The longest wait between two moves (seconds).")
    avoid_for: float = Field(default=300.0, gt=0, description=(
        "Seconds a worker a Job was moved off stays avoided for that Job. A worker that failed it the same way "
        "as the one it leaves (an image that exists nowhere reads ErrImagePull everywhere) is avoided for the "
        "move too; when every worker it may use failed it so, it stays with one CopyNotMoved Warning per "
        "cause instead of being moved around."))
    max_looks_per_round: int = Field(default=20, ge=1, description=(
        "Copies past a deadline whose pods one check round reads from one worker (the rest wait for the "
        "next round): bounds the calls a fleet of stuck copies costs."))

    @property
    def move_limits(self) -> MoveLimits:
        return MoveLimits(self.max_moves, self.move_backoff, self.move_backoff_max, self.avoid_for)


@dataclass(frozen=True)
class Stuck:
    """A copy worker events found stuck: the phase, the cause in the worker's words, and the event's text."""

    phase: Phase
    cause: str
    message: str


@dataclass(frozen=True)
class Progress:
    """The phase a copy reached, since when, and — past that phase's deadline — why it is stuck."""

    phase: Phase
    #: when the phase began as far as the worker shows (None: unknown, or no deadline applies)
    since: datetime | None = None
    #: the cause in the worker's own words, set only once the phase's deadline has passed
    stuck: str | None = None
    #: the config key of the deadline that passed (for the message)
    deadline: str = ""
    seconds: float = 0.0


# -- pure helpers -------------------------------------------------------------------------------


def _statuses(pod: Obj) -> list[Obj]:
    st = pod.get("status") or {}
    return [*(st.get("initContainerStatuses") or []), *(st.get("containerStatuses") or []),
            *(st.get("ephemeralContainerStatuses") or [])]


def container_started(cs: Obj) -> bool:
    """A container that ran at some time: running, terminated (now or before), started, restarted."""
    state, last = cs.get("state") or {}, cs.get("lastState") or {}
    return bool(state.get("running") or state.get("terminated") or last.get("running") or last.get("terminated")
                or cs.get("started") or int(cs.get("restartCount") or 0) > 0)


def pod_ran(pod: Obj) -> bool:
    """Whether any container of ``pod`` may have run (a Running or Succeeded pod always has)."""
    if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded"):
        return True
    return any(container_started(cs) for cs in _statuses(pod))


def copy_counts_ran(copy: Obj) -> bool:
    """The copy's status counts a finished or ready pod: something ran, whatever the pods show now."""
    st = copy.get("status") or {}
    return bool(st.get("succeeded") or st.get("failed") or st.get("ready")
                or any((st.get("uncountedTerminatedPods") or {}).values()))


def nothing_ran(copy: Obj, pods: Iterable[Obj]) -> bool:
    """True only while no container of the copy has ever started: moving it then runs nothing twice.

    Conservative: a pod the copy counts as finished (succeeded, failed, uncounted) or ready is
    taken as run even when it is gone from ``pods``. Unlike "no pod bound", this lets a copy
    whose bound pods cannot pull their image move.
    """
    return not copy_counts_ran(copy) and not any(pod_ran(p) for p in pods)


def _bound(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _condition(pod: Obj, ctype: str) -> Obj | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None)


def _created(obj: Obj) -> datetime | None:
    return parse_time((obj.get("metadata") or {}).get("creationTimestamp"))


def _bound_at(pod: Obj) -> datetime | None:
    c = _condition(pod, "PodScheduled")
    at = parse_time(c.get("lastTransitionTime")) if c is not None and c.get("status") == "True" else None
    return at or _created(pod)


def _gated(pod: Obj) -> bool:
    """Held back on purpose (spec.schedulingGates: a queue on the worker): not stuck, waiting its turn."""
    c = _condition(pod, "PodScheduled")
    gates = (pod.get("spec") or {}).get("schedulingGates")
    return bool(gates) or (c is not None and c.get("reason") == "SchedulingGated")


def _involved(ev: Obj) -> Obj:
    return ev.get("involvedObject") or ev.get("regarding") or {}


def _note(ev: Obj) -> str:
    return str(ev.get("message") or ev.get("note") or "").strip()


def _failed_create(events: Sequence[Obj], kind: str) -> str | None:
    """The newest FailedCreate message of the copy's controller (the worker's API server refusing a pod)."""
    for ev in reversed(events):
        if ev.get("reason") == FAILED_CREATE and _involved(ev).get("kind") == kind:
            return f"{FAILED_CREATE}: {_note(ev)}"
    return None


def _waiting_cause(pods: Sequence[Obj], events: Sequence[Obj]) -> str | None:
    """The kubelet's reason a bound pod's containers do not start, from container states then pod events."""
    for pod in pods:
        for cs in _statuses(pod):
            w = (cs.get("state") or {}).get("waiting") or {}
            if w.get("reason") in FAILING_WAITING:
                msg = str(w.get("message") or "").strip()
                return f"container {cs.get('name', '?')} of pod {pod['metadata'].get('name')}: {w['reason']}" + (
                    f": {msg}" if msg else "")
    names = {p["metadata"].get("name") for p in pods}
    for ev in reversed(events):
        inv = _involved(ev)
        if ev.get("reason") in FAILING_POD_EVENTS and inv.get("kind") == "Pod" and inv.get("name") in names:
            return f"pod {inv.get('name')}: {ev.get('reason')}: {_note(ev)}"
    return None


def unbound_cause(pod: Obj) -> str:
    """Why ``pod`` has no node, in the scheduler's words (its PodScheduled condition)."""
    c = _condition(pod, "PodScheduled") or {}
    why = str(c.get("message") or "").strip() or "no node was chosen for it (is a scheduler running?)"
    return f"pod {pod['metadata'].get('name')} not bound: {why}"


def _age(since: datetime | None, now: datetime) -> float:
    return (now - since).total_seconds() if since is not None else 0.0


# -- the decision -------------------------------------------------------------------------------


def progress(copy: Obj, pods: Sequence[Obj], events: Sequence[Obj], now: datetime, cfg: ProgressConfig, *,
             unschedulable_timeout: float, controller: str = "Job") -> Progress:
    """The phase ``copy`` reached on its worker and, past that phase's deadline, the worker's cause.

    ``pods``: the copy's pods as the worker lists them; ``events``: the worker's Warning events
    about the copy and those pods, oldest first; ``controller``: whose pods they are, for the
    message ("this worker's Job controller").
    """
    if not nothing_ran(copy, pods):
        running = copy_counts_ran(copy) or any((p.get("status") or {}).get("phase") == "Running" for p in pods)
        return Progress(Phase.RUNNING if running else Phase.CONTAINER_STARTED)
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")]
    if not live:
        since = _created(copy)
        if _age(since, now) < cfg.pods_created_timeout:
            return Progress(Phase.CREATED, since)
        cause = _failed_create(events, controller)
        if cause is None:
            cause = (f"no pod and no status from this worker's {controller} controller" if not copy.get("status")
                     else f"no pod from this worker's {controller} controller")
        return Progress(Phase.CREATED, since, cause, "podsCreatedTimeout", cfg.pods_created_timeout)
    bound = [p for p in live if _bound(p)]
    if not bound:
        if any(_gated(p) for p in live):
            return Progress(Phase.PODS_CREATED)
        since = min((t for p in live if (t := _created(p)) is not None), default=None)
        if _age(since, now) < unschedulable_timeout:
            return Progress(Phase.PODS_CREATED, since)
        return Progress(Phase.PODS_CREATED, since, unbound_cause(live[0]), "unschedulableTimeout",
                        unschedulable_timeout)
    since = min((t for p in bound if (t := _bound_at(p)) is not None), default=None)
    if _age(since, now) < cfg.container_start_timeout:
        return Progress(Phase.PODS_BOUND, since)
    cause = _waiting_cause(bound, events)
    if cause is None and not any(_statuses(p) for p in bound):
        cause = f"no container status from the kubelet of node {bound[0]['spec']['nodeName']}"
    if cause is None:  # waiting without a failure (an image still pulling): progress, not stuck
        return Progress(Phase.PODS_BOUND, since)
    return Progress(Phase.PODS_BOUND, since, cause, "containerStartTimeout", cfg.container_start_timeout)


def stuck_message(worker: str, copy: Obj, p: Progress) -> str:
    """One line for the manager object: the worker, the phase, the deadline and the worker's words.

    No changing duration in it, so a repeat folds into the same event's count.
    """
    md = copy["metadata"]
    return (f"the copy {md.get('namespace')}/{md.get('name')} on worker {worker} is stuck in phase {p.phase.label} "
            f"past {p.deadline} ({p.seconds:.0f}s): {p.stuck}")


def worth_a_look(copy: Obj, now: datetime, cfg: ProgressConfig, *, unschedulable_timeout: float) -> bool:
    """Whether the copy's pods are worth reading this round, from the cached copy alone (no call).

    Only a copy old enough for its first deadline, not suspended, and whose status counts
    nothing that ran (a ready or finished pod).
    """
    if (copy.get("spec") or {}).get("suspend") or copy_counts_ran(copy):
        return False
    first = cfg.pods_created_timeout if not (copy.get("status") or {}).get("active") else min(
        unschedulable_timeout, cfg.container_start_timeout)
    return _age(_created(copy), now) >= first


def no_controller(p: Progress) -> bool:
    """Stuck in *created* with no FailedCreate: the worker's controller says nothing (counts toward stalled)."""
    return p.phase is Phase.CREATED and p.stuck is not None and not p.stuck.startswith(FAILED_CREATE)


def stalled_reason(worker: str, silent: int, cfg: ProgressConfig, controller: str = "Job") -> str | None:
    """Why the worker runs nothing, when ``silent`` copies there have no pod and no word past the deadline."""
    if silent < cfg.stalled_copies:
        return None
    return (f"{silent} copies on worker {worker} have had no pod for longer than podsCreatedTimeout "
            f"({cfg.pods_created_timeout:.0f}s) and its {controller} controller says nothing (no FailedCreate): "
            "is it running?")


def controller_acted(copy: Obj, counted: set[str], since: datetime) -> bool:
    """A copy shows the worker's controller at work since the stall began: clears the stall.

    One of the copies counted in the stall now has a status, or a copy created after the
    stall began has one (the controller wrote it: a status, pods, a finished count).
    """
    if not copy.get("status"):
        return False
    created = _created(copy)
    return copy["metadata"].get("uid") in counted or (created is not None and created >= since)


# -- moves: bounded, with backoff, and none where every worker fails the same way (item 2) ---------
#
# Pure: what the reconciler decides when worker events tell it a copy is stuck. It keeps, per Job,
# the findings that made it move (a :class:`Finding` each, in order) and asks :func:`decide_move`
# about the new one (mirror.moves.stuck); :func:`causes_to_tell` says which Warnings are new (one per
# cause, not one per worker or per move).


@dataclass(frozen=True)
class MoveLimits:
    """How far a stuck Job is moved (from :class:`ProgressConfig`, whose fields say what each means)."""

    max_moves: int
    backoff: float
    backoff_max: float
    avoid_for: float


@dataclass(frozen=True)
class Finding:
    """One copy of the Job found stuck: where, in which phase, the worker's words, when (monotonic s)."""

    worker: str
    phase: Phase
    cause: str
    at: float


class Verdict(IntEnum):
    MOVE = 1  # delete the copy (nothing ran) and place the Job again, avoiding ``avoid``
    LATER = 2  # move, but not before ``at`` (backoff since the last move)
    STAY = 3  # leave the copy where it is; the Job waits with the Warning ``why``


@dataclass(frozen=True)
class MoveDecision:
    verdict: Verdict
    why: str = ""
    #: LATER: when the move may happen
    at: float | None = None
    #: MOVE: the workers the Job avoids now: the ones it left within ``avoid_for``, this one, and every one
    #: that failed it the same way as this one
    avoid: frozenset[str] = frozenset()


def cause_kind(phase: Phase, cause: str) -> str:
    """What a cause is, apart from the worker, the pod and the object names in it: comparable across
    workers. ``pods bound: ErrImagePull``, ``created: FailedCreate``, ``created: no Job controller``.

    The phase and the reason word only: an image that exists nowhere reads ``ErrImagePull`` on every
    worker whatever each kubelet's message says; two FailedCreates (a quota here, a webhook there)
    count as one kind — the number of moves is bounded anyway.
    """
    words = cause.split(": ")
    if cause.startswith(FAILED_CREATE):
        reason = FAILED_CREATE
    elif cause.startswith("no pod"):
        reason = "no " + cause.rsplit("worker's ", 1)[-1]  # "no Job controller"
    elif " not bound" in words[0]:
        reason = "not bound"
    elif cause.startswith("no container status"):
        reason = "no container status"
    elif len(words) >= 2 and (words[0].startswith("container ") or words[0].startswith("pod ")):
        reason = words[1]
    else:
        reason = words[0]
    return f"{phase.label}: {reason}"


def move_backoff(moves: int, limits: MoveLimits) -> float:
    """Seconds between the ``moves``-th move and the next (0 before the first)."""
    if moves <= 0:
        return 0.0
    return float(min(limits.backoff * 2 ** (moves - 1), limits.backoff_max))


def avoided(moves: Sequence[Finding], now: float, limits: MoveLimits) -> frozenset[str]:
    """The workers the Job left less than ``avoid_for`` ago."""
    return frozenset(m.worker for m in moves if now - m.at < limits.avoid_for)


def decide_move(moves: Sequence[Finding], found: Finding, candidates: Collection[str], now: float,
                limits: MoveLimits, *, pinned: bool = False) -> MoveDecision:
    """Whether the Job whose copy is ``found`` stuck moves now, later or not at all.

    ``moves``: the findings that moved it before, oldest first; ``candidates``: the workers it may
    use at all (its access, selector; health aside), ``found.worker`` among them or not. Never a loop of
    copies between workers: at most ``max_moves`` moves, each later than the one before by a
    doubling backoff, and none once every candidate has failed it the same way (an image that exists
    nowhere) — then it stays, and waits with one Warning per cause. The caller checks that nothing
    of the copy ran (:func:`nothing_ran`) before it acts on MOVE.
    """
    kind = cause_kind(found.phase, found.cause)
    if pinned:
        return MoveDecision(Verdict.STAY, f"pinned to {found.worker}: it stays there")
    if len(moves) >= limits.max_moves:
        return MoveDecision(Verdict.STAY, f"moved {len(moves)} times already (at most {limits.max_moves}): it stays "
                                          f"on {found.worker}")
    failed_so = {m.worker for m in moves if cause_kind(m.phase, m.cause) == kind} | {found.worker}
    if set(candidates) <= failed_so:
        return MoveDecision(Verdict.STAY, f"every worker it may use fails the same way ({kind}): it stays on "
                                          f"{found.worker}")
    # Avoided: the workers left within avoid_for, and those that failed it this same way (they would again).
    avoid = avoided(moves, now, limits) | failed_so
    if set(candidates) <= avoid:
        return MoveDecision(Verdict.STAY, f"every other worker it may use was left less than {limits.avoid_for:.0f}s "
                                          f"ago or failed it the same way: it stays on {found.worker}")
    if moves:
        due = moves[-1].at + move_backoff(len(moves), limits)
        if now < due:
            return MoveDecision(Verdict.LATER, f"moved {len(moves)} times; the next move not before "
                                               f"{move_backoff(len(moves), limits):.0f}s after the last", due)
    return MoveDecision(Verdict.MOVE, f"stuck in phase {found.phase.label} on {found.worker}", avoid=avoid)


def causes_to_tell(findings: Sequence[Finding], told: Collection[str]) -> list[tuple[str, str]]:
    """The Warnings not told yet, one per cause kind (not per worker, not per move): (kind, message).

    The message names every worker that failed that way, in order, and the newest worker's words.
    ``told``: the kinds already told for this Job (the caller keeps them with its moves).
    """
    by_kind: dict[str, list[Finding]] = {}
    for f in findings:
        by_kind.setdefault(cause_kind(f.phase, f.cause), []).append(f)
    out = []
    for kind, fs in by_kind.items():
        if kind in told:
            continue
        workers = list(dict.fromkeys(f.worker for f in fs))
        out.append((kind, f"stuck in phase {fs[-1].phase.label} on worker{'s' if len(workers) > 1 else ''} "
                          f"{', '.join(workers)}: {fs[-1].cause}"))
    return out
