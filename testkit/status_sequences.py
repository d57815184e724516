"""Reachable worker-status sequences for the status translator: the unit property tests, the
integration replay and ``bench versions`` draw the same scenarios from here.

A small simulation of a worker cluster's Job controller produces, step by step, the remote Job a
real controller could show: pods start, become ready, succeed or fail, terminated pods sit in
``uncountedTerminatedPods`` until flushed, interim conditions appear, terminal conditions follow.
Two controller generations are modelled:

* ``new`` (≈1.31+): SuccessCriteriaMet / FailureTarget first, Complete / Failed only once no pod
  is active or terminating and nothing is uncounted; completionTime = Complete's time.
* ``old`` (≈1.30 and before, or gates off): Complete (reason "") or Failed written directly,
  possibly while pods are active or terminating or still uncounted; optionally no
  completionTime, no ``ready`` / ``terminating`` / ``uncountedTerminatedPods`` fields.

Around it: the user suspends / resumes the manager Job (the worker sees it a step later or
more), the worker becomes unreachable (``remote`` None), the remote copy is re-dispatched (a
fresh run). ``worker_sequences()`` draws such a scenario; ``translate_sequence()`` runs the
translator over it, feeding each output back as the manager's status. The integration tier
replays the same scenarios against a real kube-apiserver: create ``manager_job``, then per step
set ``spec.suspend`` to ``manager_suspend`` and PUT the translated status.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from jobapi.times import format_time
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS
from mirror.jobs.status_translation import desired_manager_status
from testkit.jobs import make_job

STEP_SECONDS = 10
CONTROLLER_NAME = "jobmirror.dev/controller"


@dataclass(frozen=True)
class WorkerStep:
    """What the mirror controller sees at one reconcile: the manager's spec.suspend and the
    remote Job (None: no copy yet, deleted, or worker unreachable)."""

    manager_suspend: bool
    remote: dict[str, Any] | None
    action: str = ""


@dataclass
class WorkerSequence:
    manager_job: dict[str, Any]
    steps: list[WorkerStep]
    start_time: datetime
    style: str

    def remote_statuses(self) -> list[dict[str, Any] | None]:
        return [s.remote.get("status") if s.remote is not None else None for s in self.steps]


def step_time(start_time: datetime, index: int) -> datetime:
    """The manager-side clock at step ``index``: the value passed as ``now``."""
    return start_time + timedelta(seconds=STEP_SECONDS * (index + 1))


def translate_sequence(
    manager_job: dict[str, Any],
    remote_statuses: Sequence[WorkerStep | dict[str, Any] | None],
    start_time: datetime,
) -> list[dict[str, Any]]:
    """The manager status after each step, each computed from the previous one.

    Items may be ``WorkerStep`` (carrying the manager's suspend flag) or bare remote Jobs / None
    (the manager's spec stays as in ``manager_job``).
    """
    manager = copy.deepcopy(manager_job)
    manager.setdefault("status", {})
    out: list[dict[str, Any]] = []
    for i, item in enumerate(remote_statuses):
        if isinstance(item, WorkerStep):
            manager["spec"]["suspend"] = item.manager_suspend
            remote = item.remote
        else:
            remote = item
        status = desired_manager_status(manager, remote, step_time(start_time, i))
        out.append(status)
        manager["status"] = copy.deepcopy(status)
    return out


def manager_job_for(spec: dict[str, Any], start_time: datetime, name: str = "prop") -> dict[str, Any]:
    """A manager Job a real API server accepts on create, claimed by our controller."""
    job = make_job(name, namespace="default", managed_by=CONTROLLER_NAME, completions=None, parallelism=None,
                   backoff_limit=None, kwok=False, image="registry.k8s.io/pause:3.10", extra_spec=spec)
    job["metadata"]["creationTimestamp"] = format_time(start_time)
    return job


# --------------------------------------------------------------------------- worker simulation


@dataclass
class _Pod:
    uid: str
    index: int | None
    ready: bool = False


@dataclass
class _OldQuirks:
    """How an old worker deviates; drawn once per scenario."""

    no_ready: bool = False
    no_terminating: bool = False
    no_uncounted: bool = False
    no_completion_time: bool = False
    leaves_active: bool = False


@dataclass
class _Worker:
    spec: dict[str, Any]
    style: str
    quirks: _OldQuirks
    created: datetime
    skew: int
    run: int
    suspend: bool = False
    active: list[_Pod] = field(default_factory=list)
    terminating: int = 0
    succeeded: int = 0
    failed: int = 0
    uncounted_succeeded: list[_Pod] = field(default_factory=list)
    uncounted_failed: list[_Pod] = field(default_factory=list)
    completed: set[int] = field(default_factory=set)
    failed_indexes: set[int] = field(default_factory=set)
    index_failures: dict[int, int] = field(default_factory=dict)
    conditions: list[dict[str, Any]] = field(default_factory=list)
    start_time: str | None = None
    completion_time: str | None = None
    next_uid: int = 0

    # -- facts

    @property
    def indexed(self) -> bool:
        return self.spec.get("completionMode") == "Indexed"

    @property
    def completions(self) -> int | None:
        value = self.spec.get("completions")
        return value if isinstance(value, int) else None

    def has(self, ctype: str) -> bool:
        return any(c["type"] == ctype and c["status"] == "True" for c in self.conditions)

    @property
    def finished(self) -> bool:
        return self.has("Complete") or self.has("Failed")

    @property
    def interim(self) -> bool:
        return self.has("SuccessCriteriaMet") or self.has("FailureTarget")

    def stamp(self, now: datetime) -> str:
        return format_time(now + timedelta(seconds=self.skew))

    # -- pod events (the kubelet side)

    def _uid(self) -> str:
        self.next_uid += 1
        return f"run{self.run}-pod{self.next_uid}"

    def create_pods(self) -> None:
        if self.suspend or self.finished or self.interim:
            return
        parallelism = int(self.spec.get("parallelism", 1))
        if self.indexed:
            busy = {p.index for p in self.active} | self.completed | self.failed_indexes
            busy |= {p.index for p in self.uncounted_succeeded}
            pending = [i for i in range(self.completions or 0) if i not in busy]
            for i in pending[: max(parallelism - len(self.active), 0)]:
                self.active.append(_Pod(self._uid(), i))
            return
        done = self.succeeded + len(self.uncounted_succeeded)
        if self.completions is None:
            want = parallelism if done == 0 else 0
        else:
            want = min(parallelism, self.completions - done)
        while len(self.active) < want:
            self.active.append(_Pod(self._uid(), None))

    def create_extra_pod(self) -> None:
        """A replacement created while its predecessor still counted as active (expectations
        race, podReplacementPolicy TerminatingOrFailed): the run can then reach its completions
        with pods still active, which old controllers finished without waiting for."""
        if self.suspend or self.finished or self.interim:
            return
        index = self.active[0].index if self.indexed and self.active else (0 if self.indexed else None)
        self.active.append(_Pod(self._uid(), index))

    def pod_ready(self) -> None:
        for p in self.active:
            if not p.ready:
                p.ready = True
                return

    def pod_succeeds(self) -> None:
        if self.active:
            self.uncounted_succeeded.append(self.active.pop(0))

    def pod_fails(self) -> None:
        if self.active:
            self.uncounted_failed.append(self.active.pop(0))

    def termination_done(self) -> None:
        self.terminating = max(self.terminating - 1, 0)

    def flush(self) -> None:
        for p in self.uncounted_succeeded:
            self.succeeded += 1
            if p.index is not None:
                self.completed.add(p.index)
                self.failed_indexes.discard(p.index)
        for p in self.uncounted_failed:
            self.failed += 1
            if p.index is not None:
                self.index_failures[p.index] = self.index_failures.get(p.index, 0) + 1
                limit = self.spec.get("backoffLimitPerIndex")
                if limit is not None and self.index_failures[p.index] > limit and p.index not in self.completed:
                    self.failed_indexes.add(p.index)
        self.uncounted_succeeded.clear()
        self.uncounted_failed.clear()

    def _delete_active(self) -> None:
        self.terminating += len(self.active)
        self.active.clear()

    # -- controller decisions

    def _failure(self) -> tuple[str, str] | None:
        failures = self.failed + len(self.uncounted_failed)
        if self.spec.get("backoffLimitPerIndex") is not None:
            total = self.completions or 0
            if self.failed_indexes and len(self.completed | self.failed_indexes) >= total:
                return "FailedIndexes", "Job has failed indexes"
            return None
        if failures > int(self.spec.get("backoffLimit", 6)):
            return "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        return None

    def _success(self) -> tuple[str, str] | None:
        done_idx = self.completed | {p.index for p in self.uncounted_succeeded if p.index is not None}
        policy = self.spec.get("successPolicy")
        if policy is not None and self.style == "new":
            need = policy["rules"][0]["succeededCount"]
            if len(done_idx) >= need:
                return "SuccessPolicy", "Matched rules at index 0"
        if self.indexed:
            if self.completions is not None and len(done_idx) >= self.completions:
                return "CompletionsReached", "Reached expected number of succeeded pods"
            return None
        done = self.succeeded + len(self.uncounted_succeeded)
        if self.completions is None:
            if done >= 1 and not self.active:
                return "CompletionsReached", "Reached expected number of succeeded pods"
            return None
        if done >= self.completions:
            return "CompletionsReached", "Reached expected number of succeeded pods"
        return None

    def _add(self, ctype: str, reason: str, message: str, ts: str) -> None:
        for c in self.conditions:
            if c["type"] == ctype:
                c.update(status="True", reason=reason, message=message, lastProbeTime=ts, lastTransitionTime=ts)
                return
        self.conditions.append(
            {
                "type": ctype,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastProbeTime": ts,
                "lastTransitionTime": ts,
            }
        )

    def _set_suspended(self, value: bool, ts: str) -> bool:
        for c in self.conditions:
            if c["type"] == "Suspended":
                want = "True" if value else "False"
                if c["status"] == want:
                    return False
                reason, message = ("JobSuspended", "Job suspended") if value else ("JobResumed", "Job resumed")
                c.update(status=want, reason=reason, message=message, lastProbeTime=ts, lastTransitionTime=ts)
                return True
        if value:
            self._add("Suspended", "JobSuspended", "Job suspended", ts)
            return True
        return False

    def fail_now(self, reason: str, message: str, now: datetime, *, old_adds_target: bool) -> None:
        """Active deadline or a FailJob pod failure policy rule fired.

        Old controllers wrote Failed at once; from 1.26 a pod failure policy already went
        through FailureTarget, so ``old_adds_target`` models that generation.
        """
        if self.finished or self.interim:
            return
        ts = self.stamp(now)
        if self.style == "new":
            self._delete_active()
        if self.style == "new" or old_adds_target:
            self._add("FailureTarget", reason, message, ts)
        if self.style == "old":
            self._finish_old("Failed", reason, message, ts)

    def _finish_old(self, ctype: str, reason: str, message: str, ts: str) -> None:
        # Old controllers reported the pods they had just asked to delete (or failed to delete)
        # as still active in the same write that finished the Job, and never updated it again.
        if not self.quirks.leaves_active:
            self._delete_active()
        self._add(ctype, reason, message, ts)
        if ctype == "Complete" and not self.quirks.no_completion_time:
            self.completion_time = ts

    def sync(self, now: datetime) -> None:
        """One pass of the worker's Job controller."""
        if self.finished:
            return
        ts = self.stamp(now)
        if self.suspend:
            self._delete_active()
            self._set_suspended(True, ts)
        else:
            if self._set_suspended(False, ts) or self.start_time is None:
                self.start_time = ts
            self.create_pods()
        if not self.interim:
            failure = self._failure()
            success = None if failure else self._success()
            if failure is not None:
                if self.style == "new":
                    self._delete_active()
                    self._add("FailureTarget", failure[0], failure[1], ts)
                else:
                    self._finish_old("Failed", failure[0], failure[1], ts)
            elif success is not None:
                if self.style == "new":
                    self._delete_active()
                    self._add("SuccessCriteriaMet", success[0], success[1], ts)
                else:
                    self._finish_old("Complete", "", "", ts)
        pods_left = self.active or self.terminating or self.uncounted_succeeded or self.uncounted_failed
        if self.style == "new" and self.interim and not self.finished and not pods_left:
            source = next(c for c in self.conditions if c["type"] in ("SuccessCriteriaMet", "FailureTarget"))
            ctype = "Complete" if source["type"] == "SuccessCriteriaMet" else "Failed"
            self._add(ctype, source["reason"], source["message"], ts)
            if ctype == "Complete":
                self.completion_time = ts

    # -- the API object

    def job(self) -> dict[str, Any]:
        status: dict[str, Any] = {}
        if self.conditions:
            status["conditions"] = copy.deepcopy(self.conditions)
        if self.start_time:
            status["startTime"] = self.start_time
        if self.completion_time:
            status["completionTime"] = self.completion_time
        for key, value in (("active", len(self.active)), ("succeeded", self.succeeded), ("failed", self.failed)):
            if value:
                status[key] = value
        old = self.style == "old"
        if not (old and self.quirks.no_ready):
            status["ready"] = sum(1 for p in self.active if p.ready)
        if not (old and self.quirks.no_terminating):
            status["terminating"] = self.terminating
        if self.indexed and self.completed:
            status["completedIndexes"] = _fmt(self.completed)
        if self.spec.get("backoffLimitPerIndex") is not None:
            status["failedIndexes"] = _fmt(self.failed_indexes)
        if not (old and self.quirks.no_uncounted):
            uncounted: dict[str, list[str]] = {}
            if self.uncounted_succeeded:
                uncounted["succeeded"] = [p.uid for p in self.uncounted_succeeded]
            if self.uncounted_failed:
                uncounted["failed"] = [p.uid for p in self.uncounted_failed]
            status["uncountedTerminatedPods"] = uncounted
        spec = copy.deepcopy(self.spec)
        spec["suspend"] = self.suspend
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "prop",
                "namespace": "default",
                "uid": f"remote-run-{self.run}",
                "creationTimestamp": format_time(self.created + timedelta(seconds=self.skew)),
            },
            "spec": spec,
            "status": status,
        }


