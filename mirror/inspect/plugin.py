"""``kubectl jobmirror`` (also ``jobmirror``): status, describe and logs of mirrored Jobs.

Speaks to the manager as the user, with kubectl's flags (``--kubeconfig``, ``--context``,
``-n``, ``-A``, ``-o``). Worker-side details (the copy, its pods, their events and logs)
come either straight from the workers, for an operator who passes the controller's config
(``--config``: its worker kubeconfigs), or from the controller's inspect API through the
manager API server's service proxy, for a user who has no worker credentials: the
controller checks that the user may ``get`` the Job (mirror/inspect/api.py).

JobSets too: ``status`` shows them in a table of their own (as ``kubectl get job,jobset`` does)
when the manager serves the JobSet API; ``describe`` and ``logs`` take ``jobset/NAME``
(mirror/inspect/kinds.py), and ``logs --replicated-job R --index N`` picks a pod of the Job
``N`` of replicatedJob ``R``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import ssl
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from jobapi import conditions as jc
from jobapi.objects import annotations_of
from jobapi.times import parse_time, utcnow
from kruntime.client import ApiError, ClusterClient, KubeconfigError, load_incluster, load_kubeconfig
from kruntime.names import InvalidName, check_name, check_namespace, segment
from kruntime.resources import EVENTS, NODES, PODS, Obj, Resource
from mirror.config import Config
from mirror.inspect import kinds, reads
from mirror.inspect.api import TOKEN_HEADER
from mirror.jobs.kind import JOB_KIND, pods_wanted
from mirror.jobsets.kind import JOBSET_KIND
from mirror.kinds import MirroredKind
from mirror.naming import (
    ANNOTATION_CLUSTER,
    ANNOTATION_PIN,
    ANNOTATION_PLACEMENT_REASON,
    ANNOTATION_REMOTE_NAME,
    DEFAULT_CONTROLLER_NAME,
    FIELD_MANAGER,
)
from mirror.room.fit import NodeRoom, worker_fit
from mirror.room.requests import shape_of_template
from mirror.room.view import NOT_TERMINAL, free_summary, room_totals, rooms_of

#: where deploy/ (and the chart's release "jobmirror") puts the inspect API: namespace/scheme:service:port-name
#: (HTTPS only). Used when --inspect-service is not given and the user may not list Services to find it.
DEFAULT_INSPECT_SERVICE = "jobmirror-system/https:jobmirror-inspect:inspect"
#: the labels deploy/ and the chart put on the inspect Service (and the metrics Service: it has no port "inspect")
INSPECT_SERVICE_SELECTOR = "app.kubernetes.io/part-of=jobmirror,app.kubernetes.io/component=controller"
INSPECT_PORT = "inspect"
SERVICES = Resource("", "v1", "services", "Service")
KWOK_NOTE = ("(if the pod runs on a kwok fake node, as in the local test bed, there are no logs to read: kwok "
             "runs no containers)")
EMPTY_NOTE = "no log output from pod {pod} ({why})"


class UsageError(Exception):
    """Bad flags or an impossible request; exit 2 with the message."""


@dataclass
class Target:
    """The manager as the user sees it, and where worker-side details come from."""

    manager: ClusterClient
    namespace: str | None  # None = all namespaces
    controller_name: str
    config: Config | None = None
    inspect_service: str | None = None  # None: found by its labels (find_inspect_service)
    inspect_url: str | None = None
    token: str | None = None
    inspect_ca: Path | None = None


# -- pure: formatting -------------------------------------------------------------------------------


def state_of(job: Obj, kind: MirroredKind = JOB_KIND) -> str:
    held = kind.state(job)
    if held is not None:
        return held
    return "Running" if ANNOTATION_CLUSTER in annotations_of(job) else "Pending"


def last_sync(job: Obj, now: datetime) -> str:
    """Age of our last status write, from managedFields (no extra bookkeeping writes)."""
    times = [m.get("time") for m in job["metadata"].get("managedFields") or []
             if m.get("manager") == FIELD_MANAGER and m.get("subresource") == "status" and m.get("time")]
    t = parse_time(max(times)) if times else None
    return "-" if t is None else f"{(now - t).total_seconds():.0f}s"


def status_row(job: Obj, now: datetime) -> dict[str, Any]:
    st = job.get("status") or {}
    ann = annotations_of(job)
    return {
        "job": f"{job['metadata']['namespace']}/{job['metadata']['name']}",
        "worker": ann.get(ANNOTATION_CLUSTER, "-"),
        "state": state_of(job),
        "succeeded": st.get("succeeded", 0),
        "failed": st.get("failed", 0),
        "active": st.get("active", 0),
        "lastSync": last_sync(job, now),
        "remoteName": ann.get(ANNOTATION_REMOTE_NAME, "-"),
        "placement": ann.get(ANNOTATION_PLACEMENT_REASON, "-"),
    }


def jobset_row(jobset: Obj, now: datetime) -> dict[str, Any]:
    """A JobSet's row: its child Jobs' counters summed over its replicatedJobs, and its restarts."""
    st = jobset.get("status") or {}
    rjobs = [r for r in st.get("replicatedJobsStatus") or [] if isinstance(r, dict)]
    ann = annotations_of(jobset)
    return {
        "jobset": f"{jobset['metadata']['namespace']}/{jobset['metadata']['name']}",
        "worker": ann.get(ANNOTATION_CLUSTER, "-"),
        "state": state_of(jobset, JOBSET_KIND),
        **{f: sum(int(r.get(f) or 0) for r in rjobs) for f in ("succeeded", "failed", "active")},
        "restarts": int(st.get("restarts") or 0),
        "lastSync": last_sync(jobset, now),
        "remoteName": ann.get(ANNOTATION_REMOTE_NAME, "-"),
        "placement": ann.get(ANNOTATION_PLACEMENT_REASON, "-"),
    }


def format_jobsets(rows: list[dict[str, Any]], wide: bool = False) -> str:
    """The JobSet table: SUCCEEDED/FAILED/ACTIVE count child Jobs (a JobSet's status counts Jobs, not pods)."""
    return format_status(rows, wide, name=("JOBSET", "jobset"), extra=(("RESTARTS", "restarts", 8),))


def select_rows(rows: list[dict[str, Any]], worker: str | None, state: str | None) -> list[dict[str, Any]]:
    return [r for r in rows if (worker is None or r["worker"] == worker)
            and (state is None or r["state"].lower() == state.lower())]


def format_status(rows: list[dict[str, Any]], wide: bool = False, *, name: tuple[str, str] = ("JOB", "job"),
                  extra: tuple[tuple[str, str, int], ...] = ()) -> str:
    """The status table: ``name`` is the first column's title and row key, ``extra`` more counters
    (title, row key, width) before LAST SYNC."""
    more_head = "".join(f"{title:>{width}s} " for title, _, width in extra)
    head = (f"{name[0]:40s} {'WORKER':12s} {'STATE':10s} {'SUCCEEDED':>9s} {'FAILED':>6s} {'ACTIVE':>6s} "
            f"{more_head}LAST SYNC")
    lines = [head + ("  REMOTE NAME  PLACEMENT" if wide else "")]
    for r in rows:
        more = "".join(f"{r[key]:>{width}} " for _, key, width in extra)
        line = (f"{r[name[1]]:40s} {r['worker']:12s} {r['state']:10s} {r['succeeded']:>9} {r['failed']:>6} "
                f"{r['active']:>6} {more}{r['lastSync']}")
        if wide:
            line += f"  {r['remoteName']}  {r['placement']}"
        lines.append(line)
    return "\n".join(lines)


_STATUS_FIELDS = ("active", "ready", "terminating", "succeeded", "failed", "completedIndexes", "failedIndexes",
                  "startTime", "completionTime")


_JOBSET_STATUS_FIELDS = ("restarts", "restartsCountTowardsMax", "terminalState")
_RJOB_COUNTERS = ("ready", "succeeded", "failed", "active", "suspended")


def _jobset_fields(status: Obj) -> dict[str, object]:
    """A JobSet status flattened for the side-by-side table: its fields, then each replicatedJob's non-zero
    counters of child Jobs."""
    out: dict[str, object] = {f: status.get(f) for f in _JOBSET_STATUS_FIELDS}
    for r in status.get("replicatedJobsStatus") or []:
        if isinstance(r, dict):
            out[f"{r.get('name')}"] = " ".join(f"{c}={r[c]}" for c in _RJOB_COUNTERS if r.get(c)) or "0 Jobs"
    return out


def side_by_side(manager: Obj, copy: Obj | None, kind: MirroredKind = JOB_KIND) -> list[str]:
    """Status fields and conditions of the manager object next to the copy's."""
    ms, cs = manager.get("status") or {}, (copy or {}).get("status") or {}
    lines = [f"  {'FIELD':22s} {'MANAGER':32s} COPY"]
    if kind is JOB_KIND:
        mf: dict[str, object] = {f: ms.get(f) for f in _STATUS_FIELDS}
        cf: dict[str, object] = {f: cs.get(f) for f in _STATUS_FIELDS}
    else:
        mf, cf = _jobset_fields(ms), _jobset_fields(cs)
    for f in [*mf, *(f for f in cf if f not in mf)]:
        mv, cv = mf.get(f), cf.get(f)
        if mv is None and cv is None:
            continue
        lines.append(f"  {f:22s} {_s(mv):32s} {_s(cv) if copy is not None else '(no copy)'}")
    mc = {c["type"]: c for c in ms.get("conditions") or []}
    cc = {c["type"]: c for c in cs.get("conditions") or []}
    for t in sorted(set(mc) | set(cc)):
        lines.append(f"  {'condition ' + t:22s} {_cond(mc.get(t)):32s} {_cond(cc.get(t))}")
    return lines


def _s(v: object) -> str:
    return "-" if v is None else str(v)


def _cond(c: Obj | None) -> str:
    return "-" if c is None else f"{c.get('status')} {c.get('reason') or ''}".strip()


def format_events(events: list[dict[str, Any]], now: datetime) -> list[str]:
    if not events:
        return ["  <none>"]
    out = [f"  {'LAST':6s} {'TYPE':8s} {'REASON':22s} {'OBJECT':30s} MESSAGE"]
    for e in events:
        t = parse_time(e.get("last"))
        age = f"{(now - t).total_seconds():.0f}s" if t else "?"
        count = f" (x{e['count']})" if int(e.get("count") or 1) > 1 else ""
        out.append(f"  {age:6s} {e.get('type') or '':8s} {e.get('reason') or '':22s} {e.get('object') or '':30s} "
                   f"{e.get('message', '')}{count}")
    return out


def format_describe(job: Obj, worker_view: dict[str, Any] | None, worker_problem: str | None,
                    manager_events: list[dict[str, Any]], now: datetime,
                    fits: dict[str, str] | None = None, kind: MirroredKind = JOB_KIND) -> str:
    md, ann = job["metadata"], annotations_of(job)
    state = state_of(job, kind)
    pods_seen = (worker_view or {}).get("pods") or []
    if state == "Running" and pods_seen and not any(p.get("node") for p in pods_seen):
        state += " (placed; no pod of the copy is scheduled yet)"
    lines = [f"Name:        {md['namespace']}/{md['name']}"]
    if kind is not JOB_KIND:
        lines.append(f"Kind:        {kind.name} ({kind.resource.api_version})")
    lines += [f"State:       {state}",
             f"Worker:      {ann.get(ANNOTATION_CLUSTER, '<not placed>')}",
             f"Placement:   {ann.get(ANNOTATION_PLACEMENT_REASON) or '-'}"]
    if ann.get(ANNOTATION_PIN):
        lines.append(f"Pinned to:   {ann[ANNOTATION_PIN]}")
    if fits:
        lines.append(f"Room now (one pod of this {kind.name}, per worker):")
        lines += [f"  {name}: {verdict}" for name, verdict in sorted(fits.items())]
    copy = (worker_view or {}).get("copy")
    if worker_view is None:
        lines.append(f"Copy:        ? ({worker_problem})")
    elif copy is None:
        lines.append(f"Copy:        none on worker {worker_view['worker']}")
    else:
        lines.append(f"Copy:        {copy['namespace']}/{copy['name']} on {worker_view['worker']} (uid {copy['uid']})")
    lines.append("Status:")
    lines += side_by_side(job, {"status": copy["status"]} if copy else None, kind)
    if copy and (worker_view or {}).get("withheld"):  # the inspect API's summary for a user who may not get pods
        lines.append(f"Pods and events of the copy: withheld ({worker_view['withheld']})")  # type: ignore[index]
    elif copy:
        lines.append(f"Pods of the copy (worker {worker_view['worker']}):")  # type: ignore[index]
        pods = worker_view.get("pods") or []  # type: ignore[union-attr]
        if not pods:
            lines.append("  <none>")
        else:
            lines.append(f"  {'NAME':40s} {'PHASE':10s} {'NODE':20s} {'RESTARTS':>8s}  LAST TERMINATION")
            for p in pods:
                last = p.get("last")
                term = "-" if not last else (f"{last['container']}: {last.get('reason') or '?'}"
                                             + (f" (exit {last['exitCode']})" if last.get("exitCode") is not None
                                                else ""))
                lines.append(f"  {p['name']:40s} {p['phase']:10s} {p['node'] or '<none>':20s} {p['restarts']:>8}  "
                             f"{term}")
        lines.append(f"Events of the copy and its pods (worker {worker_view['worker']}):")  # type: ignore[index]
        lines += format_events(worker_view.get("events") or [], now)  # type: ignore[union-attr]
    lines.append(f"Events on the manager {kind.name}:")
    lines += format_events(manager_events, now)
    return "\n".join(lines)


def render(data: Any, output: str) -> str:
    return json.dumps(data, indent=2, default=str) if output == "json" else yaml.safe_dump(data, sort_keys=False)


# -- kubeconfig -----------------------------------------------------------------------------------


def default_kubeconfig() -> Path:
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env.split(os.pathsep)[0])
    return Path.home() / ".kube" / "config"


