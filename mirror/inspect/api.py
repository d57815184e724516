"""The controller's read-only inspect API: ``describe`` and ``logs`` for users without worker credentials.

A user may read what the controller sees of a copy only for Jobs they may ``get`` on the
manager. Each request carries the user's bearer token; the controller asks the manager's
API server who it is (TokenReview) and whether that user may ``get`` the Job
(SubjectAccessReview), then reads the worker with its own worker credentials.

Served over HTTPS (mirror/inspect/tls.py) and reached through the manager API server's
service proxy (``/api/v1/namespaces/jobmirror-system/services/https:jobmirror-inspect:inspect/proxy/...``): the
API server authenticates the caller for the proxy and then *removes* the ``Authorization``
header (verified against kube-apiserver 1.35), so the plugin sends the token again in
``X-Jobmirror-Token``; a direct call (port-forward) may use ``Authorization: Bearer`` too.

What a caller needs (issue 19): ``describe`` — ``get`` on the Job; ``logs`` — ``get`` on the
Job and ``get pods/log`` in its namespace, as ``kubectl logs job/NAME`` needs on one cluster:
the copy's pods are the Job's pods, and an RBAC role that withholds pod logs must keep
withholding them through us. By the same rule (issue 32), ``describe`` shows the worker-side
details — the pods with their node names, the events of the copy and its pods — only to a
caller who may ``get pods`` in the namespace; anyone else gets a summary: the worker, the
copy's name and status, what the manager Job says anyway. The namespace and name are validated before anything is
asked, and the Job served is checked to be the one authorised.

The worker listing (``/v1/workers``, ``/v1/namespaces/NS/workers``) is the controller's view of
each worker — healthy, slow, STALLED (answers, runs none of our copies), UNHEALTHY, since when and
why — for ``kubectl jobmirror status``: to whoever may list Jobs in that namespace, or in every
namespace for ``/v1/workers``, which alone also carries the workers' connection errors.

JobSets (``/v1/namespaces/NS/jobsets/NAME/...``) follow the same rules with ``get`` on the JobSet
(``jobsets.jobset.x-k8s.io``) in place of the Job's; their pods are the Job's pods as far as RBAC
goes (``pods``, ``pods/log`` in the namespace). Log streams run on their
own connection pool per worker, capped in total and per user, and are cut when the reader
stalls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from kruntime.client import ApiError, ClusterClient
from kruntime.names import InvalidName, check_name, check_namespace
from kruntime.resources import JOBS, Obj, Resource
from mirror import metrics
from mirror.inspect import kinds, reads
from mirror.jobs.kind import JOB_KIND
from mirror.kinds import MirroredKind
from mirror.placer import QueueEntry

log = logging.getLogger(__name__)

TOKEN_HEADER = "X-Jobmirror-Token"
TOKENREVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False)
SUBJECTACCESSREVIEWS = Resource("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview",
                                namespaced=False)


# -- pure -----------------------------------------------------------------------------------------


def token_from(headers: Any) -> str | None:
    """The caller's token: ours first (the service proxy strips Authorization), then the standard header."""
    token = (headers.get(TOKEN_HEADER) or "").strip()
    if token:
        return str(token)
    auth = headers.get("Authorization") or ""
    if auth[:7].lower() == "bearer ":
        return str(auth[7:].strip()) or None
    return None


def job_access(namespace: str, name: str, resource: Resource = JOBS) -> Obj:
    """``get`` on one manager object (a Job unless ``resource`` says otherwise)."""
    return {"verb": "get", "group": resource.group, "version": resource.version, "resource": resource.plural,
            "namespace": namespace, "name": name}


def pod_log_access(namespace: str) -> Obj:
    """``get pods/log`` in a namespace (no name: the copy's pods are named on the worker)."""
    return {"verb": "get", "group": "", "version": "v1", "resource": "pods", "subresource": "log",
            "namespace": namespace}


def pod_read_access(namespace: str) -> Obj:
    """``get pods`` in a namespace: what describe's worker-side details (pods, nodes, events) need."""
    return {"verb": "get", "group": "", "version": "v1", "resource": "pods", "namespace": namespace}


def withheld(attrs: Obj) -> str:
    """What a describe summary says in place of the details the caller may not see."""
    return (f"pods, their nodes and the events of the copy and its pods are shown to users who may "
            f"{describe_access(attrs)} on the manager")


