"""One simulated cluster's API objects in memory, with the semantics the controller depends on (pure).

What it is honest about, as kube-apiserver: one resourceVersion counter; 409 AlreadyExists on a
second create, ``generateName``; 404 NotFound with a Status body (a create in a namespace that does
not exist names ``namespaces``); a PUT or merge patch carrying a stale resourceVersion is 409
Conflict, and a write that changes nothing takes no new resourceVersion and sends no event; the
``/status`` subresource (creates reset status, main writes keep it, status writes touch only it);
``generation`` counts spec changes; finalizers (``deletionTimestamp`` set, the object kept until
the last one goes); propagation (Background and Foreground delete an owner's dependents, found by
``ownerReferences``); label selectors with set terms and field selectors over each resource's real
selectable fields; ``limit``/``continue`` paging in key order; watches that get, per watch, the
events after their resourceVersion (an object leaving a watch's selection is DELETED for it), from
a bounded history: older than that is 410 Expired, so the client relists. Job creates get the
server's defaults (selector, controller-uid and job-name labels).

Objects are kept as their encoded JSON (decoded only to be changed), so a list is mostly a byte
join; a worker's background pods are not kept at all (:mod:`bench.fleetsim.background`).
Not modelled: admission, validation, managedFields, strategic merge and apply patches (415).
"""

from __future__ import annotations

import base64
import bisect
import builtins
import copy
import heapq
import itertools
import random
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from bench.fleetsim import kinds
from bench.fleetsim.background import BackgroundPods
from bench.fleetsim.kinds import JOBS, NAMESPACES, NODES, PODS, SERVICE_ACCOUNTS, Kind
from bench.fleetsim.selectors import (
    FieldTerm,
    Requirement,
    SelectorError,
    fields_match,
    labels_match,
    parse_fields,
    parse_labels,
)
from jobapi.times import format_time
from kruntime.resources import Obj
from testkit.fakecluster import merge_patch

#: (namespace or "", name)
Key = tuple[str, str]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
#: events a slow watch may have waiting before it is closed (the client watches again)
MAX_PENDING = 200_000
#: namespaces the API server will not delete
_UNDELETABLE = frozenset({"default", "kube-system", "kube-public"})
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
JOB_LABELS = ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name", "controller-uid", "job-name")


class StoreError(Exception):
    """An API error: the HTTP code and the Status body the real server would send."""

    def __init__(self, code: int, reason: str, message: str, **details: Any) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> Obj:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message,
                "reason": self.reason, "details": self.details, "code": self.code}


def not_found(kind: Kind, name: str) -> StoreError:
    return StoreError(404, "NotFound", f'{kind.plural}{"." + kind.group if kind.group else ""} "{name}" not found',
                      name=name, group=kind.group, kind=kind.plural)


def conflict(kind: Kind, name: str, why: str) -> StoreError:
    return StoreError(409, "Conflict", f'Operation cannot be fulfilled on {kind.plural} "{name}": {why}',
                      name=name, group=kind.group, kind=kind.plural)


def now_iso(clock: Callable[[], float] = time.time) -> str:
    """``clock()`` as the API server stores a time (jobapi.times.format_time)."""
    return format_time(datetime.fromtimestamp(clock(), UTC))


@dataclass(slots=True)
class Entry:
    """One stored version of an object: its JSON and what selections and cascades read of it."""

    raw: bytes
    rv: int
    uid: str
    labels: dict[str, str]
    fields: dict[str, str] | None
    owners: tuple[str, ...]

    def obj(self) -> Obj:
        """A fresh decoded copy (the caller may change it)."""
        out: Obj = orjson.loads(self.raw)
        return out


def encode(obj: Any) -> bytes:
    """``obj`` as JSON in a bytes object of its own size (orjson's own keeps its whole growth buffer,
    4 KB for a 500-byte pod and 130 KB for a 10 KB object: too much to keep thousands of)."""
    return memoryview(orjson.dumps(obj)).tobytes()