def context_namespace(path: Path, context: str | None) -> str:
    """The namespace the kubeconfig's (current) context names, as kubectl defaults to it."""
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return "default"
    name = context or doc.get("current-context")
    ctx = next((c.get("context") or {} for c in doc.get("contexts") or [] if c.get("name") == name), {})
    return str(ctx.get("namespace") or "default")


async def connect(args: Any) -> Target:
    """The manager as the user (kubeconfig flags), or as the controller's config says (``--config``)."""
    config = None
    if args.config is not None:
        from mirror.config import load_config
        config = load_config(args.config)
    path = Path(args.kubeconfig) if args.kubeconfig else None
    context = args.context
    if path is None and config is not None:
        # As the controller reaches the manager: its kubeconfig, or in its Pod, the ServiceAccount.
        path, context = config.manager_kubeconfig, args.context or config.manager_context
    elif path is None:
        path = default_kubeconfig()
    kc = await load_kubeconfig(path, context) if path is not None else await load_incluster()
    token = kc.api_key.get("BearerToken")
    if token and token.lower().startswith("bearer "):
        token = token[7:]
    if getattr(args, "token", None):
        token = args.token
    if args.all_namespaces:
        ns: str | None = None
    elif args.namespace:
        ns = args.namespace
    elif config is not None and args.kubeconfig is None and getattr(args, "verb", "") == "status":
        ns = None  # the operator's status: everything the controller claims
    else:
        ns = context_namespace(path, context) if path is not None else "default"
    return Target(ClusterClient.from_configuration("manager", kc, timeout=args.request_timeout), ns,
                  config.controller_name if config else args.controller_name, config,
                  args.inspect_service, args.inspect_url, token, args.inspect_ca)