def list_access(namespace: str | None, resource: Resource = JOBS) -> Obj:
    """``list`` of a kind in a namespace (None: in every namespace): who may see that namespace's waiting line."""
    return {"verb": "list", "group": resource.group, "version": resource.version, "resource": resource.plural,
            **({"namespace": namespace} if namespace else {})}


def queue_rows(entries: Sequence[QueueEntry], namespace: str | None, tenant: str | None) -> list[Obj]:
    """The waiting line as the queue view shows it: the Jobs of ``namespace`` (None: all) and ``tenant``
    (None: all), each with its position in the whole line (others' Jobs counted, never shown)."""
    rows = []
    for position, e in enumerate(entries, 1):
        ns, _, name = e.key.partition("/")
        if (namespace is None or ns == namespace) and (tenant is None or e.tenant == tenant):
            rows.append({"position": position, "kind": e.kind, "namespace": ns, "name": name, "tenant": e.tenant,
                         "priority": e.priority, "share": round(e.share, 4), "waitedSeconds": round(e.waited, 1),
                         "startsInSeconds": None if e.starts_in is None else round(e.starts_in, 1), "why": e.why})
    return rows


WITHHELD_ERROR = "details withheld: shown to users who may list jobs.batch in every namespace"


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def worker_rows(described: Sequence[Obj], now: datetime, *, full: bool) -> list[Obj]:
    """The controller's view of each worker (:meth:`mirror.workers.WorkerCluster.describe`) as the
    worker listing serves it: one ``health`` word, since when and why, the first that applies of
    UNHEALTHY (unreachable, unconfigured, not admitted), STALLED (answers, runs none of our copies),
    slow (answers slowly: takes new Jobs only when no other can), healthy.

    ``full``: the caller may list Jobs in every namespace (an operator); otherwise a worker's
    connection error (it may name addresses) is withheld, its health word and the stall are not.
    """
    rows = []
    for d in described:
        stalled, slow = d.get("stalled"), d.get("slow")
        row: Obj = {"name": d["name"], "health": "healthy", "since": None, "reason": None,
                    "unfinished": d.get("unfinished", 0), "stalled": stalled, "stalledSince": d.get("stalledSince"),
                    "slow": slow}
        if not d.get("healthy"):
            row.update(health="UNHEALTHY", since=_stamp(now - timedelta(seconds=float(d.get("unhealthyFor") or 0))),
                       reason=d.get("lastError") if full else WITHHELD_ERROR)
        elif stalled:
            row.update(health="STALLED", since=d.get("stalledSince"), reason=stalled)
        elif slow:
            row.update(health="slow", reason=slow)
        rows.append(row)
    return rows


def describe_access(attrs: Obj) -> str:
    what = f"{attrs['resource']}/{attrs['subresource']}" if attrs.get("subresource") else attrs["resource"]
    group = f".{attrs['group']}" if attrs.get("group") else ""
    where = (f"{attrs['namespace']}/{attrs['name']}" if attrs.get("name") else
             f"in namespace {attrs['namespace']}" if attrs.get("namespace") else "in every namespace")
    return f"{attrs['verb']} {what}{group} {where}"


def access_review(user: Obj, attrs: Obj) -> Obj:
    """A SubjectAccessReview: may this authenticated user do ``attrs`` on the manager?"""
    spec: Obj = {
        "user": user.get("username", ""),
        "groups": user.get("groups") or [],
        "resourceAttributes": attrs,
    }
    if user.get("uid"):
        spec["uid"] = user["uid"]
    if user.get("extra"):
        spec["extra"] = user["extra"]
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def log_request(query: Any) -> reads.LogRequest:
    """Query parameters to a LogRequest; ValueError names a bad one."""
    def flag(k: str) -> bool:
        return str(query.get(k, "")).lower() in ("1", "true", "yes")

    def integer(k: str) -> int | None:
        v = query.get(k)
        if v in (None, ""):
            return None
        try:
            return int(v)
        except ValueError:
            raise ValueError(f"query parameter {k}={v!r} is not an integer") from None

    return reads.LogRequest(container=query.get("container") or None, index=integer("index"),
                            follow=flag("follow"), previous=flag("previous"), tail_lines=integer("tailLines"),
                            replicated_job=query.get("replicatedJob") or None)


