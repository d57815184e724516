"""What ``kubectl jobmirror describe`` and ``logs`` read on a worker, shared by the plugin
(operator mode: the worker kubeconfigs of the controller's config) and the controller's
read-only inspect API (users without worker credentials).

Reads only, each bounded in time; no cache, so a standby replica answers as well as the leader.
Every read takes the :class:`~mirror.kinds.MirroredKind` of the manager object (a Job by
default): the copy is that kind's object on the worker, its pods are found by the kind's
selector, and an object there counts as the copy only by :func:`mirror.identity.is_copy_of`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp

from jobapi.objects import annotations_of, labels_of
from jobapi.times import parse_time
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import EVENTS, PODS, Obj
from mirror.identity import is_copy_of, labels_of_copy
from mirror.jobs.kind import JOB_KIND
from mirror.jobsets.pods import JOBSET_NAME_LABEL
from mirror.kinds import MirroredKind
from mirror.naming import ANNOTATION_CLAIMED_BY, ANNOTATION_CLUSTER, ANNOTATION_REMOTE_NAME

POD_JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
#: a JobSet's pods: which replicatedJob, and which of its Jobs (0 .. replicas-1), they belong to
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
#: the last N events of the copy and its pods
MAX_EVENTS = 20


class NotPlaced(Exception):
    """The manager object has no copy to look at (not placed yet, or its worker is not known here)."""


@dataclass(frozen=True)
class Where:
    worker: str
    namespace: str
    remote_name: str


def where(job: Obj, kind: MirroredKind = JOB_KIND) -> Where:
    ann = annotations_of(job)
    worker = ann.get(ANNOTATION_CLUSTER)
    if not worker:
        raise NotPlaced(f"{describe_obj(kind, job)} is not placed on a worker yet")
    return Where(worker, job["metadata"]["namespace"], ann.get(ANNOTATION_REMOTE_NAME) or job["metadata"]["name"])


def describe_obj(kind: MirroredKind, obj: Obj) -> str:
    """``job ns/name``, ``jobset ns/name``: how messages name a manager object."""
    return f"{kind.name.lower()} {obj['metadata']['namespace']}/{obj['metadata']['name']}"


# -- pure -----------------------------------------------------------------------------------------


def is_copy(kind: MirroredKind, copy: Obj, manager: Obj) -> bool:
    """Whether ``copy`` is ``manager``'s copy (:func:`mirror.identity.is_copy_of`: origin, uid and
    namespace/name). The origin is the one the manager object was claimed under
    (``jobmirror.dev/claimed-by``, written with the placement; a user cannot set it). An object
    placed before that stamp existed has none: its uid and namespace/name must still match."""
    origin = annotations_of(manager).get(ANNOTATION_CLAIMED_BY) or labels_of_copy(copy).origin
    return origin is not None and is_copy_of(kind.name, copy, manager, origin=origin)


def pick_pod(pods: list[Obj], index: int | None, replicated_job: str | None = None) -> Obj | None:
    """The pod whose logs to show, the newest of those chosen: with ``replicated_job`` (a JobSet's),
    the pods of that replicatedJob, of its Job ``index`` if given; otherwise the pods of completion
    index ``index`` if given, else all."""
    if replicated_job is not None:
        pods = [p for p in pods if labels_of(p).get(REPLICATED_JOB_LABEL) == replicated_job]
        if index is not None:
            pods = [p for p in pods if labels_of(p).get(JOB_INDEX_LABEL) == str(index)]
    elif index is not None:
        pods = [p for p in pods if annotations_of(p).get(INDEX_ANNOTATION) == str(index)]
    if not pods:
        return None
    return max(pods, key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))


def pod_summary(pod: Obj) -> dict[str, Any]:
    """Phase, node, restarts and the last termination (reason, exit code) of one pod."""
    st = pod.get("status") or {}
    restarts = 0
    last: dict[str, Any] | None = None
    for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
        restarts += int(cs.get("restartCount") or 0)
        term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")
        waiting = (cs.get("state") or {}).get("waiting")
        if term:
            last = {"container": cs.get("name"), "reason": term.get("reason"), "exitCode": term.get("exitCode")}
        elif waiting and last is None:
            last = {"container": cs.get("name"), "reason": waiting.get("reason"), "exitCode": None}
    return {
        "name": pod["metadata"]["name"],
        "phase": st.get("phase", "Unknown"),
        "node": (pod.get("spec") or {}).get("nodeName") or "",
        "restarts": restarts,
        "index": annotations_of(pod).get(INDEX_ANNOTATION),
        "last": last,
        **_jobset_place(pod),
    }


def _jobset_place(pod: Obj) -> dict[str, Any]:
    """A JobSet pod's replicatedJob and Job index (nothing for another pod)."""
    labels = labels_of(pod)
    if JOBSET_NAME_LABEL not in labels:
        return {}
    return {"replicatedJob": labels.get(REPLICATED_JOB_LABEL), "jobIndex": labels.get(JOB_INDEX_LABEL)}


def event_summary(ev: Obj) -> dict[str, Any]:
    inv = ev.get("involvedObject") or {}
    return {
        "type": ev.get("type"),
        "reason": ev.get("reason"),
        "object": f"{inv.get('kind', '')}/{inv.get('name', '')}",
        "count": ev.get("count") or (ev.get("series") or {}).get("count") or 1,
        "last": ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp")
        or (ev.get("metadata") or {}).get("creationTimestamp"),
        "message": ev.get("message") or ev.get("note") or "",
    }


def last_events(events: list[Obj], n: int = MAX_EVENTS) -> list[dict[str, Any]]:
    out = [event_summary(e) for e in events]
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    out.sort(key=lambda e: parse_time(e["last"]) or epoch)  # mixed precisions: compare times, not strings
    return out[-n:]


# -- worker reads ---------------------------------------------------------------------------------


async def find_copy(worker: ClusterClient, job: Obj, kind: MirroredKind = JOB_KIND) -> Obj | None:
    """The copy of ``job`` (a ``kind``) on ``worker``, None when there is none (or the object there is not ours)."""
    w = where(job, kind)
    try:
        copy = await worker.get(kind.resource, w.namespace, w.remote_name)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise
    return copy if is_copy(kind, copy, job) else None


async def copy_pods(worker: ClusterClient, copy: Obj, kind: MirroredKind = JOB_KIND) -> list[Obj]:
    """The pods the worker's controller of ``kind`` runs for ``copy`` (by the kind's selector)."""
    selector = kind.pods.selector(copy) if kind.pods else f"{POD_JOB_UID_LABEL}={copy['metadata']['uid']}"
    page = await worker.list(PODS, copy["metadata"]["namespace"], label_selector=selector)
    return list(page.get("items") or [])


async def worker_events(worker: ClusterClient, copy: Obj, pods: list[Obj]) -> list[Obj]:
    """Events of the copy and of its pods (one list per object, by involvedObject uid)."""
    ns = copy["metadata"]["namespace"]
    out: list[Obj] = []
    for obj in [copy, *pods[-10:]]:
        page = await worker.list(EVENTS, ns, field_selector=f"involvedObject.uid={obj['metadata']['uid']}")
        out.extend(page.get("items") or [])
    return out


async def worker_view(worker: ClusterClient, worker_name: str, job: Obj,
                      kind: MirroredKind = JOB_KIND) -> dict[str, Any]:
    """Everything ``describe`` shows from the worker, as JSON-able data."""
    copy = await find_copy(worker, job, kind)
    if copy is None:
        return {"worker": worker_name, "copy": None}
    pods = await copy_pods(worker, copy, kind)
    events = await worker_events(worker, copy, pods)
    return {
        "worker": worker_name,
        "copy": copy_summary(copy),
        "pods": [pod_summary(p) for p in sorted(pods, key=lambda p: p["metadata"]["name"])],
        "events": last_events(events),
    }


def copy_summary(copy: Obj) -> dict[str, Any]:
    return {"name": copy["metadata"]["name"], "namespace": copy["metadata"]["namespace"],
            "uid": copy["metadata"]["uid"], "status": copy.get("status") or {}}


async def worker_summary(worker: ClusterClient, worker_name: str, job: Obj, withheld: str,
                         kind: MirroredKind = JOB_KIND) -> dict[str, Any]:
    """What ``describe`` shows a caller who may not read the namespace's pods: the copy and its
    status (what the manager object mirrors anyway), no pods, nodes or events; ``withheld`` says why."""
    copy = await find_copy(worker, job, kind)
    return {"worker": worker_name, "copy": None if copy is None else copy_summary(copy), "withheld": withheld}


@dataclass(frozen=True)
class LogRequest:
    container: str | None = None
    index: int | None = None
    follow: bool = False
    previous: bool = False
    tail_lines: int | None = None
    #: a JobSet's replicatedJob: ``index`` is then the Job's index within it
    replicated_job: str | None = None

    def problem(self, kind: MirroredKind) -> str | None:
        """Why this request cannot be asked of a ``kind`` (None: it can)."""
        if self.replicated_job is not None and kind is JOB_KIND:
            return "--replicated-job is for a JobSet's pods; a Job's pod is chosen with --index (completion index)"
        if self.replicated_job is None and self.index is not None and kind is not JOB_KIND:
            return (f"--index on a {kind.name} needs --replicated-job NAME (the index of that replicatedJob's "
                    "Job, 0 .. replicas-1)")
        return None


async def open_logs(worker: ClusterClient, job: Obj, req: LogRequest,
                    kind: MirroredKind = JOB_KIND) -> tuple[Obj, aiohttp.ClientResponse]:
    """Start the log stream of the chosen pod of ``job``'s copy; the caller reads and releases it.

    Raises NotPlaced (nothing to show) or ApiError (the worker's answer, e.g. a pod
    without logs: kwok's fake pods have none).
    """
    copy = await find_copy(worker, job, kind)
    if copy is None:
        done = (f" (the {kind.name} is finished: its copy is deleted unless keepFinishedRemote is set)"
                if kind.is_finished(job) else "")
        raise NotPlaced(f"no copy of {describe_obj(kind, job)} on worker {where(job, kind).worker}{done}")
    pod = pick_pod(await copy_pods(worker, copy, kind), req.index, req.replicated_job)
    if pod is None:
        raise NotPlaced(f"the copy {copy['metadata']['namespace']}/{copy['metadata']['name']} on worker "
                        f"{where(job, kind).worker} has no pod{_which(req)}")
    query = {"container": req.container, "follow": req.follow or None, "previous": req.previous or None,
             "tailLines": req.tail_lines}
    timeout = aiohttp.ClientTimeout(total=None, connect=worker.timeout, sock_read=None if req.follow else 60)
    resp = await worker._send("GET", PODS.path(pod["metadata"]["namespace"], pod["metadata"]["name"], "log"),
                              query=query, timeout=timeout)
    if not 200 <= resp.status < 300:  # 204: a pod not on a node yet has nothing to show
        raw = await resp.read()
        resp.release()
        try:
            message = str(json.loads(raw).get("message"))
        except ValueError:
            message = raw.decode(errors="replace")[:500]
        raise ApiError(resp.status, str(resp.reason or ""), message, cluster=worker.name)
    return pod, resp


def _which(req: LogRequest) -> str:
    if req.replicated_job is not None:
        return f" of replicatedJob {req.replicated_job}" + (f" Job index {req.index}" if req.index is not None else "")
    return f" with completion index {req.index}" if req.index is not None else ""


async def chunks(resp: aiohttp.ClientResponse) -> AsyncGenerator[bytes, None]:
    try:
        async for chunk in resp.content.iter_any():
            yield chunk
    finally:
        resp.release()
