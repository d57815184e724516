"""The builtin-controller differential with real kubelets: same Job, same steps, kcm vs ours.

``tests/conformance`` plays the kubelet itself; here real containers run (busybox on kind), so
what the kubelet does on its own — readiness from a probe, graceful termination that holds a
pod Terminating for seconds, real exit codes, the DisruptionTarget condition of an eviction —
reaches both Job controllers as it would in production. The conformance harness's
:class:`~tests.conformance.harness.Driver` records both sides (condition trace, pods created,
pod shapes, final status); this module adds what only real pods need:

* pods that wait for a release (``kubectl exec … touch /tmp/go``) and exit with the code
  their completion index is given, and trap SIGTERM to stay Terminating for ``term_delay`` s;
* **checkpoints**: at a scripted, pod-defined moment (e.g. "one pod is Terminating") the Job's
  counters, conditions and pods created once its ``active`` / ``ready`` / ``terminating`` agree
  with its pods and nothing changed for a moment — the intermediate values every controller must
  reach, without racing either one's batching (a side that never agrees is recorded as it was);
* which pods were created while another pod of the Job was still Terminating.

The counter trajectories themselves (every distinct value, in order) depend on when each
controller happened to sync, so they are kept for the report only, never compared.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builtin_controller import fields
from kruntime.client import ApiError
from kruntime.resources import PODS, Obj
from tests.conformance.harness import ClusterView, Driver, driver

#: The counters a checkpoint reads (and the trajectory records).
COUNTERS = ("active", "ready", "terminating", "succeeded", "failed")
#: A checkpoint is taken once the Job's status agrees with its pods and neither has changed for
#: this long (kcm batches pod events for 1 s); well inside the windows it is taken in.
QUIET = 1.5
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
#: Where the container looks for its release.
GO_FILE = "/tmp/go"


# -- the pods ---------------------------------------------------------------------------------

def container_script(*, term_delay: int, exit_codes: dict[int, int] | None = None,
                     probe_port: int | None = None) -> str:
    """``sh -c`` for busybox: trap SIGTERM (stay Terminating ``term_delay`` s, then exit 143),
    optionally serve ``probe_port`` for a readiness probe, wait for the release file, exit with
    the code of this completion index (``exit_codes``; 0 otherwise)."""
    lines = ["mkdir -p /tmp", f"trap 'sleep {term_delay}; exit 143' TERM"]
    if probe_port is not None:
        lines.append(f"httpd -p {probe_port} -h /tmp")
    lines.append("code=0")
    if exit_codes:
        cases = " ".join(f"{ix}) code={code};;" for ix, code in sorted(exit_codes.items()))
        lines.append(f'case "$JOB_COMPLETION_INDEX" in {cases} esac')
    lines += [f"until [ -e {GO_FILE} ]; do sleep 0.5; done", 'exit "$code"']
    return "\n".join(lines)


def pod_template(image: str, *, term_delay: int, exit_codes: dict[int, int] | None = None,
                 readiness_probe: bool = False) -> Obj:
    """One container ``main`` running :func:`container_script`; a grace period long enough for
    the trap to finish, so deletion is graceful and visible."""
    port = 8080 if readiness_probe else None
    container: Obj = {"name": "main", "image": image, "imagePullPolicy": "IfNotPresent",
                      "command": ["sh", "-c", container_script(term_delay=term_delay, exit_codes=exit_codes,
                                                               probe_port=port)]}
    if port is not None:
        container["readinessProbe"] = {"tcpSocket": {"port": port}, "initialDelaySeconds": 1, "periodSeconds": 1}
    return {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": term_delay + 20,
                     "containers": [container]}}


def job_spec(template: Obj, **fields: Any) -> Obj:
    spec: Obj = {"completions": 1, "parallelism": 1, "backoffLimit": 6, "template": template}
    spec.update(fields)
    return spec


def counters(job: Obj | None) -> dict[str, int]:
    st = (job or {}).get("status") or {}
    return {k: int(st.get(k) or 0) for k in COUNTERS}


def trajectory_faults(trajectory: list[dict[str, int]]) -> list[str]:
    """What no Job controller may ever write, whatever its timing: more ready than active pods."""
    return [f"step {i}: ready {c['ready']} > active {c['active']}" for i, c in enumerate(trajectory)
            if c["ready"] > c["active"]]


# -- one side of a scenario -------------------------------------------------------------------

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@dataclass
class Side:
    """One Job on one cluster (a :class:`Driver` without autopilot) plus the real-pod steps."""

    d: Driver
    kubectl: Kubectl
    checkpoints: dict[str, Obj] = field(default_factory=dict)
    trajectory: list[dict[str, int]] = field(default_factory=list)
    #: Per pod created after the first: how many other pods of the Job were Terminating then.
    created_beside_terminating: list[int] = field(default_factory=list)
    released: set[str] = field(default_factory=set)
    #: (seconds, pod or event, state) on every change: the report of a failed comparison.
    timeline: list[tuple[float, str, str]] = field(default_factory=list)
    _t0: float = field(default_factory=time.monotonic)
    _pod_state: dict[str, str] = field(default_factory=dict)

    def _t(self) -> float:
        return round(time.monotonic() - self._t0, 1)

    def __post_init__(self) -> None:
        self.d.autopilot = False
        self.d.job_listeners.append(self._on_job)
        self.d.pod_listeners.append(self._on_pod)

    def _on_job(self, etype: str, job: Obj) -> None:
        if etype == "DELETED" or fields.name(job) != self.d.job_name:
            return
        c = counters(job)
        if not self.trajectory or self.trajectory[-1] != c:
            self.trajectory.append(c)
            self.timeline.append((self._t(), "job", " ".join(f"{k}={v}" for k, v in c.items())))

    def _on_pod(self, etype: str, pod: Obj) -> None:
        if fields.labels_of(pod).get(JOB_NAME_LABEL) != self.d.job_name:
            return
        state = "gone" if etype == "DELETED" else (
            f"{fields.phase(pod)}{' deleting' if fields.deletion_timestamp(pod) else ''}"
            f"{' ready' if fields.is_ready(pod) else ''}")
        if self._pod_state.get(fields.name(pod)) != state:
            self._pod_state[fields.name(pod)] = state
            self.timeline.append((self._t(), fields.name(pod)[-5:], state))
        # Called before the Driver records the pod: an unseen uid is a newly created pod.
        if etype == "DELETED" or fields.uid(pod) in self.d.seen or not self.d.seen:
            return
        self.created_beside_terminating.append(len(self.terminating()))

    # -- reading ----------------------------------------------------------------------------

    def terminating(self) -> list[Obj]:
        return [p for p in self.d.pods() if fields.is_terminating(p)]

    def ready(self, *, fresh: bool = False) -> list[Obj]:
        """Active pods whose Ready condition is True (``fresh``: none released yet)."""
        return [p for p in self.d.active() if fields.is_ready(p) and not (fresh and fields.name(p) in self.released)]

    # -- acting -----------------------------------------------------------------------------

    async def wait_ready(self, n: int, *, fresh: bool = False, timeout: float = 90) -> list[Obj]:
        """Exactly ``n`` active pods, all Ready (``fresh``: ``n`` Ready pods not released yet)."""
        def probe() -> bool:
            return len(self.ready(fresh=fresh)) == n and (fresh or len(self.d.active()) == n)
        await self.d.wait(probe, timeout=timeout, what=f"{n} ready pods")
        return self.ready(fresh=fresh)

    async def release(self, pod: Obj) -> None:
        """Let ``pod``'s container exit (with its index's code) by creating the release file."""
        name = fields.name(pod)
        self.released.add(name)
        for attempt in range(3):  # a loaded node's kubelet can refuse a stream now and then
            proc = await asyncio.to_thread(self.kubectl, "exec", "-n", self.d.ns, name, "-c", "main", "--",
                                           "touch", GO_FILE)
            if proc.returncode == 0:
                return
            # A stream can break after the touch ran: the container then exits on its own, and a
            # retry finds it completed (seen in CI). Nothing but the release file ends it.
            with contextlib.suppress(ApiError):
                now = await self.d.client.get(PODS, self.d.ns, name)
                if (now.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    return
            await asyncio.sleep(1 + attempt)
        raise AssertionError(f"[{self.d.client.name}] kubectl exec {name} failed: {proc.stderr.strip()}")

    async def release_all(self) -> None:
        for p in self.d.active():
            if fields.name(p) not in self.released:
                await self.release(p)

    async def evict(self, pod: Obj) -> None:
        """The Eviction API: the API server adds DisruptionTarget, then deletes the pod gracefully."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": fields.name(pod), "namespace": self.d.ns}}
        await self.d.client.request("POST", PODS.path(self.d.ns, fields.name(pod), "eviction"), body=body)

    def pod_truth(self) -> dict[str, int]:
        """``active`` / ``ready`` / ``terminating`` as the Job's pods are now (what every Job
        controller converges to: ready and active count pods neither finished nor deleted)."""
        pods = self.d.pods()
        return {"active": sum(1 for p in pods if fields.is_active(p)),
                "ready": sum(1 for p in pods if fields.is_active(p) and fields.is_ready(p)),
                "terminating": sum(1 for p in pods if fields.is_terminating(p))}

    async def checkpoint(self, name: str, *, hold: Callable[[], bool] | None = None, timeout: float = 20) -> None:
        """Record the Job's status once it agrees with its pods (:meth:`pod_truth`) and nothing
        has changed for :data:`QUIET` seconds — or, if it never agrees within ``timeout``, as it
        last was (``converged`` False: compared like the rest). ``hold`` must still be true then
        (the window the checkpoint is about, e.g. a pod still Terminating), or the scenario is too
        fast to judge and fails."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: Any = None
        since = loop.time()
        while True:
            st = (self.d.job or {}).get("status") or {}
            truth = self.pod_truth()
            now_state = (st, truth)
            if now_state != last:
                last, since = copy.deepcopy(now_state), loop.time()
            converged = {k: int(st.get(k) or 0) for k in truth} == truth
            if converged and loop.time() - since >= QUIET:
                break
            if loop.time() > deadline:
                break
            await asyncio.sleep(0.1)
        if hold is not None and not hold():
            raise AssertionError(f"[{self.d.client.name}/{self.d.ns}] checkpoint {name}: its window closed before "
                                 f"the Job's status settled (status {st}, pods {truth})")
        self.checkpoints[name] = {
            **counters({"status": st}),
            "converged": converged,
            "conditions": sorted((c.get("type"), c.get("status"), c.get("reason", ""))
                                 for c in st.get("conditions") or []),
            "startTime": "startTime" in st,
            "pods_created": len(self.d.seen),
        }
        self.timeline.append((self._t(), f"checkpoint {name}", str(self.checkpoints[name])))

    async def snapshot(self) -> tuple[Obj, Obj]:
        """(compared, report-only): the Driver's snapshot plus checkpoints; the trajectory."""
        snap = await self.d.snapshot()
        snap["checkpoints"] = dict(self.checkpoints)
        snap["created_beside_terminating"] = list(self.created_beside_terminating)
        snap["trajectory_faults"] = trajectory_faults(self.trajectory)
        return snap, {"trajectory": list(self.trajectory), "timeline": list(self.timeline)}