# -- verbs ----------------------------------------------------------------------------------------


async def claimed_of(t: Target, kind: MirroredKind) -> list[Obj] | None:
    """The manager's objects of ``kind`` claimed by the controller, sorted; None when the manager
    does not serve the kind, or (said on stderr) the user may not list it: a JobSet API that is not
    installed, or not granted, does not keep the Jobs from being shown."""
    try:
        items, _ = await t.manager.list_all(kind.resource, t.namespace)
    except ApiError as exc:
        if kind is JOB_KIND or not (exc.not_found or exc.status == 403):
            raise
        if exc.status == 403:
            print(f"note: {kind.resource.plural}.{kind.resource.group} not shown: {exc.message}", file=sys.stderr)
        return None
    claimed = [o for o in items if kind.managed_by(o) == t.controller_name
               and (t.config is None or not t.config.namespaces or o["metadata"]["namespace"] in t.config.namespaces)]
    return sorted(claimed, key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]))


async def status(t: Target, args: Any, out: Callable[[str], None]) -> int:
    now = utcnow()
    only = kinds.by_type(args.kind) if getattr(args, "kind", None) else None
    jobs = await claimed_of(t, JOB_KIND) if only in (None, JOB_KIND) else []
    jobsets = await claimed_of(t, JOBSET_KIND) if only in (None, JOBSET_KIND) else []
    if jobsets is None and only is JOBSET_KIND:
        raise UsageError(f"the manager serves no {JOBSET_KIND.resource.plural}.{JOBSET_KIND.resource.group} "
                         "(JobSet is not installed there)")
    claimed, claimed_sets = jobs or [], jobsets or []
    rows = select_rows([status_row(j, now) for j in claimed], args.worker, args.state)
    set_rows = select_rows([jobset_row(j, now) for j in claimed_sets], args.worker, args.state)
    view = await controller_workers(t)
    if isinstance(view, str):
        print(f"note: {view}", file=sys.stderr)
        view = None
    probed = await worker_health(t.config) if t.config else None
    if args.output in ("json", "yaml"):
        out(render({"jobs": rows, "jobsets": set_rows, "workers": merge_workers(probed, view)}, args.output))
        return 0
    if only is not JOBSET_KIND:
        out(format_status(rows, wide=args.output == "wide"))
        out(_count_line(len(claimed), sum(1 for j in claimed if not jc.is_finished(j)), len(rows), "Jobs"))
    if claimed_sets or only is JOBSET_KIND:  # as kubectl get job,jobset: a table per kind, none when empty
        out(format_jobsets(set_rows, wide=args.output == "wide"))
        out(_count_line(len(claimed_sets), sum(1 for j in claimed_sets if not JOBSET_KIND.is_finished(j)),
                        len(set_rows), "JobSets"))
    if probed is not None:
        for line in format_probed_workers(merge_workers(probed, view) or [], now):
            out(line)
    elif view is not None:
        for line in format_workers(view, now):
            out(line)
    return 0