def _fmt(indexes: set[int]) -> str:
    # Deliberately independent of jobapi.intervals: the worker writes upstream's format.
    out: list[str] = []
    ordered = sorted(indexes)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{ordered[i]}-{ordered[j]}")
        else:
            out.extend(str(x) for x in ordered[i : j + 1])
        i = j + 1
    return ",".join(out)


# Weighted by repetition: pod progress dominates, disruptions are rarer.
ACTIONS = (
    ["create_extra"] * 3
    + ["ready"] * 3
    + ["succeed"] * 4
    + ["fail"] * 2
    + ["flush"] * 4
    + ["term_done"] * 3
    + ["tick"] * 2
    + ["suspend_toggle", "propagate", "propagate", "unreachable", "redispatch", "deadline", "policy_fail"]
    + ["succeed_all", "fail_all"]
)


@st.composite
def job_specs(draw: st.DrawFn) -> dict[str, Any]:
    """The mirrored part of a Job spec: every mode the status rules treat differently."""
    indexed = draw(st.booleans())
    spec: dict[str, Any] = {"parallelism": draw(st.integers(1, 3))}
    if indexed:
        spec["completionMode"] = "Indexed"
        spec["completions"] = draw(st.integers(1, 4))
        if draw(st.booleans()):
            spec["backoffLimitPerIndex"] = draw(st.integers(0, 1))
        else:
            spec["backoffLimit"] = draw(st.integers(0, 2))
        if draw(st.integers(0, 3)) == 0:
            spec["successPolicy"] = {"rules": [{"succeededCount": draw(st.integers(1, spec["completions"]))}]}
    else:
        spec["completionMode"] = "NonIndexed"
        completions = draw(st.sampled_from([None, 1, 2, 3]))
        if completions is not None:
            spec["completions"] = completions
        spec["backoffLimit"] = draw(st.integers(0, 2))
    return spec


