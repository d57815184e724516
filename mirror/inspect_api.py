"""The controller's read-only inspect API: ``describe`` and ``logs`` for users without worker credentials.

A user may read what the controller sees of a copy only for Jobs they may ``get`` on the
manager. Each request carries the user's bearer token; the controller asks the manager's
API server who it is (TokenReview) and whether that user may ``get`` the Job
(SubjectAccessReview), then reads the worker with its own worker credentials.

Served over HTTPS (mirror/inspect_tls.py) and reached through the manager API server's
service proxy (``/api/v1/namespaces/jobmirror-system/services/https:jobmirror-inspect:inspect/proxy/...``): the
API server authenticates the caller for the proxy and then *removes* the ``Authorization``
header (verified against kube-apiserver 1.35), so the plugin sends the token again in
``X-Jobmirror-Token``; a direct call (port-forward) may use ``Authorization: Bearer`` too.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, Obj, Resource
from mirror import inspect, metrics

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


def access_review(user: Obj, namespace: str, name: str) -> Obj:
    """A SubjectAccessReview: may this authenticated user ``get`` this manager Job?"""
    spec: Obj = {
        "user": user.get("username", ""),
        "groups": user.get("groups") or [],
        "resourceAttributes": {"verb": "get", "group": "batch", "version": "v1", "resource": "jobs",
                               "namespace": namespace, "name": name},
    }
    if user.get("uid"):
        spec["uid"] = user["uid"]
    if user.get("extra"):
        spec["extra"] = user["extra"]
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def log_request(query: Any) -> inspect.LogRequest:
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

    return inspect.LogRequest(container=query.get("container") or None, index=integer("index"),
                              follow=flag("follow"), previous=flag("previous"), tail_lines=integer("tailLines"))


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


# -- server ---------------------------------------------------------------------------------------


@web.middleware
async def _count(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                 ) -> web.StreamResponse:
    """Requests by verb and status code (any other path counts as ``other``: bounded labels)."""
    verb = request.path.rsplit("/", 1)[-1]
    try:
        resp = await handler(request)
    except web.HTTPException as exc:
        metrics.INSPECT_REQUESTS.labels(verb if verb in ("describe", "logs") else "other", str(exc.status)).inc()
        raise
    metrics.INSPECT_REQUESTS.labels(verb if verb in ("describe", "logs") else "other", str(resp.status)).inc()
    return resp


class InspectApi:
    def __init__(self, address: str, manager: ClusterClient, workers: dict[str, ClusterClient],
                 controller_name: str, ssl_context: ssl.SSLContext | None = None) -> None:
        host, _, port = address.rpartition(":")
        self.host = host or "0.0.0.0"
        self.port = int(port)
        self.manager = manager
        self.workers = workers
        self.controller_name = controller_name
        self.ssl_context = ssl_context
        self._runner: web.AppRunner | None = None

    async def _authorized_job(self, req: web.Request) -> Obj | web.Response:
        """The manager Job of the request if the caller may ``get`` it, else the refusal to send."""
        ns, name = req.match_info["namespace"], req.match_info["name"]
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
            user = st.get("user") or {}
            sar = await self.manager.create(SUBJECTACCESSREVIEWS, None, access_review(user, ns, name))
        except ApiError as exc:
            log.warning("inspect API: reviewing a caller failed: %s", exc)
            return _error(503, f"could not review the caller: {exc}")
        if not (sar.get("status") or {}).get("allowed"):
            log.info("inspect API: %s may not get job %s/%s: refused", user.get("username"), ns, name)
            return _error(403, f"user {user.get('username')!r} may not get jobs.batch {ns}/{name} on the manager")
        try:
            job = await self.manager.get(JOBS, ns, name)
        except ApiError as exc:
            return _error(exc.status or 503, exc.message)
        if (job.get("spec") or {}).get("managedBy") != self.controller_name:
            return _error(404, f"job {ns}/{name} is not mirrored by {self.controller_name}")
        log.info("inspect API: %s %s job %s/%s", user.get("username"), req.path.rsplit("/", 1)[-1], ns, name)
        return job

    def _worker_of(self, job: Obj) -> tuple[str, ClusterClient] | web.Response:
        try:
            w = inspect.where(job)
        except inspect.NotPlaced as exc:
            return _error(404, str(exc))
        client = self.workers.get(w.worker)
        if client is None:
            return _error(404, f"worker {w.worker} is not in this controller's configuration")
        return w.worker, client

    async def _authorized_copy(self, req: web.Request) -> tuple[Obj, str, ClusterClient] | web.Response:
        """The caller's Job with the worker that holds its copy, or the refusal to send."""
        job = await self._authorized_job(req)
        if isinstance(job, web.Response):
            return job
        found = self._worker_of(job)
        if isinstance(found, web.Response):
            return found
        return job, *found

    async def describe(self, req: web.Request) -> web.Response:
        found = await self._authorized_copy(req)
        if isinstance(found, web.Response):
            return found
        job, name, client = found
        try:
            return web.json_response(await inspect.worker_view(client, name, job))
        except ApiError as exc:
            return _error(502, f"worker {name}: {exc}")

    async def logs(self, req: web.Request) -> web.StreamResponse:
        try:
            lr = log_request(req.query)
        except ValueError as exc:
            return _error(400, str(exc))
        found = await self._authorized_copy(req)
        if isinstance(found, web.Response):
            return found
        job, name, client = found
        try:
            pod, upstream = await inspect.open_logs(client, job, lr)
        except inspect.NotPlaced as exc:
            return _error(404, str(exc))
        except ApiError as exc:
            return _error(502, f"worker {name}: {exc.message}")
        resp = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8",
                                           "X-Jobmirror-Pod": f"{name}/{pod['metadata']['name']}"})
        await resp.prepare(req)
        async for chunk in inspect.chunks(upstream):
            await resp.write(chunk)
        await resp.write_eof()
        return resp

    async def start(self) -> int:
        app = web.Application(middlewares=[_count])
        base = "/v1/namespaces/{namespace}/jobs/{name}"
        app.router.add_get(f"{base}/describe", self.describe)
        app.router.add_get(f"{base}/logs", self.logs)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.ssl_context)
        await site.start()
        sockets = getattr(site._server, "sockets", None)
        if self.port == 0 and sockets:
            self.port = sockets[0].getsockname()[1]
        log.info("inspect API on %s://%s:%d", "https" if self.ssl_context else "http", self.host, self.port)
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()