def _count_line(claimed: int, unfinished: int, shown: int, what: str) -> str:
    return (f"\n{claimed} claimed {what}, {unfinished} unfinished" + (f" ({shown} shown)" if shown != claimed else "")
            + "\n")


def _since(stamp: object, now: datetime) -> str:
    """``2026-11-26T23:10:05Z (4m)``: when, and how long ago."""
    at = parse_time(stamp) if isinstance(stamp, str) else None
    return "-" if at is None else f"{stamp} ({_seconds(max(0.0, (now - at).total_seconds()))})"


def format_workers(rows: list[dict[str, Any]], now: datetime) -> list[str]:
    """The controller's worker listing (inspect API ``/v1/workers``) as ``status`` prints it: a STALLED
    worker (answers, runs none of our copies) with since when and why; a healthy one with its load."""
    lines = [f"{'WORKER':12s} {'HEALTH':10s} {'SINCE':26s} DETAIL"]
    for r in rows:
        detail = r.get("reason") or f"{r.get('unfinished', 0)} unfinished copies"
        lines.append(f"{r['name']:12s} {r['health']:10s} {_since(r.get('since'), now):26s} {detail}")
        if r["health"] != "STALLED" and r.get("stalled"):  # stalled too, behind a worse state
            lines.append(f"{'':12s} also stalled since {_since(r.get('stalledSince'), now)}: {r['stalled']}")
    return lines


