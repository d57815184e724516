"""An in-memory API server behind the real ``ClusterClient`` interface, for unit tables.

Unit tests of the reconciler need a cluster that answers the way kube-apiserver does without
starting one: :class:`FakeClusterClient` *is* a :class:`~kruntime.client.ClusterClient` whose
raw ``request``/``watch`` are served by :class:`FakeApiServer` instead of HTTP, so every typed
verb (paths, escaping, queries, preconditions) runs our own code. What it is honest about:

- ``resourceVersion``: one counter per server; a write carrying ``metadata.resourceVersion``
  (PUT body, merge patch) that is not current is a 409 Conflict, as are delete preconditions
  (``uid``, ``resourceVersion``) that do not match;
- 404 NotFound on reads and writes of absent objects; 409 AlreadyExists on a second create;
  with ``require_namespaces``, a create in an absent namespace is the server's 404 whose
  details name ``namespaces``;
- the status subresource: a PUT/PATCH of ``/status`` changes only ``status``, a main-resource
  write never changes it, a create starts with none; ``generation`` counts spec changes;
- finalizers: a delete of an object with finalizers sets ``deletionTimestamp`` and keeps it
  until the last finalizer is removed; ``Foreground`` adds ``foregroundDeletion``, which
  :meth:`FakeApiServer.collect_garbage` removes (there is no garbage collector otherwise);
- lists and watches with equality label selectors (``k=v``, ``k!=v``, ``k``, ``!k``) and
  field selectors on dotted paths (``metadata.namespace=x``, ``status.phase!=Failed``); as on a
  real server, a watched object that moves out of the selection arrives as DELETED and one that
  moves into it as ADDED; a watch from a compacted resourceVersion is 410 Gone.

Not modelled: admission, validation, defaulting, owner-reference cascading, strategic and
JSON patches (415), pagination (one page). Faults are injected with :meth:`FakeApiServer.react`,
like client-go's fake reactors; every request is recorded in :attr:`FakeApiServer.calls`.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from kruntime.client import ApiError, ClusterClient
from kruntime.ratelimit import TokenBucket
from kruntime.reachability import Reachability
from kruntime.resources import Obj

#: resources whose status is written only through their status subresource
WITH_STATUS = frozenset({"jobs", "pods", "nodes", "jobsets"})

Reactor = Callable[[str, str, Any], "Obj | ApiError | None"]


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: Any = None


@dataclass(frozen=True)
class _Target:
    """What a path names: a resource collection (``group/version/plural``), maybe one object."""

    resource: str
    namespace: str | None
    name: str | None
    subresource: str | None


def _parse(path: str) -> _Target:
    segs = [unquote(s) for s in path.strip("/").split("/")]
    if segs[0] == "api":
        prefix, rest = f"/{segs[1]}", segs[2:]
    elif segs[0] == "apis":
        prefix, rest = f"{segs[1]}/{segs[2]}", segs[3:]
    else:
        raise ApiError(404, "NotFound", f"the fake serves no {path}")
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    return _Target(f"{prefix}/{rest[0]}", namespace, rest[1] if len(rest) > 1 else None,
                   rest[2] if len(rest) > 2 else None)


def _error(status: int, reason: str, message: str, **details: Any) -> ApiError:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
            "code": status, "details": details}
    return ApiError(status, reason, message, body, cluster="fake")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def label_selector_matches(selector: str | None, labels: dict[str, str]) -> bool:
    """Equality-based selectors only (``in``/``notin`` raise: not modelled)."""
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        if " in " in term or " notin " in term:
            raise _error(400, "BadRequest", f"the fake does not model set-based selectors: {term}")
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def field_selector_matches(selector: str | None, obj: Obj) -> bool:
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        negate = "!=" in term
        k, v = term.replace("==", "=").split("!=" if negate else "=", 1)
        value = _dig(obj, k.strip())
        if ((str(value) if value is not None else "") == v.strip()) == negate:
            return False
    return True


def selected(t: _Target, query: dict[str, Any], obj: Obj) -> bool:
    """Whether a watch or list of ``t`` with ``query``'s selectors includes ``obj``."""
    return ((t.namespace is None or obj["metadata"].get("namespace") == t.namespace)
            and label_selector_matches(query.get("labelSelector"), obj["metadata"].get("labels") or {})
            and field_selector_matches(query.get("fieldSelector"), obj))