def make_entry(kind: Kind, obj: Obj, rv: int) -> Entry:
    md = obj["metadata"]
    owners = tuple(str(r["uid"]) for r in md.get("ownerReferences") or [] if isinstance(r, dict) and r.get("uid"))
    labels = md.get("labels")
    return Entry(encode(obj), rv, str(md.get("uid", "")), labels if isinstance(labels, dict) else {},
                 kinds.selectable_fields(kind, obj), owners)


@dataclass(slots=True)
class Change:
    """One committed write, as the watch history keeps it."""

    rv: int
    kind: Kind
    type: str
    key: Key
    new: Entry
    #: the version before a MODIFIED (how a watch knows an object left its selection), or the last one
    old: Entry | None


@dataclass
class ListPage:
    kind: Kind
    items: list[bytes]
    rv: int
    continue_: str | None = None

    def body(self) -> bytes:
        md: Obj = {"resourceVersion": str(self.rv)}
        if self.continue_:
            md["continue"] = self.continue_
        head = orjson.dumps({"kind": f"{self.kind.kind}List", "apiVersion": self.kind.group_version, "metadata": md})
        return b"".join((head[:-1], b',"items":[', b",".join(self.items), b"]}"))


def event_line(etype: str, raw: bytes) -> bytes:
    return b'{"type":"%s","object":%s}\n' % (etype.encode(), raw)


def json_patch(target: Obj, ops: Any) -> Obj:
    """RFC 6902 add/remove/replace/test (``target`` is not changed); a failing op is a 422."""
    doc = copy.deepcopy(target)
    if not isinstance(ops, list):
        raise StoreError(400, "BadRequest", "a JSON patch is a list of operations")
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in str(op.get("path", "")).split("/")[1:]]
        parent: Any = doc
        try:
            for p in parts[:-1]:
                parent = parent[int(p)] if isinstance(parent, list) else parent[p]
            last = parts[-1] if parts else ""
            _json_patch_op(parent, last, op)
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise StoreError(422, "Invalid", f"JSON patch {op}: {exc}") from exc
    return doc


def _json_patch_op(parent: Any, last: str, op: Obj) -> None:
    kind = op.get("op")
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if kind == "add":
            parent.insert(index, op["value"])
        elif kind == "remove":
            del parent[index]
        elif kind == "replace":
            parent[index] = op["value"]
        elif kind == "test" and parent[index] != op["value"]:
            raise ValueError("test failed")
        return
    if kind in ("add", "replace"):
        if kind == "replace" and last not in parent:
            raise KeyError(last)
        parent[last] = op["value"]
    elif kind == "remove":
        del parent[last]
    elif kind == "test" and parent.get(last) != op.get("value"):
        raise ValueError("test failed")
    elif kind not in ("test",):
        raise ValueError(f"unsupported op {kind}")


def _token(rv: int, key: Key) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"rv": rv, "start": list(key)})).decode()


def _untoken(token: str) -> tuple[int, Key]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise StoreError(400, "BadRequest", f"invalid continue token: {exc}") from exc


def default_job(obj: Obj) -> None:
    """What the API server adds to a Job on create: counts, policies, its selector and pod labels."""
    md, spec = obj["metadata"], obj.setdefault("spec", {})
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
        if spec.get("completions") is None:
            spec["completions"] = 1
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if not spec.get("podFailurePolicy"):
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    uid, name = md["uid"], md["name"]
    template = spec.setdefault("template", {})
    tmd = template.setdefault("metadata", {})
    if not spec.get("manualSelector"):
        spec["selector"] = {"matchLabels": {JOB_LABELS[0]: uid}}
        tmd["labels"] = {**(tmd.get("labels") or {}), **dict(zip(JOB_LABELS, (uid, name, uid, name), strict=True))}