def merge_workers(probed: list[dict[str, Any]] | None, view: list[dict[str, Any]] | None
                  ) -> list[dict[str, Any]] | None:
    """``--config``'s own probe of each worker with the controller's view of it (``controller``), or the
    controller's view alone. A worker the probe finds healthy shows the controller's STALLED or slow:
    its API server answers, and only the controller sees that its copies never run."""
    if probed is None:
        return view
    by_name = {r["name"]: r for r in view or []}
    out = []
    for p in probed:
        row: dict[str, Any] = dict(p)
        seen = by_name.get(p["name"])
        if seen is not None:
            row["controller"] = seen
            if p["health"] == "healthy" and seen["health"] in ("STALLED", "slow"):
                row["health"] = seen["health"]
        out.append(row)
    return out


def format_probed_workers(rows: list[dict[str, Any]], now: datetime) -> list[str]:
    """``status --config``: each worker as probed now, then what the controller sees when it differs."""
    lines = [f"{'WORKER':12s} {'HEALTH':10s} {'VERSION':10s} DETAIL"]
    for w in rows:
        lines.append(f"{w['name']:12s} {w['health']:10s} {w['version']:10s} {w['detail']}")
        seen = w.get("controller")
        if seen is not None and seen["health"] != "healthy":
            lines.append(f"{'':12s} controller: {seen['health']} since {_since(seen.get('since'), now)}: "
                         f"{seen.get('reason')}")
        if w.get("room"):
            lines.append(f"{'':12s} room: {w['room']}")
    return lines


async def controller_workers(t: Target) -> list[dict[str, Any]] | str | None:
    """The controller's worker listing through its inspect API (as the caller: a namespace's users see
    it too), or why it could not be read; None when there is no inspect API to ask (the kubeconfig's
    user has no token, no inspect Service on the manager) — then ``status`` shows what it can alone."""
    if not t.token:
        return None
    path = "/v1/workers" if t.namespace is None else f"/v1/namespaces/{segment(t.namespace)}/workers"
    try:
        resp = await _inspect_get(t, path, {})
    except UsageError:
        return None
    except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
        return f"the controller's view of the workers not shown: {exc}"
    try:
        if resp.status != 200:
            return f"the controller's view of the workers not shown: {await _inspect_error(resp)}"
        data = json.loads(await resp.read())
    finally:
        await _close(resp)
    return list(data.get("items") or [])


async def worker_health(cfg: Config) -> list[dict[str, str]]:
    out = []
    for w in cfg.workers:
        row = {"name": w.name, "health": "BROKEN", "version": "-", "detail": ""}
        try:
            client = await ClusterClient.from_kubeconfig(w.name, w.kubeconfig, context=w.context,
                                                         timeout=min(cfg.request_timeout, 5))
        except KubeconfigError as exc:
            row["detail"] = str(exc)
            out.append(row)
            continue
        try:
            await client.request("GET", "/readyz")
            v = await client.request("GET", "/version")
            row.update(health="healthy", version=str(v.get("gitVersion", "?")), detail=client.host,
                       room=await worker_room(client))
        except ApiError as exc:
            row.update(health="UNHEALTHY", detail=str(exc))
        finally:
            await client.close()
        out.append(row)
    return out


async def read_room(client: ClusterClient) -> tuple[list[NodeRoom], int] | str:
    """A worker's nodes with what its non-terminal pods take, and its pending pods (one read); or why not."""
    try:
        nodes, _ = await client.list_all(NODES)
        pods, _ = await client.list_all(PODS, field_selector=NOT_TERMINAL)
    except ApiError as exc:
        if exc.status == 403:
            return "not readable with this kubeconfig (deploy/worker/ grants it)"
        return f"not read: {exc}"
    return rooms_of(nodes, pods)


async def worker_room(client: ClusterClient) -> str:
    """Free room per resource over the worker's schedulable nodes, and its pending pods."""
    room = await read_room(client)
    return room if isinstance(room, str) else free_summary(room_totals(room[0]), room[1])


async def _worker_client(t: Target, worker: str) -> ClusterClient:
    assert t.config is not None
    w = t.config.worker(worker)
    if w is None:
        raise reads.NotPlaced(f"worker {worker} is not in {t.config and 'the given config'}")
    return await ClusterClient.from_kubeconfig(worker, w.kubeconfig, context=w.context,
                                               timeout=t.config.request_timeout)


def inspect_services(services: list[Obj]) -> list[str]:
    """``namespace/https:name:inspect`` of each labelled Service that has the inspect port."""
    return sorted(f"{s['metadata']['namespace']}/https:{s['metadata']['name']}:{INSPECT_PORT}" for s in services
                  if any(p.get("name") == INSPECT_PORT for p in (s.get("spec") or {}).get("ports") or []))