@dataclass
class FakeApiServer:
    """One cluster's objects, resourceVersions and watch history, in memory."""

    require_namespaces: bool = False
    version: str = "v1.35.4-fake"
    objects: dict[tuple[str, str | None, str], Obj] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    _rv: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _last_rv: int = 0
    _compacted: int = 0
    #: (resourceVersion, resource, event type, object, the object before this change)
    _history: list[tuple[int, str, str, Obj, Obj | None]] = field(default_factory=list)
    _reactors: list[Reactor] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    # -- the test's side --------------------------------------------------------------------

    def client(self, name: str = "fake") -> FakeClusterClient:
        return FakeClusterClient(name, self)

    def react(self, reactor: Reactor) -> None:
        """Run ``reactor(method, path, body)`` before each request: an ApiError it returns is
        raised, an object is answered, None lets the request through."""
        self._reactors.append(reactor)

    def seed(self, path: str, obj: Obj) -> Obj:
        """Store ``obj`` as a create at collection ``path`` would, status included."""
        target = _parse(path)
        stored = self._new(target, obj)
        if "status" in obj:
            stored["status"] = copy.deepcopy(obj["status"])
        self._store(target.resource, stored, "ADDED")
        return copy.deepcopy(stored)

    def stored(self, path: str) -> Obj | None:
        """The object at ``path`` (a copy), or None."""
        t = _parse(path)
        found = self.objects.get((t.resource, t.namespace, t.name or ""))
        return copy.deepcopy(found) if found is not None else None

    def count(self, method: str, contains: str = "") -> int:
        return sum(1 for c in self.calls if c.method == method and contains in c.path)

    def compact(self) -> None:
        """Forget the watch history: a watch from an older resourceVersion gets 410 Gone."""
        self._compacted = self._last_rv
        self._history.clear()

    def collect_garbage(self) -> None:
        """What the garbage collector does for a foreground delete with no dependents left."""
        for key, obj in list(self.objects.items()):
            fins = obj["metadata"].get("finalizers") or []
            if obj["metadata"].get("deletionTimestamp") and "foregroundDeletion" in fins:
                self._write(key, {**obj, "metadata": {**obj["metadata"],
                                                      "finalizers": [f for f in fins if f != "foregroundDeletion"]}})

    # -- serving ----------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, Any], body: Any, content_type: str) -> Obj:
        self.calls.append(Call(method, path, copy.deepcopy(body)))
        for reactor in self._reactors:
            answer = reactor(method, path, body)
            if isinstance(answer, ApiError):
                raise answer
            if answer is not None:
                return answer
        if path == "/readyz":
            return {}
        if path == "/version":
            return {"gitVersion": self.version, "major": "1", "minor": self.version.split(".")[1]}
        t = _parse(path)
        if method == "GET":
            return self._get(t) if t.name else self._list(t, query)
        if method == "POST":
            return self._create(t, body, dry_run=bool(query.get("dryRun")))
        if method == "PUT":
            return self._replace(t, body)
        if method == "PATCH":
            if content_type != "application/merge-patch+json":
                raise _error(415, "UnsupportedMediaType", f"the fake applies merge patches only, not {content_type}")
            return self._patch(t, body)
        if method == "DELETE":
            return self._delete(t, body or {})
        raise _error(405, "MethodNotAllowed", f"{method} {path}")

    def _key(self, t: _Target) -> tuple[str, str | None, str]:
        return (t.resource, t.namespace, t.name or "")

    def _current(self, t: _Target) -> Obj:
        obj = self.objects.get(self._key(t))
        if obj is None:
            plural = t.resource.rsplit("/", 1)[-1]
            raise _error(404, "NotFound", f'{plural} "{t.name}" not found', name=t.name, kind=plural)
        return obj

    def _get(self, t: _Target) -> Obj:
        return copy.deepcopy(self._current(t))

    def _list(self, t: _Target, query: dict[str, Any]) -> Obj:
        items = [copy.deepcopy(o) for (res, ns, _), o in sorted(self.objects.items(), key=lambda kv: str(kv[0]))
                 if res == t.resource and (t.namespace is None or ns == t.namespace)
                 and label_selector_matches(query.get("labelSelector"), o["metadata"].get("labels") or {})
                 and field_selector_matches(query.get("fieldSelector"), o)]
        return {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": str(self._last_rv)},
                "items": items}

    def _new(self, t: _Target, body: Obj) -> Obj:
        obj = copy.deepcopy(body)
        md = obj.setdefault("metadata", {})
        if not md.get("name") and md.get("generateName"):
            md["name"] = f"{md['generateName']}{uuid.uuid4().hex[:5]}"
        if not md.get("name"):
            raise _error(422, "Invalid", "metadata.name: Required value")
        if t.namespace is not None:
            md["namespace"] = t.namespace
        md.update(uid=str(uuid.uuid4()), generation=1,
                  creationTimestamp=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        md.pop("resourceVersion", None)
        md.pop("deletionTimestamp", None)
        if t.resource.rsplit("/", 1)[-1] in WITH_STATUS:
            obj.pop("status", None)
        return obj

    def _create(self, t: _Target, body: Obj, *, dry_run: bool) -> Obj:
        if (self.require_namespaces and t.namespace is not None
                and ("/v1/namespaces", None, t.namespace) not in self.objects):
            raise _error(404, "NotFound", f'namespaces "{t.namespace}" not found', name=t.namespace,
                         kind="namespaces")
        obj = self._new(t, body)
        key = (t.resource, t.namespace, obj["metadata"]["name"])
        if key in self.objects:
            plural = t.resource.rsplit("/", 1)[-1]
            raise _error(409, "AlreadyExists", f'{plural} "{key[2]}" already exists', name=key[2], kind=plural)
        if dry_run:
            return obj
        return copy.deepcopy(self._store(t.resource, obj, "ADDED"))

    def _check_rv(self, current: Obj, said: Any) -> None:
        if said and str(said) != current["metadata"]["resourceVersion"]:
            raise _error(409, "Conflict", "Operation cannot be fulfilled: the object has been modified; please apply "
                         "your changes to the latest version and try again", name=current["metadata"]["name"])

    def _apply(self, t: _Target, current: Obj, wanted: Obj) -> Obj:
        """``wanted`` as the server keeps it: status only through /status, identity fields kept."""
        with_status = t.resource.rsplit("/", 1)[-1] in WITH_STATUS
        if t.subresource == "status":
            out = {**copy.deepcopy(current), "status": copy.deepcopy(wanted.get("status") or {})}
        else:
            out = copy.deepcopy(wanted)
            if with_status:
                out.pop("status", None)
                if "status" in current:
                    out["status"] = copy.deepcopy(current["status"])
            md, was = out.setdefault("metadata", {}), current["metadata"]
            for k in ("uid", "name", "namespace", "creationTimestamp", "deletionTimestamp", "generation"):
                if k in was:
                    md[k] = was[k]
                else:
                    md.pop(k, None)
            if out.get("spec") != current.get("spec"):
                md["generation"] = int(was.get("generation") or 1) + 1
        return out

    def _replace(self, t: _Target, body: Obj) -> Obj:
        current = self._current(t)
        self._check_rv(current, (body.get("metadata") or {}).get("resourceVersion"))
        return self._write(self._key(t), self._apply(t, current, body))

    def _patch(self, t: _Target, patch: Obj) -> Obj:
        current = self._current(t)
        self._check_rv(current, ((patch or {}).get("metadata") or {}).get("resourceVersion"))
        return self._write(self._key(t), self._apply(t, current, merge_patch(current, patch)))

    def _delete(self, t: _Target, options: Obj) -> Obj:
        current = self._current(t)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
            raise _error(409, "Conflict", f"Precondition failed: UID in precondition: {pre['uid']}, UID in object "
                         f"meta: {current['metadata']['uid']}", name=t.name)
        self._check_rv(current, pre.get("resourceVersion"))
        fins = list(current["metadata"].get("finalizers") or [])
        if options.get("propagationPolicy") == "Foreground" and "foregroundDeletion" not in fins:
            fins.append("foregroundDeletion")
        if not fins:
            self._remove(self._key(t))
            return {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": t.name}}
        md = {**current["metadata"], "finalizers": fins}
        md.setdefault("deletionTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        return self._write(self._key(t), {**current, "metadata": md}, keep_deleting=True)

    # -- storage and history ----------------------------------------------------------------

    def _store(self, resource: str, obj: Obj, etype: str) -> Obj:
        rv = next(self._rv)
        self._last_rv = rv
        obj["metadata"]["resourceVersion"] = str(rv)
        md = obj["metadata"]
        key = (resource, md.get("namespace"), md["name"])
        before = self.objects.get(key)
        self.objects[key] = obj
        self._history.append((rv, resource, etype, copy.deepcopy(obj), copy.deepcopy(before)))
        self._wake()
        return obj

    def _write(self, key: tuple[str, str | None, str], obj: Obj, keep_deleting: bool = False) -> Obj:
        if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get("finalizers") and not keep_deleting:
            self._remove(key)
            return copy.deepcopy(obj)
        return copy.deepcopy(self._store(key[0], obj, "MODIFIED"))

    def _remove(self, key: tuple[str, str | None, str]) -> None:
        obj = self.objects.pop(key)
        rv = next(self._rv)
        self._last_rv = rv
        gone = {**copy.deepcopy(obj), "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}
        self._history.append((rv, key[0], "DELETED", gone, None))
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def open_watch(self, path: str, query: dict[str, Any]) -> AsyncIterator[Obj]:
        """A watch stream of the collection at ``path`` (410 Gone at once when compacted past)."""
        self.calls.append(Call("WATCH", path))
        since = int(query.get("resourceVersion") or self._last_rv)
        if since < self._compacted:
            raise _error(410, "Expired", f"too old resource version: {since} ({self._compacted})")
        return self._events(_parse(path), since, query)

    async def _events(self, t: _Target, since: int, query: dict[str, Any]) -> AsyncIterator[Obj]:
        deadline = asyncio.get_running_loop().time() + float(query.get("timeoutSeconds") or 300)
        while True:
            for rv, resource, etype, obj, before in list(self._history):
                if rv <= since or resource != t.resource:
                    continue
                since = rv
                now_in, was_in = selected(t, query, obj), before is not None and selected(t, query, before)
                if etype == "MODIFIED" and now_in != was_in:  # moved into or out of the selection
                    etype = "ADDED" if now_in else "DELETED"
                if now_in or (etype == "DELETED" and was_in):
                    yield {"type": etype, "object": copy.deepcopy(obj)}
            since = max(since, self._last_rv)
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return
            try:
                async with asyncio.timeout(remaining):  # not wait_for: in 3.11 it can swallow a cancel
                    await self._changed.wait()
            except TimeoutError:
                return


class FakeClusterClient(ClusterClient):
    """A ClusterClient whose requests are served by a :class:`FakeApiServer` (no HTTP)."""

    def __init__(self, name: str, server: FakeApiServer) -> None:  # no super(): there is no ApiClient
        self.name = name
        self.server = server
        self.limiter = TokenBucket(1e6, 1_000_000)
        self.requests_sent = 0
        self.token_wait_seconds = 0.0
        self.timeout = 5.0
        self.field_manager = None
        self.write_gate = None
        self.purpose = "reconcile"
        self._siblings = []
        self.reachability = Reachability()

    def sibling(self, purpose: str, *, pool_size: int, qps: float | None = None, burst: int | None = None,
                timeout: float | None = None) -> ClusterClient:
        out = FakeClusterClient(self.name, self.server)
        out.purpose, out.write_gate, out.reachability = purpose, self.write_gate, self.reachability
        return out

    @property
    def host(self) -> str:
        return f"fake://{self.name}"

    async def close(self) -> None:
        return None

    async def request(self, method: str, path: str, **kw: Any) -> Obj:
        verb = method.upper()
        self._check_gate(verb, path)
        query = {k: v for k, v in (kw.get("query") or {}).items() if v is not None}
        await self._take_token()  # a test may give it a real limit (limiter)
        await asyncio.sleep(0)  # a real call always yields to the loop
        try:
            return self.server.handle(verb, path, query, copy.deepcopy(kw.get("body")),
                                      kw.get("content_type", "application/json"))
        except ApiError as exc:
            raise ApiError(exc.status, exc.reason, exc.message, exc.body, cluster=self.name) from None

    async def watch(self, res: Any, namespace: str | None = None, *, resource_version: str,
                    label_selector: str | None = None, field_selector: str | None = None,
                    timeout_seconds: int = 300, on_open: Callable[[], None] | None = None) -> AsyncIterator[Obj]:
        query = {"resourceVersion": resource_version, "labelSelector": label_selector,
                 "fieldSelector": field_selector, "timeoutSeconds": timeout_seconds}
        await asyncio.sleep(0)
        try:
            stream = self.server.open_watch(res.path(namespace), {k: v for k, v in query.items() if v is not None})
        except ApiError as exc:
            raise ApiError(exc.status, exc.reason, exc.message, exc.body, cluster=self.name) from None
        if on_open is not None:
            on_open()
        async for ev in stream:
            yield ev