def kind_of(match_info: Any) -> MirroredKind:
    """The kind a request's path names (``jobs`` when the route has no ``plural``)."""
    return kinds.by_plural(match_info.get("plural", "jobs")) or JOB_KIND


def target_of(match_info: Any) -> tuple[str, str]:
    """The namespace and object name of a request, validated as the API server would (InvalidName
    says which is bad): a value with ``/``, ``..`` or ``%`` never reaches an authorisation or a path."""
    return (check_namespace(match_info["namespace"], "namespace"),
            check_name(match_info["name"], f"{kinds.singular(kind_of(match_info))} name"))


def is_the_authorised_job(job: Obj, namespace: str, name: str) -> bool:
    md = job.get("metadata") or {}
    return bool(md.get("namespace") == namespace and md.get("name") == name)


@dataclass
class StreamGate:
    """Caps on open log streams, in total and per user; ``enter`` says why it refuses."""

    total: int
    per_user: int
    open: Counter[str]

    @classmethod
    def of(cls, total: int, per_user: int) -> StreamGate:
        return cls(total, per_user, Counter())

    def enter(self, user: str) -> str | None:
        if sum(self.open.values()) >= self.total:
            return f"the inspect API has {self.total} log streams open, its limit: retry later"
        if self.open[user] >= self.per_user:
            return f"user {user!r} has {self.per_user} log streams open, the per-user limit: close one first"
        self.open[user] += 1
        return None

    def leave(self, user: str) -> None:
        self.open[user] -= 1
        if self.open[user] <= 0:
            del self.open[user]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


# -- server ---------------------------------------------------------------------------------------


_VERBS = ("describe", "logs", "queue", "workers")


@web.middleware
async def _count(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                 ) -> web.StreamResponse:
    """Requests by verb and status code (any other path counts as ``other``: bounded labels)."""
    verb = request.path.rsplit("/", 1)[-1]
    try:
        resp = await handler(request)
    except web.HTTPException as exc:
        metrics.INSPECT_REQUESTS.labels(verb if verb in _VERBS else "other", str(exc.status)).inc()
        raise
    metrics.INSPECT_REQUESTS.labels(verb if verb in _VERBS else "other", str(resp.status)).inc()
    return resp


@dataclass(frozen=True)
class Caller:
    username: str
    job: Obj  # the manager object asked about (a Job, or another mirrored kind)
    #: the TokenReview's user, for further access reviews
    user: Obj
    kind: MirroredKind = JOB_KIND