async def find_inspect_service(manager: ClusterClient) -> str:
    """The one inspect Service on the manager, found by deploy/'s and the chart's labels in every namespace.

    A user who may not list Services cluster-wide gets deploy/'s (and release "jobmirror"'s) name.
    """
    try:
        items, _ = await manager.list_all(SERVICES, None, label_selector=INSPECT_SERVICE_SELECTOR)
    except ApiError as exc:
        if exc.status in (401, 403):
            return DEFAULT_INSPECT_SERVICE
        raise
    found = inspect_services(items)
    if not found:
        raise UsageError(f"no inspect Service ({INSPECT_SERVICE_SELECTOR}, port {INSPECT_PORT!r}) on the manager: "
                         "pass --inspect-service namespace/https:service:inspect, or --config")
    if len(found) > 1:
        raise UsageError(f"{len(found)} inspect Services on the manager ({', '.join(found)}): pick one with "
                         "--inspect-service")
    return found[0]


def _object_path(ns: str, name: str, verb: str, kind: MirroredKind = JOB_KIND) -> str:
    return f"/v1/namespaces/{segment(ns)}/{kind.resource.plural}/{segment(name)}/{verb}"


def _inspect_path(t: Target, ns: str, name: str, verb: str, kind: MirroredKind = JOB_KIND) -> str:
    """The inspect API's path about one object, through the manager API server's service proxy."""
    return _proxy_path(t, _object_path(ns, name, verb, kind))


def _proxy_path(t: Target, path: str) -> str:
    """``path`` of the inspect API through the manager API server's service proxy."""
    assert t.inspect_service is not None
    svc_ns, _, svc = t.inspect_service.partition("/")
    if not svc:
        raise UsageError(f"--inspect-service {t.inspect_service!r}: expected namespace/service:port")
    return f"/api/v1/namespaces/{segment(svc_ns)}/services/{urllib.parse.quote(svc, safe=':')}/proxy{path}"


def direct_url_ssl(url: str, ca: Path | None) -> ssl.SSLContext | bool:
    """How to check the inspect API's certificate on a direct URL; a token is never sent in clear.

    Unverified only to a loopback address (``kubectl port-forward``: the API server's own
    connection carries the tunnel); anywhere else the certificate must verify against ``ca``.
    """
    u = urllib.parse.urlsplit(url)
    if u.scheme != "https":
        raise UsageError(f"--inspect-url {url!r}: the inspect API serves https only")
    if ca is not None:
        return ssl.create_default_context(cafile=str(ca))
    host = u.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UsageError(f"--inspect-url {url!r}: not a loopback address, so its certificate must be verified: "
                         "pass --inspect-ca (or use the service proxy, the default)")
    return False


async def _inspect_call(t: Target, ns: str, name: str, verb: str, query: dict[str, Any],
                        *, stream: bool = False, kind: MirroredKind = JOB_KIND) -> aiohttp.ClientResponse:
    """A call about one object to the controller's inspect API."""
    return await _inspect_get(t, _object_path(ns, name, verb, kind), query, stream=stream)


async def _inspect_get(t: Target, path: str, query: dict[str, Any], *, stream: bool = False
                       ) -> aiohttp.ClientResponse:
    """A GET of ``path`` on the controller's inspect API, through the service proxy or a direct URL."""
    if not t.token:
        raise UsageError("the controller's inspect API needs a bearer token and this kubeconfig's user has none "
                         "(client certificates cannot be passed on): use --token, or --config with the "
                         "controller's config (operator, reads the workers directly)")
    q = {k: v for k, v in query.items() if v not in (None, False)}
    timeout = aiohttp.ClientTimeout(total=None, connect=t.manager.timeout,
                                    sock_read=None if stream else t.manager.timeout * 3)
    if t.inspect_url:
        ssl_ctx = direct_url_ssl(t.inspect_url, t.inspect_ca)
        session = aiohttp.ClientSession(timeout=timeout)
        resp = await session.get(f"{t.inspect_url.rstrip('/')}{path}",
                                 params={k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in q.items()},
                                 headers={"Authorization": f"Bearer {t.token}"}, ssl=ssl_ctx)
        resp._jobmirror_session = session  # type: ignore[attr-defined]  # closed with the response
        return resp
    if t.inspect_service is None:
        t.inspect_service = await find_inspect_service(t.manager)
    return await t.manager._send("GET", _proxy_path(t, path), query=q, timeout=timeout,
                                 headers={TOKEN_HEADER: t.token, "Accept": "*/*"})


async def _close(resp: aiohttp.ClientResponse) -> None:
    resp.release()
    session = getattr(resp, "_jobmirror_session", None)
    if session is not None:
        await session.close()


async def _inspect_error(resp: aiohttp.ClientResponse) -> str:
    raw = await resp.read()
    try:
        data = json.loads(raw)
        msg = data.get("error") or data.get("message") or raw.decode(errors="replace")
    except ValueError:
        msg = raw.decode(errors="replace")
    return f"inspect API answered {resp.status}: {str(msg).strip()[:800]}"


