"""Harness for the builtin Job controller's cluster tests (integration and conformance).

* :class:`ClusterView`: ONE cluster-wide Job informer and ONE Pod informer per cluster,
  shared by every scenario (a watch per namespace would exhaust the client's connection
  pool when dozens of scenarios run at once).
* :class:`Driver`: one Job in one namespace. It plays the kubelet for the Job's pods
  (through the pod status subresource, as :mod:`clusterbed.kubelet` does): an *outcome*
  function decides, from the pod's completion index and attempt number, whether a new pod
  succeeds, fails (exit code, pod conditions) or keeps running. It records the sequence of
  Job condition transitions and takes a normalised snapshot of the final state.
* :func:`ensure_controller`: one in-process builtin controller per cluster, limited to the
  namespaces these tests create (prefix ``bc-``), so other suites sharing the cluster are
  never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from builtin_controller import fields
from builtin_controller.controller import JobController
from clusterbed import kubelet
from clusterbed.cluster import ClusterSpec
from kruntime.client import ApiError, ClusterClient
from kruntime.informer import Informer
from kruntime.resources import JOBS, NAMESPACES, PODS, Obj
from testkit.jobs import make_job

log = logging.getLogger(__name__)

PREFIX = "bc-"
#: The Kubernetes release of the differential's two clusters (default: the bed's). The builtin
#: controller follows the semantics of whatever release its API server reports.
DIFFERENTIAL_VERSION_ENV = "JOBMIRROR_DIFFERENTIAL_KUBE_VERSION"


def differential_specs(version: str | None, upstream: ClusterSpec,
                       ours: ClusterSpec) -> tuple[ClusterSpec, ClusterSpec]:
    """The two cluster shapes at ``version`` (``X.Y.Z``; None or empty: as given).

    Another release gets its own cluster names, so a session never mistakes one for the other.
    """
    if not version or version == upstream.kube_version:
        return upstream, ours
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise ValueError(f"{DIFFERENTIAL_VERSION_ENV}={version!r}: want a release like 1.35.4")
    suffix = "-v" + version.replace(".", "-")
    return (replace(upstream, name=upstream.name + suffix, kube_version=version),
            replace(ours, name=ours.name + suffix, kube_version=version))


def new_namespace_name() -> str:
    return f"{PREFIX}{uuid.uuid4().hex[:10]}"


async def ensure_namespace(client: ClusterClient, ns: str) -> None:
    """Namespace plus its ``default`` ServiceAccount (API-server-only clusters have no
    controller that creates it, and pod admission requires it)."""
    for path, body in (
        (NAMESPACES.path(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        (f"/api/v1/namespaces/{ns}/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount",
                                                      "metadata": {"name": "default"}}),
    ):
        try:
            await client.request("POST", path, body=body)
        except ApiError as exc:
            if not exc.already_exists:
                raise


# -- the controller under test ----------------------------------------------------------------

_controllers: dict[str, tuple[JobController, ClusterClient]] = {}


async def ensure_controller(name: str, kubeconfig: str) -> JobController:
    """Start (once per cluster) our controller in this process, for ``bc-`` namespaces only."""
    if name in _controllers:
        return _controllers[name][0]
    client = await ClusterClient.from_kubeconfig(f"builtin-{name}", kubeconfig, qps=0)
    ctl = JobController(client, workers=5, namespace_filter=lambda ns: ns.startswith(PREFIX))
    ctl.start()
    await asyncio.wait_for(ctl.synced.wait(), 60)
    _controllers[name] = (ctl, client)
    return ctl


def running_controller(name: str) -> JobController | None:
    """The controller :func:`ensure_controller` started for cluster ``name``, if any."""
    entry = _controllers.get(name)
    return None if entry is None else entry[0]


async def stop_controllers() -> None:
    while _views:
        _, view = _views.popitem()
        await view.stop()
    while _controllers:
        _, (ctl, client) = _controllers.popitem()
        await ctl.stop(5)
        await client.close()


_views: dict[str, ClusterView] = {}


async def ensure_view(client: ClusterClient) -> ClusterView:
    """One shared :class:`ClusterView` per cluster (stopped by :func:`stop_controllers`)."""
    if client.name not in _views:
        view = ClusterView(client)
        await view.start()
        _views[client.name] = view
    return _views[client.name]


# -- pod outcomes -----------------------------------------------------------------------------

@dataclass(frozen=True)
class PodInfo:
    index: int | None  # completion index (Indexed Jobs)
    attempt: int  # 0 for the first pod of this index (NonIndexed: of the Job), 1 for the next…
    ordinal: int  # creation order within the Job


@dataclass(frozen=True)
class Outcome:
    kind: Literal["succeed", "fail", "hang", "restarts"] = "succeed"
    exit_code: int = 1
    conditions: tuple[tuple[str, str], ...] = ()
    delay: float = 0.5
    ready: bool = True
    restarts: int = 0


SUCCEED = Outcome("succeed")
HANG = Outcome("hang")


def fail(code: int = 1, *conditions: tuple[str, str], delay: float = 0.5) -> Outcome:
    return Outcome("fail", exit_code=code, conditions=tuple(conditions), delay=delay)


def succeed(delay: float = 0.5) -> Outcome:
    return Outcome("succeed", delay=delay)


OutcomeFn = Callable[[PodInfo], Outcome]


def always(o: Outcome) -> OutcomeFn:
    return lambda _i: o


ALWAYS_SUCCEED = always(SUCCEED)


# -- one cluster, many scenarios --------------------------------------------------------------

class ClusterView:
    def __init__(self, client: ClusterClient) -> None:
        self.client = client
        self.drivers: dict[str, list[Driver]] = {}
        self.jobs = Informer(client, JOBS)
        self.pods = Informer(client, PODS)
        self.jobs.add_handler(self._on_job)
        self.pods.add_handler(self._on_pod)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        if self._tasks:
            return
        self._tasks = [asyncio.create_task(self.jobs.run()), asyncio.create_task(self.pods.run())]
        await asyncio.wait_for(asyncio.gather(self.jobs.wait_synced(), self.pods.wait_synced()), 60)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def _on_job(self, etype: str, old: Obj | None, new: Obj) -> None:
        for d in self.drivers.get(fields.namespace(new), ()):
            d.on_job(etype, new)

    def _on_pod(self, etype: str, old: Obj | None, new: Obj) -> None:
        for d in self.drivers.get(fields.namespace(new), ()):
            d.on_pod(etype, new)


class Driver:
    """One Job in its own namespace on one cluster, with a kubelet-like autopilot."""

    def __init__(self, view: ClusterView, ns: str, *, job_name: str = "job", outcome: OutcomeFn = ALWAYS_SUCCEED,
                 on_delete: Literal["leave", "fail"] = "leave") -> None:
        self.view = view
        self.client = view.client
        self.ns = ns
        self.job_name = job_name
        self.outcome = outcome
        self.on_delete = on_delete
        self.trace: list[tuple[str, str, str]] = []
        #: whether status.startTime was set, each time that changed (suspending clears it from 1.36)
        self.start_trace: list[bool] = []
        self._cond_state: dict[str, tuple[str, str]] = {}
        self.seen: dict[str, PodInfo] = {}  # pod uid -> info
        self.pod_names: set[str] = set()
        self._attempts: dict[int | None, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._deleted_handled: set[str] = set()
        self.autopilot = True
        self.errors: list[str] = []
        #: Extra observers of every Job / Pod event in this namespace, in watch order.
        self.job_listeners: list[Callable[[str, Obj], None]] = []
        self.pod_listeners: list[Callable[[str, Obj], None]] = []
        view.drivers.setdefault(ns, []).append(self)

    # -- informer callbacks ---------------------------------------------------------------

    def on_job(self, etype: str, job: Obj) -> None:
        for fn in self.job_listeners:
            fn(etype, job)
        if fields.name(job) != self.job_name or etype == "DELETED":
            return
        started = "startTime" in (job.get("status") or {})
        if not self.start_trace or self.start_trace[-1] != started:
            self.start_trace.append(started)
        for c in (job.get("status") or {}).get("conditions") or []:
            t, s, r = c.get("type", ""), c.get("status", ""), c.get("reason", "")
            if self._cond_state.get(t) != (s, r):
                self._cond_state[t] = (s, r)
                self.trace.append((t, s, r))

    def _mine(self, pod: Obj) -> bool:
        ref = fields.controller_ref(pod)
        if ref is not None:
            return ref.get("kind") == "Job" and ref.get("name") == self.job_name
        return fields.labels_of(pod).get("batch.kubernetes.io/job-name") == self.job_name

    def on_pod(self, etype: str, pod: Obj) -> None:
        for fn in self.pod_listeners:
            fn(etype, pod)
        if etype == "DELETED" or not self._mine(pod):
            return
        u = fields.uid(pod)
        if u not in self.seen:
            ix = fields.completion_index(pod)
            key = None if ix == fields.UNKNOWN_INDEX else ix
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
            info = PodInfo(key, attempt, len(self.seen))
            self.seen[u] = info
            self.pod_names.add(fields.name(pod))
            if self.autopilot and fields.deletion_timestamp(pod) is None and not fields.is_terminal(pod):
                self._spawn(self._drive(pod, self.outcome(info)))
        if (fields.deletion_timestamp(pod) is not None and not fields.is_terminal(pod) and self.on_delete == "fail"
                and u not in self._deleted_handled):
            self._deleted_handled.add(u)
            self._spawn(self._fail_deleted(pod))

    def _spawn(self, coro: Awaitable[None]) -> None:
        async def guarded() -> None:
            try:
                await coro
            except ApiError as exc:
                if not (exc.not_found or exc.conflict):
                    self.errors.append(str(exc))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # surfaced by snapshot(), never swallowed
                self.errors.append(repr(exc))

        t = asyncio.get_running_loop().create_task(guarded())
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _drive(self, pod: Obj, o: Outcome) -> None:
        await asyncio.sleep(0.2)
        for _ in range(5):
            fresh = await self.client.get(PODS, self.ns, fields.name(pod))
            if fields.deletion_timestamp(fresh) is not None or fields.is_terminal(fresh):
                return
            status = kubelet.running_status(fresh, ready=o.ready)
            if o.kind == "restarts":
                for cs in status["containerStatuses"]:
                    cs["restartCount"] = o.restarts
            try:
                await kubelet.write_status(self.client, fresh, status)
                break
            except ApiError as exc:
                if not exc.conflict:
                    raise
        if o.kind in ("hang", "restarts"):
            return
        await asyncio.sleep(o.delay)
        fresh = await self.client.get(PODS, self.ns, fields.name(pod))
        if fields.deletion_timestamp(fresh) is not None or fields.is_terminal(fresh):
            return
        await self.finish(fresh, o)

    async def _fail_deleted(self, pod: Obj) -> None:
        await asyncio.sleep(1.0)
        fresh = await self.client.get(PODS, self.ns, fields.name(pod))
        if not fields.is_terminal(fresh):
            await kubelet.write_status(self.client, fresh, kubelet.terminated_status(fresh, succeeded=False,
                                                                                     exit_code=137))

    async def finish(self, pod: Obj, o: Outcome) -> None:
        """Terminate the pod with outcome ``o`` unless it already finished (a racing writer
        — the autopilot or a scripted step — may have got there first)."""
        conds = [{"type": t, "status": s, "lastTransitionTime": kubelet._now()} for t, s in o.conditions]
        for _ in range(5):
            fresh = await self.client.get(PODS, self.ns, fields.name(pod))
            if fields.is_terminal(fresh):
                return
            try:
                await kubelet.write_status(self.client, fresh, kubelet.terminated_status(
                    fresh, succeeded=o.kind == "succeed", exit_code=o.exit_code, conditions=conds))
                return
            except ApiError as exc:
                if not exc.conflict:
                    raise
        raise AssertionError(f"could not finish pod {fields.name(pod)}: conflicts")

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        ds = self.view.drivers.get(self.ns, [])
        if self in ds:
            ds.remove(self)
        if not ds:
            self.view.drivers.pop(self.ns, None)

    # -- reading state (from the shared caches) --------------------------------------------

    @property
    def job(self) -> Obj | None:
        return self.view.jobs.get(f"{self.ns}/{self.job_name}")

    def pods(self) -> list[Obj]:
        ps = [p for p in self.view.pods.items() if fields.namespace(p) == self.ns and self._mine(p)]
        return sorted(ps, key=lambda p: (fields.md(p).get("creationTimestamp", ""), fields.name(p)))

    def active(self) -> list[Obj]:
        return [p for p in self.pods() if fields.is_active(p)]

    def running(self, index: int | None = None) -> list[Obj]:
        return [p for p in self.active() if fields.phase(p) == "Running"
                and (index is None or fields.completion_index(p) == index)]

    def cond(self, ctype: str) -> str | None:
        j = self.job
        c = None if j is None else fields.condition(j, ctype)
        return None if c is None else str(c.get("status"))

    async def wait(self, probe: Callable[[], Any], *, timeout: float = 60, what: str = "condition") -> Any:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            v = probe()
            if v:
                return v
            if asyncio.get_running_loop().time() > deadline:
                j = self.job
                pods = [(fields.name(p), fields.phase(p), bool(fields.deletion_timestamp(p))) for p in self.pods()]
                raise AssertionError(f"[{self.client.name}/{self.ns}] timed out after {timeout}s waiting for {what}; "
                                     f"job status: {None if j is None else j.get('status')}; pods: {pods}")
            await asyncio.sleep(0.1)

    async def wait_running(self, n: int, *, timeout: float = 60) -> list[Obj]:
        """Exactly ``n`` active pods, all started by the autopilot, and the Job counts them."""
        def probe() -> bool:
            act = self.active()
            j = self.job
            return (len(act) == n and all(fields.phase(p) == "Running" for p in act) and j is not None
                    and int(j.get("status", {}).get("active") or 0) == n)
        await self.wait(probe, timeout=timeout, what=f"{n} running pods")
        return self.active()

    async def wait_condition(self, ctype: str, status: str = "True", *, timeout: float = 60) -> None:
        await self.wait(lambda: self.cond(ctype) == status, timeout=timeout, what=f"{ctype}={status}")

    async def wait_finished(self, *, timeout: float = 120) -> None:
        await self.wait(lambda: self.cond("Complete") == "True" or self.cond("Failed") == "True", timeout=timeout,
                        what="Job finished")

    async def wait_settled(self, quiet: float = 3.0, *, timeout: float = 120) -> None:
        """No change in the Job or its pods for ``quiet`` seconds, nothing left uncounted."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: Any = None
        since = loop.time()
        while True:
            j = self.job
            st = (j or {}).get("status") or {}
            u = st.get("uncountedTerminatedPods") or {}
            state = (fields.md(j or {}).get("resourceVersion"),
                     tuple((fields.name(p), fields.md(p).get("resourceVersion")) for p in self.pods()))
            if state != last:
                last, since = state, loop.time()
            elif loop.time() - since >= quiet and not u.get("succeeded") and not u.get("failed"):
                return
            if loop.time() > deadline:
                raise AssertionError(f"[{self.client.name}/{self.ns}] never settled; status {st}")
            await asyncio.sleep(0.2)

    # -- acting ---------------------------------------------------------------------------

    async def create_job(self, spec: Obj, *, labels: dict[str, str] | None = None) -> Obj:
        body: Obj = {"apiVersion": "batch/v1", "kind": "Job",
                     "metadata": {"name": self.job_name, "namespace": self.ns, "labels": labels or {}},
                     "spec": spec}
        created = await self.client.create(JOBS, self.ns, body)
        await self.wait(lambda: self.job is not None, timeout=30, what="Job in cache")
        return created

    async def patch_job(self, patch: Obj) -> Obj:
        return await self.client.patch(JOBS, self.ns, self.job_name, patch)

    async def delete_job(self, propagation: str = "Background") -> None:
        await self.client.delete(JOBS, self.ns, self.job_name, propagation=propagation)

    async def succeed_pod(self, pod: Obj) -> None:
        await self.finish(pod, SUCCEED)

    async def fail_pod(self, pod: Obj, code: int = 1, *conditions: tuple[str, str]) -> None:
        await self.finish(pod, fail(code, *conditions))

    async def delete_pod(self, pod: Obj) -> None:
        await self.client.delete(PODS, self.ns, fields.name(pod), propagation=None)

    # -- the result -----------------------------------------------------------------------

    def _norm(self, msg: str) -> str:
        for n in sorted(self.pod_names, key=len, reverse=True):
            msg = msg.replace(n, "<pod>")
        return re.sub(r"\s+", " ", msg)

    async def snapshot(self) -> Obj:
        """Everything that must match between the two controllers, timing-free."""
        try:
            j: Obj | None = await self.client.get(JOBS, self.ns, self.job_name)
        except ApiError as exc:
            if not exc.not_found:
                raise
            j = None
        pods, _ = await self.client.list_all(PODS, self.ns)
        mine = [p for p in pods if self._mine(p)]
        out: Obj = {
            "pods_created": len(self.seen),
            "pods_left": len(mine),
            "pods_with_finalizer": sum(1 for p in mine if fields.has_tracking_finalizer(p)),
            "driver_errors": self.errors,
        }
        per_index: dict[int, int] = {}
        for info in self.seen.values():
            if info.index is not None:
                per_index[info.index] = per_index.get(info.index, 0) + 1
        if per_index:
            out["pods_per_index"] = dict(sorted(per_index.items()))
        out["pod_shapes"] = sorted({_pod_shape(p, j) for p in mine if fields.controller_ref(p) is not None})
        if j is None:
            out["job"] = None
            return out
        st = j.get("status") or {}
        u = st.get("uncountedTerminatedPods") or {}
        conds = st.get("conditions") or []
        out["job"] = {
            "conditions": [(c.get("type"), c.get("status"), c.get("reason", ""), self._norm(c.get("message", "")))
                           for c in conds],
            "active": st.get("active", 0),
            "succeeded": st.get("succeeded", 0),
            "failed": st.get("failed", 0),
            "ready": st.get("ready"),
            "terminating": st.get("terminating"),
            "completedIndexes": st.get("completedIndexes", ""),
            "failedIndexes": st.get("failedIndexes"),
            "uncounted": (len(u.get("succeeded") or []), len(u.get("failed") or [])),
            "startTime": "startTime" in st,
            "startTime_trace": list(self.start_trace),
            "completionTime": "completionTime" in st,
            "terminal": next((c["type"] for c in conds if c.get("type") in ("Complete", "Failed")
                              and c.get("status") == "True"), None),
            "trace": list(self.trace),
        }
        return out


