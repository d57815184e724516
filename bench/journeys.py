"""The journeys ``bench versions`` runs per (manager, worker) release pair.

Each journey is one user story on its own Job (so all of them run at once against one running
controller) and ends in a verdict: it raises :class:`JourneyFailed` (or any exception: an error)
with the step it was at. Expectations hold on every supported release pair; where releases may
take different paths to the same end (a worker that refuses to rewrite a started copy before
1.36), the path taken is recorded in ``notes`` instead of asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from builtin_controller.semantics import parse_version
from jobapi.times import format_time
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import EVENTS, JOBS, PODS, Obj
from testkit.copies import CopyRecorder
from testkit.jobs import KWOK_OUTCOME, cond, make_job, true_types_in_order
from testkit.status_sequences import ReplayRejected, WorkerSequence, replay, sample_sequences
from testkit.waiting import ensure_namespace, get_or_none, wait_for


class JourneyFailed(AssertionError):
    """An expectation of the journey did not hold (as opposed to an error running it)."""


def expect(ok: object, message: str) -> None:
    if not ok:
        raise JourneyFailed(message)


@dataclass
class JourneyContext:
    """One journey's view: the manager (claimed namespace ``ns``), the one worker, its progress."""

    manager: ClusterClient
    worker: ClusterClient
    worker_name: str
    ns: str
    #: a namespace the controller does not claim (status-replay writes there itself)
    free_ns: str
    replay_seed: int = 0
    replay_examples: int = 20
    #: the controller's own cache of a manager Job by name, when it runs in this process
    controller_view: Callable[[str], Obj | None] | None = None
    step: str = "start"
    notes: dict[str, Any] = field(default_factory=dict)
    jobs: list[str] = field(default_factory=list)

    def at(self, step: str) -> None:
        self.step = step

    async def create(self, job: Obj) -> Obj:
        self.jobs.append(job["metadata"]["name"])
        return await self.manager.create(JOBS, self.ns, job)

    async def job(self, name: str, client: ClusterClient | None = None) -> Obj | None:
        return await get_or_none(client or self.manager, JOBS, self.ns, name)

    async def wait_job(self, name: str, ok: Callable[[Obj], object], what: str, *, timeout: float = 60,
                       client: ClusterClient | None = None) -> Obj:
        """The Job once ``ok(job)`` holds; on timeout the failure shows its last status."""
        last: list[Obj | None] = [None]

        async def probe() -> Obj | None:
            j = last[0] = await self.job(name, client)
            return j if j is not None and ok(j) else None

        try:
            return await wait_for(probe, timeout=timeout, what=what)
        except AssertionError as exc:
            raise JourneyFailed(f"timed out after {timeout:.0f}s waiting for {what}; last status: "
                                f"{(last[0] or {}).get('status')}"[:2000]) from exc

    async def wait_condition(self, name: str, ctype: str, timeout: float = 60) -> Obj:
        return await self.wait_job(name, lambda j: cond(j, ctype) == "True", f"{name} {ctype}=True", timeout=timeout)

    async def events(self, name: str) -> list[Obj]:
        items, _ = await self.manager.list_all(EVENTS, self.ns, field_selector=f"involvedObject.name={name}")
        return items

    async def wait_event(self, name: str, reason: str, timeout: float = 30) -> Obj:
        async def probe() -> Obj | None:
            return next((e for e in await self.events(name) if e["reason"] == reason), None)

        try:
            return await wait_for(probe, timeout=timeout, what=f"event {reason} on {name}")
        except AssertionError as exc:
            seen = [e["reason"] for e in sorted(await self.events(name), key=lambda e: e.get("firstTimestamp") or "")]
            st = ((await self.job(name)) or {}).get("status")
            raise JourneyFailed(f"no {reason} event on {name} after {timeout:.0f}s (events: {seen}); "
                                f"its status: {st}"[:2000]) from exc

    def copy_watch(self) -> CopyRecorder:
        """``async with ctx.copy_watch() as copies``: every copy the worker holds in ``ns`` from then on;
        ``await copies.made(uid)`` is every copy ever made of a Job (one: it was created once)."""
        return CopyRecorder({self.worker_name: self.worker}, self.ns)

    async def pods(self, job: str) -> list[Obj]:
        items, _ = await self.worker.list_all(PODS, self.ns, label_selector=f"batch.kubernetes.io/job-name={job}")
        return items