def target_ref(ref: str) -> tuple[MirroredKind, str]:
    """``NAME`` (a Job) or ``TYPE/NAME`` (``jobset/train``), as kubectl takes them."""
    try:
        return kinds.parse_ref(ref)
    except kinds.UnknownKind as exc:
        raise UsageError(str(exc)) from None


async def get_job(t: Target, name: str, kind: MirroredKind = JOB_KIND) -> Obj:
    ns = t.namespace or "default"
    what = kinds.singular(kind)
    try:
        check_namespace(ns, "namespace")
        check_name(name, f"{what} name")
    except InvalidName as exc:
        raise UsageError(str(exc)) from None
    try:
        job = await t.manager.get(kind.resource, ns, name)
    except ApiError as exc:
        if exc.not_found:
            raise UsageError(f"{what} {ns}/{name} not found on the manager") from None
        raise
    if kind.managed_by(job) != t.controller_name:
        raise UsageError(f"{what} {ns}/{name} is not mirrored (spec.managedBy is not {t.controller_name})")
    return job


async def describe(t: Target, args: Any, out: Callable[[str], None]) -> int:
    kind, name = target_ref(args.job)
    job = await get_job(t, name, kind)
    ns = job["metadata"]["namespace"]
    view: dict[str, Any] | None = None
    problem: str | None = None
    if ANNOTATION_CLUSTER not in annotations_of(job):
        problem = "not placed on a worker yet"
    elif t.config is not None:
        worker = annotations_of(job)[ANNOTATION_CLUSTER]
        try:
            client = await _worker_client(t, worker)
        except (reads.NotPlaced, KubeconfigError) as exc:
            problem = str(exc)
        else:
            try:
                view = await reads.worker_view(client, worker, job, kind)
            except ApiError as exc:
                problem = f"worker {worker}: {exc}"
            finally:
                await client.close()
    else:
        try:
            resp = await _inspect_call(t, ns, name, "describe", {}, kind=kind)
            try:
                if resp.status == 200:
                    view = json.loads(await resp.read())
                else:
                    problem = await _inspect_error(resp)
            finally:
                await _close(resp)
        except UsageError as exc:
            problem = str(exc)
        except (ApiError, aiohttp.ClientError) as exc:
            problem = f"inspect API unreachable: {exc}"
    evs, _ = await t.manager.list_all(EVENTS, ns, field_selector=f"involvedObject.uid={job['metadata']['uid']}")
    manager_events = reads.last_events(evs)
    fits = await job_fits(t.config, job, kind) if t.config is not None else None
    if args.output in ("json", "yaml"):
        out(render({kinds.singular(kind): f"{ns}/{name}", "state": state_of(job, kind),
                    "annotations": annotations_of(job), "status": job.get("status") or {}, "worker": view,
                    "workerProblem": problem, "room": fits, "events": manager_events}, args.output))
    else:
        out(format_describe(job, view, problem, manager_events, utcnow(), fits, kind))
    return 0


def _demands(job: Obj, kind: MirroredKind) -> list[tuple[str, Obj, int]]:
    """(label, pod template, pods at once) per template: one for a Job, one per replicatedJob of a JobSet."""
    spec = job.get("spec") or {}
    if kind is JOB_KIND:
        return [("", spec.get("template") or {}, pods_wanted(spec))]
    names = [str(r.get("name")) for r in spec.get("replicatedJobs") or [] if isinstance(r, dict)]
    demand = kind.pod_demand(job)
    return [(f"{names[i]}: " if i < len(names) else "", d.template, d.pods) for i, d in enumerate(demand)]


async def job_fits(cfg: Config, job: Obj, kind: MirroredKind = JOB_KIND) -> dict[str, str]:
    """Per configured worker, how one pod of ``job`` fits there now (the RoomAware verdict), read once;
    for a JobSet, one verdict per replicatedJob's pod template."""
    demands = [(label, shape_of_template(template), want) for label, template, want in _demands(job, kind)]
    out = {}
    for w in cfg.workers:
        try:
            client = await ClusterClient.from_kubeconfig(w.name, w.kubeconfig, context=w.context,
                                                         timeout=min(cfg.request_timeout, 5))
        except KubeconfigError as exc:
            out[w.name] = f"unknown: {exc}"
            continue
        try:
            room = await read_room(client)
        finally:
            await client.close()
        if isinstance(room, str):
            out[w.name] = f"unknown: {room}"
            continue
        verdicts = []
        for label, shape, want in demands:
            fit = worker_fit(shape, room[0], want)
            verdicts.append(label + (fit.why if fit.now else f"{'no room now' if fit.ever else 'never'}: "
                                     + fit.why.removeprefix("no room now: ")))
        out[w.name] = "; ".join(verdicts)
    return out