@st.composite
def worker_sequences(draw: st.DrawFn, max_steps: int = 30) -> WorkerSequence:
    """A manager Job plus the steps a mirror controller would observe for it."""
    spec = draw(job_specs())
    style = draw(st.sampled_from(["new", "old"]))
    quirks = (
        _OldQuirks(
            no_ready=draw(st.booleans()),
            no_terminating=draw(st.booleans()),
            no_uncounted=draw(st.integers(0, 3)) == 0,
            no_completion_time=draw(st.integers(0, 3)) == 0,
            leaves_active=draw(st.booleans()),
        )
        if style == "old"
        else _OldQuirks()
    )
    # Each run may land on a different worker with its own clock.
    skews = draw(st.lists(st.integers(-30, 30), min_size=3, max_size=3))
    start_time = datetime(2026, 11, 23, 10, 0, 0, tzinfo=UTC) + timedelta(seconds=draw(st.integers(0, 86400)))
    manager_suspend = draw(st.integers(0, 3)) == 0
    actions = draw(st.lists(st.sampled_from(ACTIONS), min_size=3, max_size=max_steps))
    # Often end with the run settling, so terminal states are common.
    actions += draw(st.sampled_from([[], ["succeed_all"] * 3, ["fail_all"] * 3, ["propagate", "succeed_all"]]))

    manager_job = manager_job_for({**spec, "suspend": manager_suspend}, start_time)
    worker: _Worker | None = None
    runs = 0
    steps: list[WorkerStep] = []
    for i, action in enumerate(actions):
        now = step_time(start_time, i)
        unreachable = False
        if action == "suspend_toggle":
            manager_suspend = not manager_suspend
        elif action == "redispatch":
            worker = None
        elif action == "unreachable":
            unreachable = True
        # Dispatch: an unsuspended manager without a copy gets one.
        if worker is None and not manager_suspend and action != "redispatch":
            runs += 1
            worker = _Worker(
                spec=copy.deepcopy(spec), style=style, quirks=quirks, created=now, skew=skews[runs % 3], run=runs
            )
        if worker is not None and not unreachable:
            _apply(worker, action, manager_suspend, now)
            worker.sync(now)
        remote = worker.job() if worker is not None and not unreachable else None
        steps.append(WorkerStep(manager_suspend=manager_suspend, remote=remote, action=action))
    return WorkerSequence(manager_job=manager_job, steps=steps, start_time=start_time, style=style)