def _pod_shape(pod: Obj, job: Obj | None) -> str:
    """What the controller put into a pod, with cluster-specific UIDs blanked out."""
    juid = fields.uid(job) if job is not None else None
    md = fields.md(pod)
    shape = {
        "generateName": md.get("generateName"),
        "labels": {k: "<uid>" if v == juid or k.endswith("controller-uid") else v
                   for k, v in (md.get("labels") or {}).items()},
        "annotations": md.get("annotations") or {},
        "finalizers": md.get("finalizers") or [],
        "owners": [(r.get("kind"), r.get("name"), r.get("controller"), r.get("blockOwnerDeletion"))
                   for r in md.get("ownerReferences") or []],
        "hostname": (pod.get("spec") or {}).get("hostname"),
        "subdomain": (pod.get("spec") or {}).get("subdomain"),
        "env": [c.get("env") for c in (pod.get("spec") or {}).get("containers") or []],
    }
    return json.dumps(shape, sort_keys=True)


def job_spec(**overrides: Any) -> Obj:
    """A Job spec with a one-container template; keyword arguments override spec fields."""
    spec: Obj = make_job("job", managed_by=None, kwok=False, pod_spec={"terminationGracePeriodSeconds": 1})["spec"]
    for k, v in overrides.items():
        if v is None:
            spec.pop(k, None)
        else:
            spec[k] = v
    return spec