@dataclass
class Stats:
    """The writes the store committed, the simulation's own included (the server counts only requests)."""

    creates: int = 0
    updates: int = 0
    deletes: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class Watch:
    """One watch: the events of one resource after a resourceVersion, filtered by its selectors, queued
    for its connection (``wake`` is told when there is something to send)."""

    def __init__(self, kind: Kind, namespace: str | None, labels: tuple[Requirement, ...],
                 fields: tuple[FieldTerm, ...], *, bookmarks: bool = False, max_pending: int = MAX_PENDING) -> None:
        self.kind, self.namespace = kind, namespace
        self.labels, self.fields = labels, fields
        self.bookmarks = bookmarks
        self.max_pending = max_pending
        self.pending: deque[bytes] = deque()
        #: told on every queued event (the server sets an asyncio.Event)
        self.wake: Callable[[], None] | None = None
        #: closed by the store (the consumer fell too far behind); the connection should end
        self.closed = False

    def selected(self, key: Key, entry: Entry) -> bool:
        if self.namespace and key[0] != self.namespace:
            return False
        if self.labels and not labels_match(self.labels, entry.labels):
            return False
        if not self.fields:
            return True
        values = entry.fields or {}
        return fields_match(self.fields, lambda p: key[1] if p == "metadata.name" else key[0]
                            if p == "metadata.namespace" else values.get(p, ""))

    def offer(self, change: Change) -> None:
        """Queue ``change`` as this watch sees it: ADDED/DELETED when it enters or leaves the selection."""
        if self.closed:
            return
        now_in = self.selected(change.key, change.new)
        if change.type != "MODIFIED":
            if now_in:
                self.push(event_line(change.type, change.new.raw))
            return
        was_in = change.old is not None and self.selected(change.key, change.old)
        if now_in:
            self.push(event_line("MODIFIED" if was_in else "ADDED", change.new.raw))
        elif was_in and change.old is not None:  # as the watch cache does: the last selected state, new rv
            obj = change.old.obj()
            obj["metadata"]["resourceVersion"] = str(change.rv)
            self.push(event_line("DELETED", orjson.dumps(obj)))

    def push(self, line: bytes) -> None:
        self.pending.append(line)
        if len(self.pending) > self.max_pending:
            self.closed = True
            self.pending.clear()
        if self.wake is not None:
            self.wake()

    def take(self) -> list[bytes]:
        out = list(self.pending)
        self.pending.clear()
        return out

    def bookmark(self, rv: int) -> bytes:
        return event_line("BOOKMARK", orjson.dumps({"kind": self.kind.kind, "apiVersion": self.kind.group_version,
                                                    "metadata": {"resourceVersion": str(rv)}}))