# -- scenarios --------------------------------------------------------------------------------

Step = Callable[[Side], Awaitable[None]]


@dataclass(frozen=True)
class KindScenario:
    """A Job spec (its pods from :func:`pod_template`) and the steps that drive it to its end."""

    name: str
    spec: Obj
    steps: Step
    covers: str
    #: What every Job controller shows, per checkpoint (a subset of its keys) and at the end (of
    #: the snapshot's ``job``): proves the window the scenario is about really opened.
    expect: dict[str, Obj] = field(default_factory=dict)
    final: Obj = field(default_factory=dict)
    #: ``created_beside_terminating`` both sides must show (None: not part of the scenario).
    beside_terminating: list[int] | None = None
    timeout: float = 180.0


@dataclass
class Result:
    upstream: Obj
    ours: Obj
    report: dict[str, Obj]
    seconds: float


async def run_side(view: ClusterView, kubectl: Kubectl, sc: KindScenario, ns: str) -> tuple[Obj, Obj]:
    async with driver(view, ns) as d:
        side = Side(d, kubectl)
        await d.create_job(copy.deepcopy(sc.spec))
        await asyncio.wait_for(sc.steps(side), sc.timeout)
        await d.wait_finished(timeout=sc.timeout)
        await d.wait_settled(1.0, timeout=sc.timeout)
        # A finished pod already being deleted, no finalizer left: only its kubelet's last delete is
        # missing, and on 2 busy cores that can take longer than the quiet second above. Neither
        # controller has a say in it, so the snapshot waits for it (30 s at most: then it shows it).
        with contextlib.suppress(AssertionError):
            await d.wait(lambda: not any(_left_to_the_kubelet(p) for p in d.pods()), timeout=30,
                         what="finished, deleted pods without finalizers gone")
        return await side.snapshot()