def _apply(worker: _Worker, action: str, manager_suspend: bool, now: datetime) -> None:
    if action == "create_extra":
        worker.create_extra_pod()
    elif action == "ready":
        worker.pod_ready()
    elif action == "succeed":
        worker.pod_succeeds()
    elif action == "fail":
        worker.pod_fails()
    elif action == "flush":
        worker.flush()
    elif action == "term_done":
        worker.termination_done()
    elif action == "propagate":
        worker.suspend = manager_suspend
    elif action == "deadline":
        worker.fail_now("DeadlineExceeded", "Job was active longer than specified deadline", now, old_adds_target=False)
    elif action == "policy_fail":
        worker.fail_now(
            "PodFailurePolicy",
            "Container main for pod default/prop-0 failed with exit code 42",
            now,
            old_adds_target=True,
        )
    elif action in ("succeed_all", "fail_all"):
        worker.suspend = manager_suspend
        for _ in range(8):
            worker.create_pods()
            while worker.active:
                if action == "succeed_all":
                    worker.pod_succeeds()
                else:
                    worker.pod_fails()
            worker.flush()
            worker.terminating = 0
            worker.sync(now)
            if worker.finished or worker.suspend:
                break


def sample_sequences(seed: int, n: int, max_steps: int = 15) -> list[WorkerSequence]:
    """``n`` scenarios drawn the way the property tests draw them, the same ones for the same
    seed: outside a test (``bench versions``) each release pair replays an identical set."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    drawn: list[WorkerSequence] = []

    @hypothesis_seed(seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(worker_sequences(max_steps=max_steps))
    def collect(seq: WorkerSequence) -> None:
        drawn.append(seq)

    collect()
    return drawn[:n]


async def replay(client: ClusterClient, ns: str, seq: WorkerSequence, name: str) -> int:
    """Write one translated history to a real manager, step by step through the status
    subresource, so its API server judges each write against the previous one as in production;
    the number of writes. Accepted is not enough: the server must store what was meant (a field
    it dropped or defaulted differently would make the next pass see a difference forever).
    Raises :class:`ReplayRejected` naming the step."""
    body = copy.deepcopy(seq.manager_job)
    body["metadata"] = {"name": name}
    job = await client.create(JOBS, ns, body)
    for i, step in enumerate(seq.steps):
        if bool(job["spec"].get("suspend")) != step.manager_suspend:
            job = await client.patch(JOBS, ns, name, {"spec": {"suspend": step.manager_suspend}})
        desired = desired_manager_status(job, step.remote, step_time(seq.start_time, i))
        where = f"{name} step {i} ({step.action}, {seq.style} worker)"
        try:
            job = await client.replace(JOBS, ns, name, {**job, "status": desired}, subresource="status")
        except ApiError as exc:
            raise ReplayRejected(f"{where} rejected: {exc.message}\nold={job.get('status')}\nnew={desired}\n"
                                 f"remote={(step.remote or {}).get('status')}") from exc
        if job.get("status", {}) != desired:
            raise ReplayRejected(f"{where} stored differently:\nwrote={desired}\nstored={job.get('status')}")
    await client.delete(JOBS, ns, name)
    return len(seq.steps)


class ReplayRejected(AssertionError):
    """A translated status the real API server refused, or stored otherwise than written."""
