"""The simulated clusters over HTTPS (plain HTTP when started without TLS): one aiohttp app per
cluster, each on its own 127.0.0.1 port.

Paths, verbs, Status bodies and watch streams (chunked, one JSON event per line, 410 as an ERROR
event in a 200 stream, bookmarks when asked) are kube-apiserver's, so the controller's own client
and informers run unchanged against it. Any bearer token is accepted. ``/_fleetsim/stats`` tells
what each cluster holds and served, and this process's own CPU and memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import socket
import ssl
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import orjson
from aiohttp import web

from bench.fleetsim import kinds
from bench.fleetsim.kinds import PODS, Kind
from bench.fleetsim.store import Entry, Store, StoreError, event_line, review_answer
from kruntime.resources import Obj

VERSION = "v1.37.2-fleetsim"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: a watch without timeoutSeconds lasts this long (the real server picks 30-60 min)
DEFAULT_WATCH_SECONDS = 1800.0
_JSON = "application/json"


@dataclass
class Cluster:
    """One simulated cluster: its store, its listening socket and what it served."""

    name: str
    store: Store
    sock: socket.socket | None = None
    #: served over TLS (as every real API server is), else plain HTTP
    tls: bool = False
    #: requests by verb (GET, LIST, WATCH, CREATE, UPDATE, PATCH, DELETE, and OTHER for the rest)
    requests: Counter[str] = field(default_factory=Counter)
    #: requests by (verb, resource)
    by_resource: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: answers by HTTP code (a 404 or 405 the controller met shows here)
    codes: Counter[int] = field(default_factory=Counter)

    @property
    def port(self) -> int:
        assert self.sock is not None
        return int(self.sock.getsockname()[1])

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def describe(self) -> Obj:
        s = self.store
        return {"url": self.url, "objects": s.counts(), "requests": dict(self.requests),
                "requestsByResource": {f"{v} {r}": n for (v, r), n in sorted(self.by_resource.items())},
                "codes": {str(c): n for c, n in sorted(self.codes.items())}, "watches": s.watch_count(),
                "writes": {"creates": s.stats.creates, "updates": s.stats.updates, "deletes": s.stats.deletes,
                           "createdByResource": dict(s.stats.by_kind)},
                "resourceVersion": s.rv, "historyEvents": len(s.history), "compactedAt": s.compacted}


@dataclass(frozen=True)
class Target:
    kind: Kind
    namespace: str | None
    name: str | None
    subresource: str | None


def parse_target(segs: list[str]) -> Target | None:
    """What a resource path names, or None when the simulation serves no such resource."""
    if segs[0] == "api" and len(segs) >= 3:
        gv, rest = segs[1], segs[2:]
    elif segs[0] == "apis" and len(segs) >= 4:
        gv, rest = f"{segs[1]}/{segs[2]}", segs[3:]
    else:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        return None
    kind = kinds.BY_PATH.get((gv, rest[0]))
    if kind is None or (namespace is not None and not kind.namespaced):
        return None
    return Target(kind, namespace, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None)


def _reply(code: int, body: bytes) -> web.Response:
    return web.Response(status=code, body=body, content_type=_JSON)


def _error(exc: StoreError) -> web.Response:
    return _reply(exc.code, orjson.dumps(exc.status()))


def _not_served(path: str) -> web.Response:
    return _error(StoreError(404, "NotFound", f"the server could not find the requested resource ({path})"))


def process_usage() -> Obj:
    """This process's CPU seconds and resident memory, from /proc/self."""
    t = os.times()
    out: Obj = {"cpuSeconds": round(t.user + t.system, 2)}
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out["rssMiB" if line.startswith("VmRSS") else "peakRssMiB"] = round(int(line.split()[1]) / 1024, 1)
    return out


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return {}
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise StoreError(400, "BadRequest", f"the request body is not JSON: {exc}") from exc