def _left_to_the_kubelet(pod: Obj) -> bool:
    return (bool(fields.deletion_timestamp(pod)) and not fields.md(pod).get("finalizers")
            and fields.phase(pod) in ("Succeeded", "Failed"))


async def run_pair(upstream: tuple[ClusterView, Kubectl], ours: tuple[ClusterView, Kubectl], sc: KindScenario,
                   ns: str) -> Result:
    """Both sides at once, in namespace ``ns`` on each cluster (messages name it: keep it equal)."""
    t0 = time.monotonic()
    a, b = await asyncio.gather(run_side(*upstream, sc, ns), run_side(*ours, sc, ns), return_exceptions=True)
    if isinstance(a, BaseException):
        raise AssertionError(f"{sc.name} failed on kube-controller-manager ({ns}): {a}") from a
    if isinstance(b, BaseException):
        raise AssertionError(f"{sc.name} failed on the builtin controller ({ns}): {b}") from b
    return Result(a[0], b[0], {"upstream": a[1], "ours": b[1]}, time.monotonic() - t0)


def format_report(report: dict[str, Obj]) -> str:
    """Both sides' timelines (pod states, Job counters, checkpoints), one event a line."""
    out = []
    for side, rep in report.items():
        out.append(f"--- {side}")
        out += [f"  {t:6.1f}s {who:>10} {state}" for t, who, state in rep.get("timeline", [])]
    return "\n".join(out)


def kubectl_for(binary: str, kubeconfig: Path) -> Kubectl:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([binary, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                              timeout=60)
    return run


async def delete_namespace(view: ClusterView, ns: str) -> None:
    with contextlib.suppress(ApiError):
        await view.client.request("DELETE", f"/api/v1/namespaces/{ns}")