Journey = Callable[[JourneyContext], Awaitable[None]]


def short_invalid(message: str) -> str:
    """A 422's field path and verdict without the object it quotes (releases word them alike, but
    the quoted template is long): ``Job.batch "x" is invalid: spec.template: field is immutable``."""
    if ": Invalid value" not in message:
        return message[:300]
    return f"{message.split(': Invalid value', 1)[0]}: {message.rsplit(': ', 1)[-1]}"[:300]


# -- the journeys -----------------------------------------------------------------------------------


async def finish_complete(ctx: JourneyContext) -> None:
    """An Indexed Job of 3 completions, all succeed: SuccessCriteriaMet, then Complete."""
    name = "finish-complete"
    ctx.at("create")
    await ctx.create(make_job(name, indexed=True, completions=3, parallelism=3, duration_ms=1000))
    ctx.at("wait for Complete on the manager")
    done = await ctx.wait_condition(name, "Complete", timeout=60)
    ctx.at("check the finished status")
    st = done["status"]
    order = true_types_in_order(done)
    expect("SuccessCriteriaMet" in order and order.index("SuccessCriteriaMet") <= order.index("Complete"),
           f"SuccessCriteriaMet must come before Complete: {order}")
    expect(st.get("succeeded") == 3 and st.get("completedIndexes") == "0-2", f"3 succeeded, indexes 0-2: {st}")
    expect(not st.get("active") and not st.get("failed"), f"nothing active or failed: {st}")
    expect(st.get("startTime") and st.get("completionTime") and st["completionTime"] >= st["startTime"],
           f"completionTime >= startTime: {st}")


