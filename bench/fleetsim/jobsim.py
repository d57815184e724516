"""A fake Job controller and kubelet for one simulated worker.

A Job created there (not suspended, not managed by another controller) gets its pods at once, bound
round-robin to the worker's nodes and Running, and the status the real Job controller writes for a
running Job; after its run time (``--run-seconds``, or its ``fleetsim.jobmirror.dev/run-seconds``
annotation) its pods succeed and it completes as upstream does (SuccessCriteriaMet, then Complete).
Suspending deletes its pods and says so in a Suspended condition; resuming starts it again. Deleting
it deletes its pods through the store's propagation.

Time is kept by one scheduler task and a heap of deadlines, not a task per Job: 20,000 running Jobs
cost 20,000 heap entries.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.fleetsim.kinds import JOBS, PODS
from bench.fleetsim.store import JOB_LABELS, Change, Store, StoreError, now_iso
from jobapi.conditions import is_finished, is_true, new_condition, set_restamping
from kruntime.resources import Obj

log = logging.getLogger(__name__)

#: a Job's run time in seconds, over the simulation's default
RUN_SECONDS = "fleetsim.jobmirror.dev/run-seconds"
JOB_CONTROLLER = "kubernetes.io/job-controller"
INDEX = "batch.kubernetes.io/job-completion-index"
#: timers run between two yields to the loop (a burst of due Jobs must not hold the servers)
_BATCH = 100


@dataclass
class Run:
    """What the fake controller keeps of one Job: its pods and where it is."""

    namespace: str
    name: str
    uid: str
    #: new, starting, running, suspending, suspended
    state: str = "new"
    #: bumped at each state change: a timer set before it is stale
    epoch: int = 0
    pods: list[str] = field(default_factory=list)


def pods_wanted(spec: Obj) -> int:
    parallelism = int(spec.get("parallelism", 1) or 0)
    completions = spec.get("completions")
    return max(0, min(parallelism, int(completions))) if completions is not None else parallelism


def running_pod(job: Obj, node: str, index: int, now: str) -> Obj:
    """The pod the Job controller makes and a kubelet starts: the template, bound to ``node``, Running."""
    md, spec = job["metadata"], job.get("spec") or {}
    tmpl = spec.get("template") or {}
    tmd = tmpl.get("metadata") or {}
    labels = {**(tmd.get("labels") or {}), **dict(zip(JOB_LABELS, (md["uid"], md["name"], md["uid"], md["name"]),
                                                      strict=True))}
    annotations = dict(tmd.get("annotations") or {})
    if spec.get("completionMode") == "Indexed":
        labels[INDEX] = annotations[INDEX] = str(index)
    containers = (tmpl.get("spec") or {}).get("containers") or []
    ready = [new_condition(t, "True", "", "", now)
             for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready", "PodScheduled")]
    return {
        "metadata": {"generateName": f"{md['name']}-", "labels": labels, "annotations": annotations,
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": md["name"],
                                          "uid": md["uid"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": {**(tmpl.get("spec") or {}), "nodeName": node},
        "status": {"phase": "Running", "conditions": ready, "startTime": now, "hostIP": "10.0.0.1",
                   "containerStatuses": [{"name": c.get("name", "main"), "image": c.get("image", ""), "ready": True,
                                          "started": True, "restartCount": 0,
                                          "state": {"running": {"startedAt": now}}} for c in containers]},
    }


def succeed_pod(now: str) -> Callable[[Obj], None]:
    def change(pod: Obj) -> None:
        st = pod.setdefault("status", {})
        st["phase"] = "Succeeded"
        st["conditions"] = [new_condition(t, "False", "PodCompleted", "", now) if t in ("Ready", "ContainersReady")
                            else new_condition(t, "True", "", "", now)
                            for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready",
                                      "PodScheduled")]
        for cs in st.get("containerStatuses") or []:
            started = ((cs.get("state") or {}).get("running") or {}).get("startedAt", now)
            cs.update(ready=False, started=False, state={"terminated": {
                "exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": now}})
    return change


class JobSim:
    """The Job controller and kubelet of one simulated worker (its store's listener, one scheduler task)."""

    def __init__(self, store: Store, nodes: list[str], *, run_seconds: float,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.nodes = nodes
        self.run_seconds = run_seconds
        self.clock, self.monotonic = clock, monotonic
        self.runs: dict[str, Run] = {}
        self._timers: list[tuple[float, int, str, str, int]] = []
        self._seq = itertools.count()
        self._cursor = 0
        self._wake: asyncio.Event | None = None
        self.counts = {"started": 0, "completed": 0, "suspended": 0, "podsCreated": 0}
        store.listeners.append(self.on_change)

    def describe(self) -> Obj:
        return {"jobs": len(self.runs), "timers": len(self._timers), **self.counts}

    # -- what the store tells ------------------------------------------------------------------

    def on_change(self, change: Change) -> None:
        """A Job changed: decide what to do (later, from the scheduler: a listener must not write)."""
        if change.kind is not JOBS:
            return
        uid = change.new.uid
        if change.type == "DELETED":
            self.runs.pop(uid, None)
            return
        job = change.new.obj()
        spec, md = job.get("spec") or {}, job["metadata"]
        if (spec.get("managedBy") not in (None, JOB_CONTROLLER) or md.get("deletionTimestamp")
                or is_finished(job)):
            self.runs.pop(uid, None)
            return
        run = self.runs.get(uid)
        if run is None:
            run = self.runs[uid] = Run(md["namespace"], md["name"], uid)
        suspend = bool(spec.get("suspend"))
        if suspend and run.state in ("new", "starting", "running"):
            self._set(run, "suspending")
        elif not suspend and run.state in ("new", "suspending", "suspended"):
            self._set(run, "starting")

    def _set(self, run: Run, state: str, delay: float = 0.0) -> None:
        run.state = state
        run.epoch += 1
        self._at(delay, state, run)

    def _at(self, delay: float, action: str, run: Run) -> None:
        heapq.heappush(self._timers, (self.monotonic() + delay, next(self._seq), action, run.uid, run.epoch))
        if self._wake is not None:
            self._wake.set()

    # -- the scheduler -------------------------------------------------------------------------

    async def run(self) -> None:
        """Fire the timers as they come due, until cancelled."""
        self._wake = asyncio.Event()
        while True:
            fired = 0
            while self._timers and self._timers[0][0] <= self.monotonic():
                _, _, action, uid, epoch = heapq.heappop(self._timers)
                run = self.runs.get(uid)
                if run is None or run.epoch != epoch:
                    continue
                self.fire(action, run)
                fired += 1
                if fired % _BATCH == 0:
                    await asyncio.sleep(0)
            self._wake.clear()
            wait = self._timers[0][0] - self.monotonic() if self._timers else None
            if wait is None or wait > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._wake.wait()

    def fire(self, action: str, run: Run) -> None:
        try:
            {"starting": self._start, "running": self._finish, "suspending": self._suspend}[action](run)
        except StoreError as exc:
            if exc.code != 404:
                log.warning("fake Job controller: %s %s/%s: %s", action, run.namespace, run.name, exc)
            self.runs.pop(run.uid, None)

    def _job(self, run: Run) -> Obj:
        job = self.store.get(JOBS, run.namespace, run.name).obj()
        if job["metadata"]["uid"] != run.uid:
            raise StoreError(404, "NotFound", "replaced by another Job of the same name")
        return job

    def _start(self, run: Run) -> None:
        job = self._job(run)
        now = now_iso(self.clock)
        for i in range(pods_wanted(job.get("spec") or {})):
            node = self.nodes[self._cursor % len(self.nodes)] if self.nodes else ""
            self._cursor += 1
            pod = running_pod(job, node, i, now)
            self.store.create(PODS, run.namespace, pod, keep_status=True)  # names it (generateName)
            run.pods.append(pod["metadata"]["name"])
        self.counts["podsCreated"] += len(run.pods)

        def running(status: Obj) -> None:
            conds = status.setdefault("conditions", [])
            if is_true(conds, "Suspended"):
                set_restamping(conds, "Suspended", "False", "JobResumed", "Job resumed", now)
                status["startTime"] = now
            status.setdefault("startTime", now)
            status.update(active=len(run.pods), ready=len(run.pods), terminating=0, uncountedTerminatedPods={})

        self._status(run, running)
        self.counts["started"] += 1
        run.state = "running"
        self._at(self._run_seconds(job), "running", run)

    def _run_seconds(self, job: Obj) -> float:
        value = (job["metadata"].get("annotations") or {}).get(RUN_SECONDS)
        try:
            return max(0.0, float(value)) if value is not None else self.run_seconds
        except ValueError:
            return self.run_seconds

    def _finish(self, run: Run) -> None:
        job = self._job(run)
        now = now_iso(self.clock)
        for pod in run.pods:
            with contextlib.suppress(StoreError):
                self.store.mutate(PODS, run.namespace, pod, succeed_pod(now), subresource="status")
        spec = job.get("spec") or {}
        succeeded = int(spec.get("completions") or len(run.pods) or 1)

        def complete(status: Obj) -> None:
            status.update(active=0, ready=0, terminating=0, succeeded=succeeded, uncountedTerminatedPods={},
                          completionTime=now)
            if spec.get("completionMode") == "Indexed":
                status["completedIndexes"] = "0" if succeeded == 1 else f"0-{succeeded - 1}"
            message = "Reached expected number of succeeded pods"
            conds = status.setdefault("conditions", [])
            set_restamping(conds, "SuccessCriteriaMet", "True", "CompletionsReached", message, now)
            set_restamping(conds, "Complete", "True", "CompletionsReached", message, now)

        self._status(run, complete)
        self.counts["completed"] += 1
        self.runs.pop(run.uid, None)

    def _suspend(self, run: Run) -> None:
        now = now_iso(self.clock)
        for pod in run.pods:
            with contextlib.suppress(StoreError):
                self.store.delete(PODS, run.namespace, pod, {"propagationPolicy": "Background"})
        run.pods = []

        def suspended(status: Obj) -> None:
            status.update(active=0, ready=0, terminating=0)
            set_restamping(status.setdefault("conditions", []), "Suspended", "True", "JobSuspended", "Job suspended",
                           now)

        self._status(run, suspended)
        self.counts["suspended"] += 1
        run.state = "suspended"

    def _status(self, run: Run, change: Callable[[Obj], None]) -> None:
        def on_status(job: Obj) -> None:
            change(job.setdefault("status", {}))

        self.store.mutate(JOBS, run.namespace, run.name, on_status, subresource="status")
