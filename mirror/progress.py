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

from collections.abc import Iterable, Sequence
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
    max_looks_per_round: int = Field(default=20, ge=1, description=(
        "Copies past a deadline whose pods one check round reads from one worker (the rest wait for the "
        "next round): bounds the calls a fleet of stuck copies costs."))


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
        c = _condition(live[0], "PodScheduled") or {}
        why = str(c.get("message") or "").strip() or "no node was chosen for it (is a scheduler running?)"
        return Progress(Phase.PODS_CREATED, since, f"pod {live[0]['metadata'].get('name')} not bound: {why}",
                        "unschedulableTimeout", unschedulable_timeout)
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