POD_FAILURE_POLICY = {"rules": [{"action": "FailJob",
                                 "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]}


async def finish_failed(ctx: JourneyContext) -> None:
    """A pod exits 42 and a podFailurePolicy FailJob rule fails the Job (backoffLimit 6 would
    have retried): FailureTarget, then Failed (reason PodFailurePolicy), no completionTime."""
    name = "finish-failed"
    ctx.at("create")
    await ctx.create(make_job(name, outcome="fail", exit_code=42, duration_ms=500, backoff_limit=6,
                              extra_spec={"podFailurePolicy": POD_FAILURE_POLICY}))
    ctx.at("wait for Failed on the manager")
    done = await ctx.wait_condition(name, "Failed", timeout=60)
    ctx.at("check the finished status")
    st = done["status"]
    order = true_types_in_order(done)
    expect("FailureTarget" in order and order.index("FailureTarget") <= order.index("Failed"),
           f"FailureTarget must come before Failed: {order}")
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    expect(failed.get("reason") == "PodFailurePolicy", f"Failed by the pod failure policy: {failed}")
    expect(cond(done, "Complete") is None and "completionTime" not in st, f"no Complete, no completionTime: {st}")
    expect(int(st.get("failed") or 0) >= 1 and not st.get("active"), f"failed >= 1, nothing active: {st}")


async def _running(ctx: JourneyContext, name: str, timeout: float = 60) -> Obj:
    return await ctx.wait_job(name, lambda j: bool((j.get("status") or {}).get("active")),
                              f"{name} shows active pods on the manager", timeout=timeout)


async def _held(ctx: JourneyContext, name: str) -> Obj:
    """The manager Job as a suspended Job must look: Suspended=True, nothing active, no startTime."""
    def held(j: Obj) -> bool:
        st = j.get("status") or {}
        return cond(j, "Suspended") == "True" and not st.get("active") and "startTime" not in st

    return await ctx.wait_job(name, held, f"{name} Suspended=True, active 0, no startTime", timeout=60)


async def suspend_resume(ctx: JourneyContext) -> None:
    """A running Job suspended on the manager: its copy suspends and the manager shows it held;
    resumed, it runs to Complete."""
    name = "suspend-resume"
    ctx.at("create")
    await ctx.create(make_job(name, completions=2, parallelism=2, duration_ms=8000))
    ctx.at("wait until it runs")
    await _running(ctx, name)
    ctx.at("suspend on the manager")
    await ctx.manager.patch(JOBS, ctx.ns, name, {"spec": {"suspend": True}})
    ctx.at("wait for the copy suspended")
    await ctx.wait_job(name, lambda c: c["spec"].get("suspend") is True and cond(c, "Suspended") == "True",
                       "the copy suspended on the worker", client=ctx.worker, timeout=30)
    ctx.at("wait for the manager held")
    await _held(ctx, name)
    # What the worker's Job controller did with the suspended copy's startTime: 1.36+ clears it
    # (the manager's is ours: dropped on every release).
    held_copy = await ctx.job(name, ctx.worker)
    ctx.notes["copyStartTimeWhileSuspended"] = (
        "kept" if ((held_copy or {}).get("status") or {}).get("startTime") else "cleared")
    ctx.at("resume")
    await ctx.manager.patch(JOBS, ctx.ns, name, {"spec": {"suspend": False}})
    ctx.at("wait for Complete after the resume")
    done = await ctx.wait_condition(name, "Complete", timeout=60)
    ctx.at("check the finished status")
    st = done["status"]
    suspended = next(c for c in st["conditions"] if c["type"] == "Suspended")
    expect(suspended["status"] == "False" and suspended.get("reason") == "JobResumed",
           f"Suspended=False (JobResumed) after the resume: {suspended}")
    expect(st.get("succeeded") == 2 and st.get("startTime") and st["completionTime"] >= st["startTime"],
           f"2 succeeded, completionTime >= startTime: {st}")


#: what the re-admission writes into the template: every kwok node matches (kwokctl labels its
#: nodes type=kwok), so the rewritten pods run; the outcome label turns the hanging pods' successors
#: into ones that succeed
READMIT_NODE_SELECTOR = {"type": "kwok"}
READMIT_TOLERATIONS = [{"key": "example.com/pool", "operator": "Exists", "effect": "NoSchedule"}]
READMIT_RESOURCES = {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "32Mi"}}


async def readmission(ctx: JourneyContext) -> None:
    """Kueue's pattern: suspend a running Job, rewrite nodeSelector/tolerations and template labels,
    resume; the copy's new pods carry the new template and the Job completes."""
    name = "readmission"
    ctx.at("create")
    await ctx.create(make_job(name, outcome="hang"))
    ctx.at("wait for the copy's first pod")
    old = await wait_for(lambda: ctx.pods(name), timeout=60, what="the copy's first pod")
    old_uids = {p["metadata"]["uid"] for p in old}
    ctx.at("suspend on the manager")
    await ctx.manager.patch(JOBS, ctx.ns, name, {"spec": {"suspend": True}})
    ctx.at("wait for the copy suspended")
    await ctx.wait_job(name, lambda c: c["spec"].get("suspend") is True, "the copy suspended", client=ctx.worker,
                       timeout=30)
    ctx.at("rewrite the suspended manager Job's template")
    refused: list[str] = []
    # From 1.36 (MutablePodResourcesForSuspendedJobs, beta) the manager also takes new container
    # resources on a suspended Job, as a queueing layer that resizes a Job would write them.
    release = parse_version(await ctx.manager.request("GET", "/version"))
    resize = release is not None and release[:2] >= (1, 36)
    tspec: Obj = {"nodeSelector": READMIT_NODE_SELECTOR, "tolerations": READMIT_TOLERATIONS}
    if resize:
        tspec["containers"] = [{"name": "main", "image": "busybox", "resources": READMIT_RESOURCES}]
    ctx.notes["resourcesRewritten"] = resize

    async def rewrite() -> bool:
        # The manager's API server allows it once the Job is suspended and (before 1.36) has no
        # startTime, which the mirror drops while the Job is suspended.
        try:
            await ctx.manager.patch(JOBS, ctx.ns, name, {
                "metadata": {"labels": {"team": "x"}},
                "spec": {"template": {"metadata": {"labels": {"queue": "b", KWOK_OUTCOME: "succeed"}},
                                      "spec": tspec}}})
        except ApiError as exc:
            if exc.status != 422:
                raise
            refused.append(short_invalid(exc.message))
            return False
        return True

    await wait_for(rewrite, timeout=30, interval=0.5, what="the template rewrite accepted by the manager")
    ctx.notes["managerRefusedRewriteFirst"] = len(refused)
    if refused:
        ctx.notes["managerRefusal"] = refused[0]
    ctx.at("resume")
    await ctx.manager.patch(JOBS, ctx.ns, name, {"spec": {"suspend": False}})
    ctx.at("wait for the resumed copy's pods")

    async def fresh() -> list[Obj]:
        return [p for p in await ctx.pods(name) if p["metadata"]["uid"] not in old_uids]

    for pod in await wait_for(fresh, timeout=60, what="the resumed copy's pods"):
        spec, labels = pod["spec"], pod["metadata"].get("labels") or {}
        expect(spec.get("nodeSelector") == READMIT_NODE_SELECTOR, f"new pod's nodeSelector: {spec.get('nodeSelector')}")
        expect(READMIT_TOLERATIONS[0] in (spec.get("tolerations") or []), f"new pod's tolerations: "
                                                                          f"{spec.get('tolerations')}")
        expect(labels.get("queue") == "b", f"new pod's labels: {labels}")
        if resize:
            got = spec["containers"][0].get("resources")
            expect(got == READMIT_RESOURCES, f"new pod's resources: {got}")
    ctx.at("wait for Complete after the rewrite")
    await ctx.wait_condition(name, "Complete", timeout=60)
    reasons = [e["reason"] for e in await ctx.events(name)]
    # How the worker took the rewrite: in place, or (a worker that refuses to rewrite a copy that
    # has started: before 1.36, or with the gate off) the suspended copy deleted and re-created.
    ctx.notes["copyRewrite"] = "recreated" if "CopyRecreated" in reasons else "in place"


async def decided_outcome(ctx: JourneyContext) -> None:
    """A Job the worker decided (SuccessCriteriaMet) whose copy then vanishes is finished from its
    decided status, not run again. The interim condition is written on the manager by the
    journey (as the mirror copies it from the worker), so the window is as long as it needs."""
    name = "decided-outcome"
    # Watched from before the create: a second copy, however short-lived, is a re-run.
    async with ctx.copy_watch() as copies:
        ctx.at("create")
        uid = (await ctx.create(make_job(name, completions=5, parallelism=1, duration_ms=1500)))["metadata"]["uid"]
        ctx.at("wait for 1 completion mirrored")
        job = await ctx.wait_job(name, lambda j: bool((j.get("status") or {}).get("active"))
                                 and int((j.get("status") or {}).get("succeeded") or 0) >= 1,
                                 f"{name} running with 1+ succeeded")
        ctx.at("write SuccessCriteriaMet on the manager")
        now = format_time(datetime.now(UTC))
        conds = [*((job.get("status") or {}).get("conditions") or []),
                 {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                  "message": "decided by the journey", "lastProbeTime": now, "lastTransitionTime": now}]
        await ctx.manager.patch(JOBS, ctx.ns, name, {"status": {"conditions": conds}}, subresource="status")
        ctx.at("wait for the controller to see the decision")
        # The mirror writes this condition itself in production (and so knows it); written here, a
        # copy deleted before the controller's cache has it would be re-created, as for any Job
        # not decided: that is the journey racing, not the controller.
        if ctx.controller_view is not None:
            view = ctx.controller_view
            await wait_for(lambda: asyncio.sleep(0, cond(view(name), "SuccessCriteriaMet") == "True"), timeout=30,
                           what="SuccessCriteriaMet in the controller's cache")
        else:
            await asyncio.sleep(2)
        ctx.at("delete the copy on the worker")
        await ctx.worker.delete(JOBS, ctx.ns, name)
        ctx.at("wait for FinishedWithoutCopy")
        event = await ctx.wait_event(name, "FinishedWithoutCopy", timeout=60)
        expect(f"gone from worker {ctx.worker_name}" in event["message"], f"event message: {event['message']}")
        ctx.at("wait for Complete")
        done = await ctx.wait_condition(name, "Complete", timeout=30)
        st = done["status"]
        expect(int(st.get("succeeded") or 0) >= 1 and not st.get("active"), f"counters as last mirrored: {st}")
        expect(st.get("completionTime") and st.get("startTime"), f"startTime and completionTime: {st}")
        ctx.at("check nothing runs again")
        await asyncio.sleep(4)  # two resyncs
        expect(await ctx.job(name, ctx.worker) is None, "a copy was created again on the worker")
        made = await copies.made(uid)
        expect(len(made) == 1, f"{len(made)} copies made on the worker: {made}")


async def status_replay(ctx: JourneyContext) -> None:
    """Generated worker histories (fixed seed), translated and written to this manager: every write
    accepted and stored as written."""
    ctx.at("draw the worker histories")
    # On the loop's thread, not in a worker thread: hypothesis watches the global random state
    # while it draws, and coroutines running meanwhile (jittered retries) would move it.
    seqs = sample_sequences(ctx.replay_seed, ctx.replay_examples)
    ctx.notes.update(seed=ctx.replay_seed, examples=len(seqs))
    ctx.at("replay")
    await ensure_namespace(ctx.manager, ctx.free_ns)
    gate = asyncio.Semaphore(4)

    async def one(i: int, seq: WorkerSequence) -> int:
        async with gate:
            try:
                return await replay(ctx.manager, ctx.free_ns, seq, f"replay-{i:03d}")
            except ReplayRejected as exc:
                raise JourneyFailed(str(exc)) from exc

    writes = await asyncio.gather(*(one(i, s) for i, s in enumerate(seqs)))
    ctx.notes["statusWrites"] = sum(writes)


#: every journey, in report order
JOURNEYS: dict[str, Journey] = {
    "finish-complete": finish_complete,
    "finish-failed": finish_failed,
    "suspend-resume": suspend_resume,
    "readmission": readmission,
    "decided-outcome": decided_outcome,
    "status-replay": status_replay,
}


@dataclass
class JourneyResult:
    name: str
    outcome: str  # passed | failed | error
    seconds: float
    step: str | None = None
    message: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    #: the Warning events on its Jobs; every event when it did not pass
    events: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "outcome": self.outcome, "seconds": self.seconds, "step": self.step,
                "message": self.message, "notes": self.notes, "events": self.events}


def verdict(exc: BaseException | None) -> str:
    """passed without an exception; failed when an expectation did not hold (a timeout waiting
    for one included); error for anything else (an API error, a bug in the journey)."""
    if exc is None:
        return "passed"
    return "failed" if isinstance(exc, AssertionError | TimeoutError) else "error"


async def run_journey(name: str, journey: Journey, ctx: JourneyContext, timeout: float) -> JourneyResult:
    """Run one journey to its verdict; never raises (but for cancellation)."""
    t0 = time.monotonic()
    exc: BaseException | None = None
    try:
        await asyncio.wait_for(journey(ctx), timeout)
    except asyncio.CancelledError:
        raise
    except TimeoutError as e:
        exc = TimeoutError(f"the journey took longer than {timeout:.0f}s")
        exc.__cause__ = e
    except Exception as e:
        exc = e
    outcome = verdict(exc)
    # Warning events always; every event of a journey that did not pass (what the controller did)
    warnings: list[str] = []
    for job in ctx.jobs:
        with contextlib.suppress(ApiError):
            warnings += [f"{job}: {e.get('type')} {e['reason']}: {e.get('message', '')}"[:400]
                         for e in sorted(await ctx.events(job), key=lambda e: e.get("firstTimestamp") or "")
                         if e.get("type") == "Warning" or outcome != "passed"]
    return JourneyResult(name, outcome, round(time.monotonic() - t0, 1),
                         step=None if exc is None else ctx.step,
                         message=None if exc is None else (str(exc) or repr(exc))[:3000],
                         notes=ctx.notes, events=warnings)