async def logs(t: Target, args: Any, write: Callable[[bytes], None]) -> int:
    kind, name = target_ref(args.job)
    req = reads.LogRequest(container=args.container, index=args.index, follow=args.follow,
                           previous=args.previous, tail_lines=args.tail,
                           replicated_job=getattr(args, "replicated_job", None))
    problem = req.problem(kind)
    if problem:
        raise UsageError(problem)
    job = await get_job(t, name, kind)
    ns = job["metadata"]["namespace"]
    if t.config is not None:
        worker = reads.where(job, kind).worker
        client = await _worker_client(t, worker)
        try:
            try:
                pod, resp = await reads.open_logs(client, job, req, kind)
            except ApiError as exc:
                print(f"error: worker {worker}: {exc.message} {KWOK_NOTE}", file=sys.stderr)
                return 1
            wrote = 0
            async for chunk in reads.chunks(resp):
                wrote += len(chunk)
                write(chunk)
            if not wrote:
                summary = reads.pod_summary(pod)
                why = (f"{summary['phase']} on node {summary['node']}" if summary["node"]
                       else f"{summary['phase']}, not on a node yet")
                print(EMPTY_NOTE.format(pod=f"{worker}/{summary['name']}", why=why), file=sys.stderr)
        finally:
            await client.close()
        return 0
    resp = await _inspect_call(t, ns, name, "logs",
                               {"container": req.container, "index": req.index, "follow": req.follow,
                                "previous": req.previous, "tailLines": req.tail_lines,
                                "replicatedJob": req.replicated_job}, stream=True, kind=kind)
    try:
        if resp.status != 200:
            msg = await _inspect_error(resp)
            note = f" {KWOK_NOTE}" if resp.status == 502 else ""
            print(f"error: {msg}{note}", file=sys.stderr)
            return 1
        wrote = 0
        async for chunk in resp.content.iter_any():
            wrote += len(chunk)
            write(chunk)
        if not wrote:
            print(EMPTY_NOTE.format(pod=resp.headers.get("X-Jobmirror-Pod", "?"), why="not started yet, or silent"),
                  file=sys.stderr)
    finally:
        await _close(resp)
    return 0


def _seconds(v: object) -> str:
    if not isinstance(v, int | float):
        return "-"
    return f"{v:.0f}s" if v < 120 else f"{v / 60:.0f}m" if v < 7200 else f"{v / 3600:.1f}h"


def format_queue(rows: list[dict[str, Any]], waiting: int) -> str:
    """The waiting line as a table, in the order Jobs would leave it (POS counts every waiting Job)."""
    if not rows:
        return f"no Job of yours waits ({waiting} waiting in all)"
    head = ("POS", "KIND", "NAMESPACE", "NAME", "TENANT", "PRIORITY", "SHARE", "WAITED", "STARTS-IN", "WHY")
    lines = [head] + [(str(r["position"]), r["kind"], r["namespace"], r["name"], r["tenant"], str(r["priority"]),
                       f"{r['share']:.3f}", _seconds(r["waitedSeconds"]), _seconds(r["startsInSeconds"]),
                       r["why"]) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    table = ["  ".join(c.ljust(w) for c, w in zip(line[:-1], widths, strict=True)) + "  " + line[-1] for line in lines]
    return "\n".join(table) + f"\n{len(rows)} shown, {waiting} waiting in all"


async def queue(t: Target, args: Any, out: Callable[[str], None]) -> int:
    """The controller's waiting line (in memory: read through the inspect API, as the caller)."""
    path = "/v1/queue" if t.namespace is None else f"/v1/namespaces/{segment(t.namespace)}/queue"
    resp = await _inspect_get(t, path, {"tenant": args.tenant})
    try:
        if resp.status != 200:
            raise UsageError(await _inspect_error(resp))
        data = json.loads(await resp.read())
    finally:
        await _close(resp)
    rows, waiting = data.get("items") or [], int(data.get("waiting") or 0)
    out(render(rows, args.output) if args.output else format_queue(rows, waiting))
    return 0


def add_kube_flags(p: Any) -> None:
    p.add_argument("--kubeconfig", help="the manager's kubeconfig (default $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    p.add_argument("--config", type=Path, default=None,
                   help="the controller's config file: operator mode, worker details read with its worker "
                        "kubeconfigs")
    p.add_argument("--controller-name", default=DEFAULT_CONTROLLER_NAME, help="the spec.managedBy value mirrored")
    p.add_argument("--token", help="bearer token for the inspect API (default: the kubeconfig user's)")
    p.add_argument("--inspect-service", default=None,
                   help="namespace/https:service:port of the controller's inspect API, reached through the "
                        "manager API server's service proxy (default: the one Service labelled "
                        f"{INSPECT_SERVICE_SELECTOR} with a port named {INSPECT_PORT}; if you may not list "
                        f"Services, {DEFAULT_INSPECT_SERVICE})")
    p.add_argument("--inspect-url", help="reach the inspect API directly instead, https:// (e.g. after kubectl "
                                         "port-forward; the certificate is verified with --inspect-ca, or not at "
                                         "all for a loopback address, where the tunnel is the API server's)")
    p.add_argument("--inspect-ca", type=Path, default=None, help="CA file that signed the inspect API's certificate")
    p.add_argument("--request-timeout", type=float, default=10.0, help="seconds per call to a cluster")