class FleetServer:
    """Serves every cluster of the fleet from this process's one event loop."""

    def __init__(self, clusters: list[Cluster], *, bookmark_interval: float = 60.0,
                 stats: Callable[[], Obj] | None = None) -> None:
        self.clusters = clusters
        self.bookmark_interval = bookmark_interval
        #: what ``/_fleetsim/stats`` adds (the fake Job controllers' counts)
        self.extra_stats = stats
        self.started = time.monotonic()
        self._runners: list[web.AppRunner] = []

    async def start(self, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> None:
        for cluster in self.clusters:
            cluster.tls = tls is not None
            sock = cluster.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, 0))
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_route("*", "/{tail:.*}", self._handler(cluster))
            runner = web.AppRunner(app, access_log=None, handle_signals=False, handler_cancellation=True)
            await runner.setup()
            await web.SockSite(runner, sock, ssl_context=tls).start()
            self._runners.append(runner)

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()

    def stats(self) -> Obj:
        return {"simulation": True, "pid": os.getpid(), "uptimeSeconds": round(time.monotonic() - self.started, 1),
                "process": process_usage(), "clusters": {c.name: c.describe() for c in self.clusters},
                **(self.extra_stats() if self.extra_stats is not None else {})}

    def _handler(self, cluster: Cluster) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            path = request.raw_path.split("?", 1)[0]
            segs = [unquote(s) for s in path.strip("/").split("/")]
            resp = await self._serve(request, cluster, path, segs)
            cluster.codes[resp.status] += 1
            return resp

        return handle

    async def _serve(self, request: web.Request, cluster: Cluster, path: str, segs: list[str]) -> web.StreamResponse:
        try:
            fixed = self._fixed(cluster, path, segs)
            if fixed is not None:
                cluster.requests["GET"] += 1
                return fixed
            target = parse_target(segs)
            if target is None:
                cluster.requests["OTHER"] += 1
                return _not_served(path)
            return await self._resource(request, cluster, target)
        except StoreError as exc:
            return _error(exc)
        except ValueError as exc:  # a query parameter that is no number
            return _error(StoreError(400, "BadRequest", f"invalid request: {exc}"))

    def _fixed(self, cluster: Cluster, path: str, segs: list[str]) -> web.Response | None:
        """Health, version, discovery and the simulation's own pages; None for resource paths."""
        if path in ("/readyz", "/livez", "/healthz"):
            return web.Response(text="ok")
        if path == "/version":
            major, minor = VERSION[1:].split(".")[:2]
            return _reply(200, orjson.dumps({"major": major, "minor": minor, "gitVersion": VERSION,
                                             "gitCommit": "fleetsim", "gitTreeState": "clean",
                                             "platform": "linux/amd64"}))
        if path == "/_fleetsim/stats":
            return _reply(200, orjson.dumps(self.stats()))
        if path == "/metrics":
            return web.Response(text=self._metrics(cluster))
        if path == "/api":
            return _reply(200, orjson.dumps({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{cluster.port}"}]}))
        if path == "/apis":
            return _reply(200, orjson.dumps(kinds.group_list()))
        if segs[0] == "apis" and len(segs) == 2:
            group = next((g for g in kinds.group_list()["groups"] if g["name"] == segs[1]), None)
            return _reply(200, orjson.dumps({"kind": "APIGroup", "apiVersion": "v1", **group})) if group else \
                _not_served(path)
        if (segs[0] == "api" and len(segs) == 2) or (segs[0] == "apis" and len(segs) == 3):
            found = kinds.resource_list(segs[1] if segs[0] == "api" else f"{segs[1]}/{segs[2]}")
            return _reply(200, orjson.dumps(found)) if found is not None else _not_served(path)
        return None

    @staticmethod
    def _metrics(cluster: Cluster) -> str:
        lines = ["# TYPE apiserver_request_total counter"]
        lines += [f'apiserver_request_total{{verb="{v}",resource="{r}"}} {n}'
                  for (v, r), n in sorted(cluster.by_resource.items())]
        lines += ["# TYPE fleetsim_watches gauge", f"fleetsim_watches {cluster.store.watch_count()}"]
        return "\n".join(lines) + "\n"

    async def _resource(self, request: web.Request, cluster: Cluster, t: Target) -> web.StreamResponse:
        q = request.query
        store, kind, method = cluster.store, t.kind, request.method
        verb = {"POST": "CREATE", "PUT": "UPDATE", "PATCH": "PATCH", "DELETE": "DELETE"}.get(method, "GET")
        if method == "GET" and t.name is None:
            verb = "WATCH" if q.get("watch") in ("true", "1") else "LIST"
        cluster.requests[verb] += 1
        cluster.by_resource[(verb, kind.plural)] += 1
        dry_run = bool(q.get("dryRun"))
        if t.subresource not in (None, "status"):
            return _not_served(request.path)
        if verb == "LIST":
            page = store.list(kind, t.namespace, label_selector=q.get("labelSelector"),
                              field_selector=q.get("fieldSelector"), limit=int(q.get("limit") or 0),
                              continue_=q.get("continue"))
            return _reply(200, page.body())
        if verb == "WATCH":
            return await self._watch(request, cluster, t)
        if verb == "GET" and t.name is not None:
            return _reply(200, store.get(kind, t.namespace, t.name).raw)
        if verb == "CREATE" and t.name is None:
            body = await _body(request)
            if kind.review:
                return _reply(201, orjson.dumps(review_answer(kind, body)))
            return _reply(201, store.create(kind, t.namespace, body, dry_run=dry_run).raw)
        if t.name is None:
            return _error(StoreError(405, "MethodNotAllowed", f"{method} on a collection is not served"))
        if verb == "UPDATE":
            entry = store.replace(kind, t.namespace, t.name, await _body(request), subresource=t.subresource,
                                  dry_run=dry_run)
            return self._written(cluster, entry)
        if verb == "PATCH":
            entry = store.patch(kind, t.namespace, t.name, await _body(request),
                                content_type=request.headers.get("Content-Type", ""), subresource=t.subresource,
                                dry_run=dry_run)
            return self._written(cluster, entry)
        if verb == "DELETE" and t.subresource is None:
            entry, gone = store.delete(kind, t.namespace, t.name, await _body(request), dry_run=dry_run)
            self._written(cluster, entry)
            if not gone:
                return _reply(202, entry.raw)
            if kind is PODS:
                return _reply(200, entry.raw)
            return _reply(200, orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                             "status": "Success", "details": {
                                                 "name": t.name, "group": kind.group, "kind": kind.plural,
                                                 "uid": entry.uid}}))
        return _error(StoreError(405, "MethodNotAllowed", f"{method} {request.path}"))

    def _written(self, cluster: Cluster, entry: Entry) -> web.Response:
        """The answer to a write; a foreground delete's owner is released by the "garbage collector" soon."""
        if cluster.store.foreground:
            asyncio.get_running_loop().call_later(0.05, cluster.store.collect_garbage)
        return _reply(200, entry.raw)

    async def _watch(self, request: web.Request, cluster: Cluster, t: Target) -> web.StreamResponse:
        q = request.query
        resp = web.StreamResponse(status=200, headers={"Content-Type": _JSON})
        resp.enable_chunked_encoding()
        try:
            w = cluster.store.watch(t.kind, t.namespace, resource_version=q.get("resourceVersion"),
                                    label_selector=q.get("labelSelector"), field_selector=q.get("fieldSelector"),
                                    bookmarks=q.get("allowWatchBookmarks") in ("true", "1"))
        except StoreError as exc:
            if exc.code != 410:
                raise
            await resp.prepare(request)  # as the real server: a 200 stream whose one event is the error
            await resp.write(event_line("ERROR", orjson.dumps(exc.status())))
            await resp.write_eof()
            return resp
        wake = asyncio.Event()
        w.wake = wake.set
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(q.get("timeoutSeconds") or DEFAULT_WATCH_SECONDS)
        every = self.bookmark_interval
        next_bookmark = loop.time() + every * (0.5 + random.random() / 2)
        try:
            await resp.prepare(request)
            while not w.closed:
                lines = w.take()
                if lines:
                    await resp.write(b"".join(lines))
                    continue
                now = loop.time()
                if now >= deadline:
                    break
                if w.bookmarks and now >= next_bookmark:  # nothing pending: every change up to rv was sent
                    await resp.write(w.bookmark(cluster.store.rv))
                    next_bookmark = now + every
                    continue
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(deadline, next_bookmark if w.bookmarks else deadline) - now):
                        await wake.wait()
            await resp.write_eof()
        except ConnectionError:
            pass  # the client went away
        finally:
            cluster.store.unwatch(w)
        return resp