class InspectApi:
    """``workers`` are the inspect API's own clients (ClusterClient.sibling): a user's streams
    never take the connections of the reconciler, the watches or the health probes."""

    def __init__(self, address: str, manager: ClusterClient, workers: dict[str, ClusterClient],
                 controller_name: str, ssl_context: ssl.SSLContext | None = None, *,
                 max_streams: int = 32, max_streams_per_user: int = 4, write_timeout: float = 30.0,
                 queue: Callable[[], list[QueueEntry]] | None = None,
                 fleet: Callable[[], list[Obj]] | None = None) -> None:
        host, _, port = address.rpartition(":")
        self.host = host or "0.0.0.0"
        self.port = int(port)
        self.manager = manager
        self.workers = workers
        self.controller_name = controller_name
        self.ssl_context = ssl_context
        self.streams = StreamGate.of(max_streams, max_streams_per_user)
        self.write_timeout = write_timeout
        self.queue_of = queue
        #: each worker as the controller sees it (WorkerCluster.describe): the worker listing
        self.fleet = fleet
        self._runner: web.AppRunner | None = None

    async def _authorized_job(self, req: web.Request, *, logs: bool = False) -> Caller | web.Response:
        """The manager object of the request if the caller may read it (and its logs), else the refusal to send."""
        kind = kind_of(req.match_info)
        what = kinds.singular(kind)
        try:
            ns, name = target_of(req.match_info)
        except InvalidName as exc:
            return _error(400, str(exc))
        user = await self._reviewed(req, [job_access(ns, name, kind.resource)] + ([pod_log_access(ns)] if logs else []))
        if isinstance(user, web.Response):
            return user
        try:
            job = await self.manager.get(kind.resource, ns, name)
        except ApiError as exc:
            return _error(exc.status or 503, exc.message)
        if not is_the_authorised_job(job, ns, name):  # belt and braces: the path cannot move, check anyway
            log.error("inspect API: asked for %s %s/%s, the manager answered with %s", what, ns, name,
                      job.get("metadata"))
            return _error(502, f"the manager answered with another object than {what} {ns}/{name}")
        if kind.managed_by(job) != self.controller_name:
            return _error(404, f"{what} {ns}/{name} is not mirrored by {self.controller_name}")
        log.info("inspect API: %s %s %s %s/%s", user.get("username"), req.path.rsplit("/", 1)[-1], what, ns, name)
        return Caller(str(user.get("username") or ""), job, user, kind)

    async def _reviewed(self, req: web.Request, needs: list[Obj]) -> Obj | web.Response:
        """The caller's user if their token is valid and they may do each of ``needs``, else the refusal."""
        token = token_from(req.headers)
        if not token:
            return _error(401, f"no bearer token (send it in {TOKEN_HEADER} or Authorization)")
        try:
            review = await self.manager.create(TOKENREVIEWS, None, {
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
            st = review.get("status") or {}
            if not st.get("authenticated"):
                why = st.get("error") or "unauthenticated"
                return _error(401, f"token not accepted by the manager API server: {why}")
            user: Obj = st.get("user") or {}
            for attrs in needs:
                if not await self._may(user, attrs):
                    log.info("inspect API: %s may not %s: refused", user.get("username"), describe_access(attrs))
                    return _error(403, f"user {user.get('username')!r} may not {describe_access(attrs)} "
                                       "on the manager")
        except ApiError as exc:
            log.warning("inspect API: reviewing a caller failed: %s", exc)
            return _error(503, f"could not review the caller: {exc}")
        return user

    async def _may_list(self, req: web.Request, ns: str | None) -> web.Response | None:
        """None when the caller may list Jobs in ``ns`` (None: in every namespace), else the refusal."""
        if ns is not None:
            try:
                check_namespace(ns)
            except InvalidName as exc:
                return _error(400, str(exc))
        user = await self._reviewed(req, [list_access(ns)])
        return user if isinstance(user, web.Response) else None

    async def queue(self, req: web.Request) -> web.Response:
        """The waiting line: a namespace's Jobs to whoever may list Jobs there, every Job to whoever may
        list them in every namespace; positions count the whole line."""
        ns = req.match_info.get("namespace")
        refused = await self._may_list(req, ns)
        if refused is not None:
            return refused
        if self.queue_of is None:
            return _error(404, "this controller keeps no waiting line (placement is not RoomAware and no "
                               "tenant has a quota)")
        entries = self.queue_of()
        rows = queue_rows(entries, ns, req.query.get("tenant") or None)
        return web.json_response({"waiting": len(entries), "items": rows})

    async def workers_listing(self, req: web.Request) -> web.Response:
        """Each worker's health as the controller sees it (healthy, slow, STALLED, UNHEALTHY: since when
        and why). To whoever may list Jobs in the namespace asked (``/v1/namespaces/NS/workers``) or in
        every namespace (``/v1/workers``, which also shows the workers' connection errors)."""
        ns = req.match_info.get("namespace")
        refused = await self._may_list(req, ns)
        if refused is not None:
            return refused
        described = self.fleet() if self.fleet is not None else []
        return web.json_response({"items": worker_rows(described, datetime.now(UTC), full=ns is None)})

    async def _may(self, user: Obj, attrs: Obj) -> bool:
        """One SubjectAccessReview on the manager (ApiError when it cannot be asked)."""
        sar = await self.manager.create(SUBJECTACCESSREVIEWS, None, access_review(user, attrs))
        return bool((sar.get("status") or {}).get("allowed"))

    def _worker_of(self, job: Obj, kind: MirroredKind) -> tuple[str, ClusterClient] | web.Response:
        try:
            w = reads.where(job, kind)
        except reads.NotPlaced as exc:
            return _error(404, str(exc))
        client = self.workers.get(w.worker)
        if client is None:
            return _error(404, f"worker {w.worker} is not in this controller's configuration")
        return w.worker, client

    async def _authorized_copy(self, req: web.Request, *, logs: bool = False
                               ) -> tuple[Caller, str, ClusterClient] | web.Response:
        """The caller and their Job with the worker that holds its copy, or the refusal to send."""
        caller = await self._authorized_job(req, logs=logs)
        if isinstance(caller, web.Response):
            return caller
        found = self._worker_of(caller.job, caller.kind)
        if isinstance(found, web.Response):
            return found
        return caller, *found

    async def describe(self, req: web.Request) -> web.Response:
        found = await self._authorized_copy(req)
        if isinstance(found, web.Response):
            return found
        caller, name, client = found
        job = caller.job
        details = pod_read_access(job["metadata"]["namespace"])
        try:
            full = await self._may(caller.user, details)
        except ApiError as exc:
            log.warning("inspect API: reviewing a caller failed: %s", exc)
            return _error(503, f"could not review the caller: {exc}")
        try:
            if full:
                return web.json_response(await reads.worker_view(client, name, job, caller.kind))
            log.info("inspect API: %s may not %s: describe summary only", caller.username, describe_access(details))
            return web.json_response(await reads.worker_summary(client, name, job, withheld(details), caller.kind))
        except ApiError as exc:
            return _error(502, f"worker {name}: {exc}")

    async def logs(self, req: web.Request) -> web.StreamResponse:
        try:
            lr = log_request(req.query)
        except ValueError as exc:
            return _error(400, str(exc))
        problem = lr.problem(kind_of(req.match_info))
        if problem:
            return _error(400, problem)
        found = await self._authorized_copy(req, logs=True)
        if isinstance(found, web.Response):
            return found
        caller, name, client = found
        refused = self.streams.enter(caller.username)
        if refused:
            metrics.INSPECT_STREAMS_REFUSED.inc()
            log.info("inspect API: logs for %s refused: %s", caller.username, refused)
            return _error(429, refused)
        metrics.INSPECT_STREAMS.inc()
        try:
            return await self._stream_logs(req, caller, lr, name, client)
        finally:
            metrics.INSPECT_STREAMS.dec()
            self.streams.leave(caller.username)

    async def _stream_logs(self, req: web.Request, caller: Caller, lr: reads.LogRequest, name: str,
                           client: ClusterClient) -> web.StreamResponse:
        job = caller.job
        try:
            pod, upstream = await reads.open_logs(client, job, lr, caller.kind)
        except reads.NotPlaced as exc:
            return _error(404, str(exc))
        except ApiError as exc:
            return _error(502, f"worker {name}: {exc.message}")
        stream = reads.chunks(upstream)
        async with contextlib.aclosing(stream):  # the worker's stream is released however this ends
            resp = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8",
                                               "X-Jobmirror-Pod": f"{name}/{pod['metadata']['name']}"})
            await resp.prepare(req)
            async for chunk in stream:
                try:
                    async with asyncio.timeout(self.write_timeout):
                        await resp.write(chunk)
                except TimeoutError:
                    metrics.INSPECT_STREAMS_CUT.inc()
                    log.info("inspect API: a log reader of %s/%s took over %.0f s to accept data: stream cut",
                             job["metadata"]["namespace"], job["metadata"]["name"], self.write_timeout)
                    if req.transport is not None:
                        req.transport.close()
                    return resp
                except ConnectionResetError:  # the reader left: nothing to finish
                    return resp
            await resp.write_eof()
        return resp

    async def start(self) -> int:
        app = web.Application(middlewares=[_count])
        plurals = "|".join(k.resource.plural for k in kinds.INSPECTED)
        base = f"/v1/namespaces/{{namespace}}/{{plural:{plurals}}}/{{name}}"
        app.router.add_get(f"{base}/describe", self.describe)
        app.router.add_get(f"{base}/logs", self.logs)
        app.router.add_get("/v1/queue", self.queue)
        app.router.add_get("/v1/namespaces/{namespace}/queue", self.queue)
        app.router.add_get("/v1/workers", self.workers_listing)
        app.router.add_get("/v1/namespaces/{namespace}/workers", self.workers_listing)
        # A reader that leaves cancels its handler, which releases the worker's stream at once (a
        # follow stream with no new lines would otherwise never notice).
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.ssl_context)
        await site.start()
        sockets = getattr(site._server, "sockets", None)
        if self.port == 0 and sockets:
            self.port = sockets[0].getsockname()[1]
        log.info("inspect API on %s://%s:%d", "https" if self.ssl_context else "http", self.host, self.port)
        return self.port

    async def stop(self) -> None:
        """Stops serving and closes the clients it was given (they are its own pools)."""
        if self._runner is not None:
            await self._runner.cleanup()
        for c in [self.manager, *self.workers.values()]:
            await c.close()