class Store:
    """The objects of one simulated cluster."""

    def __init__(self, name: str, *, history: int = 50_000, clock: Callable[[], float] = time.time) -> None:
        self.name = name
        self.clock = clock
        self.rv = 0
        #: the newest resourceVersion no longer in the history: a watch from before it is 410 Expired
        self.compacted = 0
        self.history_size = history
        self.history: deque[Change] = deque()
        self.objects: dict[str, dict[Key, Entry]] = {k.key: {} for k in kinds.KINDS if not k.review}
        self._sorted: dict[str, builtins.list[Key]] = {}
        self.watchers: dict[str, set[Watch]] = {}
        #: owner uid -> its dependents
        self.dependents: dict[str, set[tuple[Kind, Key]]] = {}
        self.background: BackgroundPods | None = None
        #: told every committed change, in order (the fake Job controller); must not write from the call
        self.listeners: builtins.list[Callable[[Change], None]] = []
        #: owners deleted in the foreground, whose finalizer the garbage collector removes (collect_garbage)
        self.foreground: set[tuple[Kind, Key]] = set()
        self.stats = Stats()
        self._rand = random.Random(name)

    # -- reads -------------------------------------------------------------------------------

    def _key(self, kind: Kind, namespace: str | None, name: str) -> Key:
        return (namespace or "", name) if kind.namespaced else ("", name)

    def _bg_index(self, kind: Kind, key: Key) -> int | None:
        bg = self.background
        if kind is not PODS or bg is None or key[0] != bg.namespace:
            return None
        return bg.index(key[1])

    def _lookup(self, kind: Kind, key: Key) -> Entry | None:
        found = self.objects[kind.key].get(key)
        if found is not None:
            return found
        i = self._bg_index(kind, key)
        if i is None:
            return None
        bg = self.background
        assert bg is not None
        return make_entry(kind, bg.obj(i), bg.rv)

    def _current(self, kind: Kind, key: Key) -> Entry:
        found = self._lookup(kind, key)
        if found is None:
            raise not_found(kind, key[1])
        return found

    def get(self, kind: Kind, namespace: str | None, name: str) -> Entry:
        return self._current(kind, self._key(kind, namespace, name))

    def count(self, kind: Kind) -> int:
        n = len(self.objects[kind.key])
        return n + (len(self.background) if kind is PODS and self.background is not None else 0)

    def _sorted_keys(self, kind: Kind) -> builtins.list[Key]:
        keys = self._sorted.get(kind.key)
        if keys is None:
            keys = self._sorted[kind.key] = sorted(self.objects[kind.key])
        return keys

    @staticmethod
    def _selectors(kind: Kind, label_selector: str | None,
                   field_selector: str | None) -> tuple[tuple[Requirement, ...], tuple[FieldTerm, ...]]:
        try:
            return parse_labels(label_selector), parse_fields(field_selector, kind.selectable)
        except SelectorError as exc:
            raise StoreError(400, "BadRequest", str(exc)) from exc

    def _scan(self, kind: Kind, namespace: str, start: Key | None, labels: tuple[Requirement, ...],
              fields: tuple[FieldTerm, ...]) -> Iterator[tuple[Key, bytes]]:
        """The selected objects after ``start`` in key order, as (key, JSON): the stored ones merged with
        the background pods."""
        probe = Watch(kind, namespace or None, labels, fields)
        keys, objs = self._sorted_keys(kind), self.objects[kind.key]
        lo = bisect.bisect_right(keys, start) if start else (bisect.bisect_left(keys, (namespace, "")) if namespace
                                                             else 0)

        def stored() -> Iterator[tuple[Key, bytes]]:
            for key in itertools.islice(keys, lo, None):
                if namespace and key[0] != namespace:
                    return
                entry = objs.get(key)
                if entry is not None and probe.selected(key, entry):
                    yield key, entry.raw

        bg = self.background
        if kind is not PODS or bg is None or (namespace and namespace != bg.namespace):
            yield from stored()
            return
        yield from heapq.merge(stored(), bg.scan(start, labels, fields), key=lambda kv: kv[0])

    def list(self, kind: Kind, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None, limit: int = 0, continue_: str | None = None) -> ListPage:
        labels, fields = self._selectors(kind, label_selector, field_selector)
        rv, start = self.rv, None
        if continue_:
            rv, start = _untoken(continue_)
            if rv < self.compacted:
                raise StoreError(410, "Expired", "The provided continue parameter is too old to display a consistent "
                                 "list result. You can start a new list without the continue parameter.")
        items: list[bytes] = []
        last: Key | None = None
        for key, raw in self._scan(kind, namespace or "", start, labels, fields):
            if limit and len(items) >= limit:
                assert last is not None
                return ListPage(kind, items, rv, _token(rv, last))
            items.append(raw)
            last = key
        return ListPage(kind, items, rv)

    # -- writes ------------------------------------------------------------------------------

    def _commit(self, change: Change) -> None:
        self.history.append(change)
        while len(self.history) > self.history_size:
            self.compacted = self.history.popleft().rv
        for w in list(self.watchers.get(change.kind.key, ())):
            w.offer(change)
        for listener in self.listeners:
            listener(change)

    def _index_owners(self, kind: Kind, key: Key, old: Entry | None, new: Entry | None) -> None:
        was = set(old.owners) if old is not None else set()
        now = set(new.owners) if new is not None else set()
        for uid in was - now:
            deps = self.dependents.get(uid)
            if deps is not None:
                deps.discard((kind, key))
                if not deps:
                    del self.dependents[uid]
        for uid in now - was:
            self.dependents.setdefault(uid, set()).add((kind, key))

    def _leave_background(self, kind: Kind, key: Key) -> None:
        i = self._bg_index(kind, key)
        if i is not None and self.background is not None:
            self.background.forget(i)

    def _store(self, kind: Kind, key: Key, obj: Obj, etype: str, old: Entry | None) -> Entry:
        rv = self.rv + 1
        obj["metadata"]["resourceVersion"] = str(rv)
        entry = make_entry(kind, obj, rv)
        self.rv = rv
        objs = self.objects[kind.key]
        if key not in objs:
            self._sorted.pop(kind.key, None)
        objs[key] = entry
        self._leave_background(kind, key)
        self._index_owners(kind, key, old, entry)
        self._commit(Change(rv, kind, etype, key, entry, old))
        return entry

    def _remove(self, kind: Kind, key: Key, old: Entry, *, cascade: bool) -> Entry:
        rv = self.rv + 1
        obj = old.obj()
        obj["metadata"]["resourceVersion"] = str(rv)
        gone = make_entry(kind, obj, rv)
        self.rv = rv
        if self.objects[kind.key].pop(key, None) is not None:
            self._sorted.pop(kind.key, None)
        self._leave_background(kind, key)
        self._index_owners(kind, key, old, None)
        self.foreground.discard((kind, key))
        self.stats.deletes += 1
        self._commit(Change(rv, kind, "DELETED", key, gone, old))
        if cascade:
            self._delete_dependents(old.uid)
        return gone

    def _delete_dependents(self, owner_uid: str) -> None:
        for kind, key in sorted(self.dependents.get(owner_uid, ()), key=lambda d: (d[0].key, d[1])):
            try:
                self.delete(kind, key[0], key[1], {"propagationPolicy": "Background"})
            except StoreError:  # gone meanwhile
                continue

    def create(self, kind: Kind, namespace: str | None, body: Obj, *, dry_run: bool = False,
               keep_status: bool = False) -> Entry:
        """Store ``body`` (taken, not copied) as a POST to the collection would; ``keep_status`` is for
        the simulation's own objects (seeds, the fake kubelet's pods)."""
        if kind.review:
            raise StoreError(405, "MethodNotAllowed", f"{kind.plural} are answered, not stored")
        obj = body
        md = obj.get("metadata")
        if not isinstance(md, dict):
            md = obj["metadata"] = {}
        ns = namespace or ""
        if kind.namespaced:
            if not ns:
                raise StoreError(400, "BadRequest", f"{kind.plural} must be created in a namespace")
            if md.get("namespace") and md["namespace"] != ns:
                raise StoreError(400, "BadRequest", "the namespace of the provided object does not match the "
                                 "namespace sent on the request")
            if ("", ns) not in self.objects[NAMESPACES.key]:
                raise not_found(NAMESPACES, ns)
            md["namespace"] = ns
        else:
            ns = ""
            md.pop("namespace", None)
        name = md.get("name")
        if not name and md.get("generateName"):
            name = md["name"] = str(md["generateName"]) + "".join(self._rand.choices(_NAME_CHARS, k=5))
        if not name:
            raise StoreError(422, "Invalid", f"{kind.kind} is invalid: metadata.name: Required value: name or "
                             "generateName is required")
        key = (ns, str(name))
        if self._lookup(kind, key) is not None:
            raise StoreError(409, "AlreadyExists", f'{kind.plural} "{name}" already exists', name=name,
                             group=kind.group, kind=kind.plural)
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"):
            md.pop(k, None)
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now_iso(self.clock)
        if kind.status and kind not in (NAMESPACES, NODES):
            md["generation"] = 1
        obj = {"apiVersion": kind.group_version, "kind": kind.kind,
               **{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}}
        self._defaults(kind, obj, keep_status)
        if dry_run:
            return make_entry(kind, obj, 0)
        self.stats.creates += 1
        self.stats.by_kind[kind.plural] = self.stats.by_kind.get(kind.plural, 0) + 1
        entry = self._store(kind, key, obj, "ADDED", None)
        if kind is NAMESPACES:  # what the namespace's controllers make in it
            self.create(SERVICE_ACCOUNTS, key[1], {"metadata": {"name": "default"}})
        return entry

    def _defaults(self, kind: Kind, obj: Obj, keep_status: bool) -> None:
        if kind.status and not keep_status:
            obj.pop("status", None)
        if kind is JOBS:
            default_job(obj)
        elif kind is PODS and not keep_status:
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif kind is NAMESPACES:
            md = obj["metadata"]
            md["labels"] = {**(md.get("labels") or {}), "kubernetes.io/metadata.name": md["name"]}
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            if not keep_status:
                obj["status"] = {"phase": "Active"}

    def _apply(self, kind: Kind, cur: Obj, wanted: Obj, subresource: str | None) -> Obj:
        """``wanted`` as the server keeps it (neither argument is changed)."""
        if subresource == "status":
            return {**cur, "status": wanted.get("status") or {}}
        if subresource:
            raise StoreError(404, "NotFound", f"{kind.plural}/{subresource}: not served by the simulation")
        out = dict(wanted)
        out["apiVersion"], out["kind"] = kind.group_version, kind.kind
        md = out["metadata"] = dict(out.get("metadata") or {})
        was = cur["metadata"]
        for k in ("uid", "name", "namespace", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "generation"):
            if k in was:
                md[k] = was[k]
            else:
                md.pop(k, None)
        md.pop("managedFields", None)
        if kind.status:
            if "status" in cur:
                out["status"] = cur["status"]
            else:
                out.pop("status", None)
        if "generation" in was and out.get("spec") != cur.get("spec"):
            md["generation"] = int(was["generation"]) + 1
        return out

    def _write(self, kind: Kind, key: Key, current: Entry, cur: Obj, obj: Obj, *, dry_run: bool = False) -> Entry:
        md = obj["metadata"]
        md["resourceVersion"] = str(current.rv)
        if obj == cur:  # nothing changed: no new resourceVersion, no event (as etcd's guaranteed update)
            return current
        if dry_run:
            return make_entry(kind, obj, current.rv)
        self.stats.updates += 1
        if md.get("deletionTimestamp") and not md.get("finalizers"):
            return self._remove(kind, key, current, cascade=True)
        return self._store(kind, key, obj, "MODIFIED", current)

    def _check_rv(self, kind: Kind, current: Entry, said: Any, name: str) -> None:
        if said and str(said) != str(current.rv):
            raise conflict(kind, name, "the object has been modified; please apply your changes to the latest "
                           "version and try again")

    def replace(self, kind: Kind, namespace: str | None, name: str, body: Obj, *, subresource: str | None = None,
                dry_run: bool = False) -> Entry:
        key = self._key(kind, namespace, name)
        current = self._current(kind, key)
        md = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        assert isinstance(md, dict)
        if md.get("name") and md["name"] != name:
            raise StoreError(400, "BadRequest", f"the name of the object ({md['name']}) does not match the name on "
                             f"the URL ({name})")
        self._check_rv(kind, current, md.get("resourceVersion"), name)
        cur = current.obj()
        return self._write(kind, key, current, cur, self._apply(kind, cur, body, subresource), dry_run=dry_run)

    def patch(self, kind: Kind, namespace: str | None, name: str, patch: Any, *,
              content_type: str = MERGE_PATCH, subresource: str | None = None, dry_run: bool = False) -> Entry:
        key = self._key(kind, namespace, name)
        current = self._current(kind, key)
        cur = current.obj()
        ctype = content_type.split(";")[0].strip()
        if ctype == MERGE_PATCH:
            if not isinstance(patch, dict):
                raise StoreError(400, "BadRequest", "a merge patch is a JSON object")
            self._check_rv(kind, current, (patch.get("metadata") or {}).get("resourceVersion"), name)
            merged = merge_patch(cur, patch)
        elif ctype == JSON_PATCH:
            merged = json_patch(cur, patch)
        else:
            raise StoreError(415, "UnsupportedMediaType", f"the simulation applies merge and JSON patches, not {ctype}")
        return self._write(kind, key, current, cur, self._apply(kind, cur, merged, subresource), dry_run=dry_run)

    def mutate(self, kind: Kind, namespace: str | None, name: str, change: Callable[[Obj], None], *,
               subresource: str | None = None) -> Entry:
        """Change the current object in place with ``change`` (the simulation's controllers)."""
        key = self._key(kind, namespace, name)
        current = self._current(kind, key)
        cur, wanted = current.obj(), current.obj()
        change(wanted)
        return self._write(kind, key, current, cur, self._apply(kind, cur, wanted, subresource))

    def delete(self, kind: Kind, namespace: str | None, name: str, options: Obj | None = None, *,
               dry_run: bool = False) -> tuple[Entry, bool]:
        """Delete as the API server does; the object's last version and whether it is gone already
        (False: finalizers hold it, ``deletionTimestamp`` set)."""
        options = options or {}
        key = self._key(kind, namespace, name)
        current = self._current(kind, key)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current.uid:
            raise conflict(kind, name, f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                           f"{current.uid}")
        if pre.get("resourceVersion") and str(pre["resourceVersion"]) != str(current.rv):
            raise conflict(kind, name, f"Precondition failed: ResourceVersion in precondition: "
                           f"{pre['resourceVersion']}, ResourceVersion in meta: {current.rv}")
        policy = options.get("propagationPolicy") or ("Orphan" if options.get("orphanDependents") or kind is JOBS
                                                      else "Background")
        if kind is NAMESPACES:
            return self._delete_namespace(key, current, dry_run=dry_run)
        cur = current.obj()
        md = cur["metadata"]
        finalizers = list(md.get("finalizers") or [])
        if policy == "Foreground" and self.dependents.get(current.uid) and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if not finalizers:
            if dry_run:
                return current, True
            return self._remove(kind, key, current, cascade=policy != "Orphan"), True
        obj = copy.deepcopy(cur)
        obj["metadata"]["finalizers"] = finalizers
        obj["metadata"].setdefault("deletionTimestamp", now_iso(self.clock))
        obj["metadata"].setdefault("deletionGracePeriodSeconds", 0)
        entry = self._write(kind, key, current, cur, obj, dry_run=dry_run)
        if not dry_run and "foregroundDeletion" in finalizers:
            self.foreground.add((kind, key))
            self._delete_dependents(current.uid)
        return entry, False

    def _delete_namespace(self, key: Key, current: Entry, *, dry_run: bool) -> tuple[Entry, bool]:
        """A namespace goes at once with everything in it (no Terminating phase)."""
        name = key[1]
        if name in _UNDELETABLE or (self.background is not None and name == self.background.namespace):
            raise StoreError(403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                             name=name, kind="namespaces")
        if dry_run:
            return current, True
        for k in kinds.KINDS:
            if k.namespaced and not k.review:
                for inner in [ik for ik in self.objects[k.key] if ik[0] == name]:
                    entry = self.objects[k.key].get(inner)
                    if entry is not None:
                        self._remove(k, inner, entry, cascade=False)
        return self._remove(NAMESPACES, key, current, cascade=False), True

    def collect_garbage(self) -> int:
        """Drop ``foregroundDeletion`` from owners whose dependents are gone (what the garbage collector
        does after a foreground delete); how many it released."""
        released = 0
        for kind, key in sorted(self.foreground, key=lambda d: (d[0].key, d[1])):
            entry = self.objects[kind.key].get(key)
            if entry is None:
                self.foreground.discard((kind, key))
                continue
            if self.dependents.get(entry.uid):
                continue
            self.foreground.discard((kind, key))
            self.mutate(kind, key[0], key[1], _drop_foreground)
            released += 1
        return released

    # -- watches -----------------------------------------------------------------------------

    def watch(self, kind: Kind, namespace: str | None = None, *, resource_version: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None, bookmarks: bool = False,
              max_pending: int = MAX_PENDING) -> Watch:
        """A watch from ``resource_version`` (none or "0": the current objects as ADDED first); older
        than the history holds is 410 Expired."""
        labels, fields = self._selectors(kind, label_selector, field_selector)
        w = Watch(kind, namespace or None, labels, fields, bookmarks=bookmarks, max_pending=max_pending)
        if resource_version in (None, "", "0"):
            for _, raw in self._scan(kind, namespace or "", None, labels, fields):
                w.push(event_line("ADDED", raw))
        else:
            try:
                since = int(str(resource_version))
            except ValueError as exc:
                raise StoreError(400, "BadRequest", f"invalid resourceVersion {resource_version!r}") from exc
            if since < self.compacted:
                raise StoreError(410, "Expired", f"too old resource version: {since} ({self.compacted})")
            for change in self._since(since):
                if change.kind is kind:
                    w.offer(change)
        self.watchers.setdefault(kind.key, set()).add(w)
        return w

    def _since(self, rv: int) -> builtins.list[Change]:
        out = []
        for change in reversed(self.history):
            if change.rv <= rv:
                break
            out.append(change)
        out.reverse()
        return out

    def unwatch(self, w: Watch) -> None:
        self.watchers.get(w.kind.key, set()).discard(w)

    def watch_count(self) -> int:
        return sum(len(ws) for ws in self.watchers.values())

    # -- the simulation's own -----------------------------------------------------------------

    def add_background(self, namespace: str, count: int, nodes: builtins.list[str]) -> BackgroundPods:
        """``count`` background pods in ``namespace`` (which must exist), made by one write: a watch from
        before it is 410 Expired (the history does not hold them)."""
        if ("", namespace) not in self.objects[NAMESPACES.key]:
            raise not_found(NAMESPACES, namespace)
        self.rv += 1
        prefix = str(uuid.uuid4())[:23]
        self.background = BackgroundPods(namespace, count, nodes, rv=self.rv, uid_prefix=prefix,
                                         created=now_iso(self.clock))
        self.compacted = self.rv
        return self.background

    def counts(self) -> dict[str, int]:
        return {k.key: self.count(k) for k in kinds.KINDS if not k.review and self.count(k)}


def _drop_foreground(obj: Obj) -> None:
    md = obj["metadata"]
    md["finalizers"] = [f for f in md.get("finalizers") or [] if f != "foregroundDeletion"]


def review_answer(kind: Kind, body: Obj) -> Obj:
    """What the API server answers to an access or token review from the simulation's one user: allowed."""
    out = {**body, "apiVersion": kind.group_version, "kind": kind.kind}
    user = {"username": "fleetsim", "groups": ["system:masters", "system:authenticated"]}
    if kind.plural.endswith("subjectaccessreviews"):
        out["status"] = {"allowed": True, "reason": "the fleet simulation allows everything"}
    elif kind.plural == "selfsubjectrulesreviews":
        out["status"] = {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                         "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": False}
    elif kind.plural == "tokenreviews":
        out["status"] = {"authenticated": True, "user": user,
                         "audiences": (body.get("spec") or {}).get("audiences") or []}
    else:
        out["status"] = {"userInfo": user}
    return out