@contextlib.asynccontextmanager
async def driver(view: ClusterView, ns: str | None = None, **kw: Any) -> Any:
    ns = ns or new_namespace_name()
    await ensure_namespace(view.client, ns)
    d = Driver(view, ns, **kw)
    try:
        yield d
    finally:
        await d.close()


@dataclass
class Scenario:
    """A differential scenario: a Job spec, pod outcomes, optional steps, an end state."""

    name: str
    spec: Obj
    outcome: OutcomeFn = field(default=ALWAYS_SUCCEED)
    steps: Callable[[Driver], Awaitable[None]] | None = None
    before: Callable[[Driver], Awaitable[None]] | None = None
    #: For ``end="settled"``: the state to reach before waiting for quiet, so a slow first
    #: sync cannot pass for a settled Job.
    settled_when: Callable[[Driver], bool] | None = None
    end: Literal["finished", "settled", "deleted"] = "finished"
    on_delete: Literal["leave", "fail"] = "leave"
    quiet: float = 3.0
    timeout: float = 150.0
    covers: str = ""


async def run_scenario(view: ClusterView, sc: Scenario, ns: str) -> Obj:
    async with driver(view, ns, outcome=sc.outcome, on_delete=sc.on_delete) as d:
        if sc.before is not None:
            await sc.before(d)
        await d.create_job(copy.deepcopy(sc.spec))
        if sc.steps is not None:
            await sc.steps(d)
        if sc.end == "finished":
            await d.wait_finished(timeout=sc.timeout)
            await d.wait_settled(1.0, timeout=sc.timeout)
        elif sc.end == "deleted":
            await d.wait(lambda: d.job is None, timeout=sc.timeout, what="Job deleted")
            await d.wait_settled(sc.quiet, timeout=sc.timeout)
        else:
            when = sc.settled_when
            if when is not None:
                await d.wait(lambda: when(d), timeout=sc.timeout, what="settle condition")
            await d.wait_settled(sc.quiet, timeout=sc.timeout)
        return await d.snapshot()
