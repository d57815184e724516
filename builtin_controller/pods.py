"""Pods of a Job: building them from the template, choosing which to remove, claiming.

Everything here is pure: it reads Job/Pod dicts and returns new dicts, lists or patch
bodies; the controller performs the API calls.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable
from datetime import datetime

from builtin_controller import fields
from builtin_controller.backoff import finished_time
from builtin_controller.failure_policy import is_pod_failed, match
from jobapi.intervals import Intervals
from kruntime.resources import Obj

#: The API server appends 5 random characters to a generateName of at most this length.
MAX_GENERATED_NAME_LENGTH = 58


# -- building pods ----------------------------------------------------------------------------

def generate_name(job_name: str, index: int | None = None) -> str:
    """``<job>-`` or, for an Indexed pod, ``<job>-<index>-`` with the index always kept."""
    if index is None:
        return f"{job_name}-"
    suffix = f"-{index}-"
    prefix = job_name + suffix
    if len(prefix) > MAX_GENERATED_NAME_LENGTH:
        prefix = prefix[: MAX_GENERATED_NAME_LENGTH - len(suffix)] + suffix
    return prefix


def controller_owner_ref(job: Obj) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": fields.name(job),
        "uid": fields.uid(job),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _add_index_env(container: Obj) -> None:
    env = container.setdefault("env", [])
    if any(e.get("name") == fields.COMPLETION_INDEX_ENV for e in env):
        return
    env.append({
        "name": fields.COMPLETION_INDEX_ENV,
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{fields.COMPLETION_INDEX_KEY}']"}},
    })


def new_index_failure_counts(job: Obj, replaced: Obj | None) -> tuple[int, int]:
    """Failure / ignored-failure counts for the pod replacing ``replaced`` in its index."""
    if replaced is None:
        return 0, 0
    failures = fields.index_failure_count(replaced)
    ignored = fields.index_ignored_failure_count(replaced)
    if fields.pod_failure_policy(job) is not None and not match(fields.pod_failure_policy(job), replaced).count_failed:
        ignored += 1
    else:
        failures += 1
    return failures, ignored


def pod_from_template(job: Obj, index: int | None = None, replaced: Obj | None = None) -> Obj:
    """The pod the controller creates, as the upstream controller builds it.

    Template labels/annotations/finalizers plus the tracking finalizer and a controller
    ownerReference. Indexed pods also get the index as annotation and label, the
    ``JOB_COMPLETION_INDEX`` env var in every (init) container, hostname ``<job>-<i>``, a
    ``<job>-<i>-`` generateName and, with ``backoffLimitPerIndex``, the failure counts
    inherited from the pod they replace.
    """
    template = (fields.spec(job).get("template") or {})
    tmeta = template.get("metadata") or {}
    pod_spec = copy.deepcopy(template.get("spec") or {})
    labels = dict(tmeta.get("labels") or {})
    annotations = dict(tmeta.get("annotations") or {})
    finalizers = list(tmeta.get("finalizers") or [])
    if fields.JOB_TRACKING_FINALIZER not in finalizers:
        finalizers.append(fields.JOB_TRACKING_FINALIZER)
    gen = generate_name(fields.name(job))
    if fields.is_indexed(job):
        for c in pod_spec.get("initContainers") or []:
            _add_index_env(c)
        for c in pod_spec.get("containers") or []:
            _add_index_env(c)
    if index is not None:
        annotations[fields.COMPLETION_INDEX_KEY] = str(index)
        labels[fields.COMPLETION_INDEX_KEY] = str(index)
        pod_spec["hostname"] = f"{fields.name(job)}-{index}"
        gen = generate_name(fields.name(job), index)
        if fields.has_backoff_limit_per_index(job):
            failures, ignored = new_index_failure_counts(job, replaced)
            annotations[fields.INDEX_FAILURE_COUNT_KEY] = str(failures)
            if ignored > 0:
                annotations[fields.INDEX_IGNORED_FAILURE_COUNT_KEY] = str(ignored)
    meta: Obj = {"generateName": gen, "namespace": fields.namespace(job), "labels": labels,
                 "finalizers": finalizers, "ownerReferences": [controller_owner_ref(job)]}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


# -- ordering pods for removal ----------------------------------------------------------------

_PHASE_ORDINAL = {fields.PENDING: 0, fields.UNKNOWN: 1, fields.RUNNING: 2}


def _ready_time(pod: Obj) -> datetime | None:
    c = fields.pod_condition(pod, "Ready")
    if c is not None and c.get("status") == "True":
        return fields.parse_time(c.get("lastTransitionTime"))
    return None


def _after_or_zero(t1: datetime | None, t2: datetime | None) -> bool:
    """A missing time sorts first; otherwise the later time does."""
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def _max_restarts(pod: Obj) -> tuple[int, int]:
    st = pod.get("status") or {}
    regular = max((int(c.get("restartCount") or 0) for c in st.get("containerStatuses") or []), default=0)
    sidecars = {c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []
                if c.get("restartPolicy") == "Always"}
    side = max((int(c.get("restartCount") or 0) for c in st.get("initContainerStatuses") or []
                if c.get("name") in sidecars), default=0)
    return regular, side


def _less(a: Obj, b: Obj) -> bool:
    """True when ``a`` is a better candidate for deletion than ``b``.

    Earlier lifecycle stages go first so the least work is lost: unscheduled before
    scheduled, Pending < Unknown < Running, not ready before ready, most recently ready
    first, most restarts first, newest first.
    """
    na, nb = (a.get("spec") or {}).get("nodeName") or "", (b.get("spec") or {}).get("nodeName") or ""
    if na != nb and (not na or not nb):
        return not na
    pa, pb = _PHASE_ORDINAL.get(fields.phase(a), 0), _PHASE_ORDINAL.get(fields.phase(b), 0)
    if pa != pb:
        return pa < pb
    ra, rb = fields.is_ready(a), fields.is_ready(b)
    if ra != rb:
        return not ra
    if ra and rb:
        ta, tb = _ready_time(a), _ready_time(b)
        if ta != tb:
            return _after_or_zero(ta, tb)
    xa, xb = _max_restarts(a), _max_restarts(b)
    if xa[0] != xb[0]:
        return xa[0] > xb[0]
    if xa[1] != xb[1]:
        return xa[1] > xb[1]
    ca = fields.parse_time(fields.md(a).get("creationTimestamp"))
    cb = fields.parse_time(fields.md(b).get("creationTimestamp"))
    if ca != cb:
        return _after_or_zero(ca, cb)
    return False


def _cmp(a: Obj, b: Obj) -> int:
    if _less(a, b):
        return -1
    if _less(b, a):
        return 1
    return 0


def sort_for_removal(pods: Iterable[Obj]) -> list[Obj]:
    return sorted(pods, key=functools.cmp_to_key(_cmp))


def _duplicated_index_pods(pods: list[Obj], completions: int) -> tuple[list[Obj], list[Obj]]:
    """Split active Indexed pods into (must go, may stay).

    Pods without a usable index or with an index beyond ``completions`` must go; of pods
    sharing an index, only the one least worth deleting stays.
    """
    rm: list[Obj] = []
    left: list[Obj] = []
    groups: dict[int, list[Obj]] = {}
    for p in sorted(pods, key=fields.completion_index):
        ix = fields.completion_index(p)
        if ix >= completions or ix == fields.UNKNOWN_INDEX:
            rm.append(p)
        else:
            groups.setdefault(ix, []).append(p)
    for ix in sorted(groups):
        group = groups[ix]
        if len(group) == 1:
            left.append(group[0])
        else:
            ordered = sort_for_removal(group)
            rm.extend(ordered[:-1])
            left.append(ordered[-1])
    return rm, left


def active_pods_for_removal(job: Obj, active: list[Obj], rm_at_least: int) -> list[Obj]:
    """Pods to delete: duplicates/invalid indexes always, then the cheapest to lose."""
    if fields.is_indexed(job):
        rm, left = _duplicated_index_pods(active, fields.completions(job) or 0)
    else:
        rm, left = [], list(active)
    if len(rm) < rm_at_least:
        rm += sort_for_removal(left)[: rm_at_least - len(rm)]
    return rm


# -- indexes ----------------------------------------------------------------------------------

def indexes_of(pods: Iterable[Obj]) -> set[int]:
    return {ix for p in pods if (ix := fields.completion_index(p)) != fields.UNKNOWN_INDEX}


def first_pending_indexes(job: Obj, pods: list[Obj], active: list[Obj], succeeded: Intervals,
                          failed: Intervals | None, count: int, completions: int) -> list[int]:
    """The ``count`` lowest indexes that are neither running, succeeded nor failed.

    With replacements waiting for ``Failed``, an index whose pod is still terminating is
    taken too.
    """
    if count <= 0:
        return []
    busy = succeeded.with_indexes(sorted(indexes_of(active)))
    if fields.only_replace_failed_pods(job):
        busy = busy.with_indexes(sorted(indexes_of(p for p in pods if fields.is_terminating(p))))
    if failed is not None:
        busy = busy.merge(failed)
    out: list[int] = []
    candidate = 0
    for first, last in busy:
        while candidate < completions and len(out) < count and candidate < first:
            out.append(candidate)
            candidate += 1
        candidate = max(candidate, last + 1)
    while candidate < completions and len(out) < count:
        out.append(candidate)
        candidate += 1
    return out


def is_valid_index(job: Obj, pod: Obj) -> bool:
    ix = fields.completion_index(pod)
    return ix != fields.UNKNOWN_INDEX and ix < (fields.completions(job) or 0)


def pods_with_delayed_deletion_per_index(job: Obj, pods: list[Obj], active: list[Obj], expected_rm: frozenset[str],
                                         succeeded: Intervals, failed: Intervals | None) -> dict[int, Obj]:
    """Per index, the failed pod whose finalizer stays until its replacement exists.

    The replacement inherits the index's failure count from this pod's annotations, so the
    pod must not vanish before the replacement is created. Indexes already succeeded,
    failed or running need no such pod.
    """
    active_ix = indexes_of(active)
    out: dict[int, Obj] = {}
    for p in pods:
        if not fields.has_tracking_finalizer(p) or fields.uid(p) in expected_rm:
            continue
        if not is_valid_index(job, p) or not is_pod_failed(p, job):
            continue
        ix = fields.completion_index(p)
        if succeeded.has(ix) or (failed is not None and failed.has(ix)) or ix in active_ix:
            continue
        prev = out.get(ix)
        if prev is None or (fields.index_absolute_failure_count(prev) <= fields.index_absolute_failure_count(p)
                            and not finished_time(p) < finished_time(prev)):
            out[ix] = p
    return out


# -- label selectors and claiming -------------------------------------------------------------

def selector_matches(selector: Obj | None, lbls: dict[str, str]) -> bool:
    """metav1.LabelSelector semantics; an absent selector matches nothing, an empty one all."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if lbls.get(k) != v:
            return False
    for req in selector.get("matchExpressions") or []:
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        if op == "In":
            if key not in lbls or lbls[key] not in values:
                return False
        elif op == "NotIn":
            if key in lbls and lbls[key] in values:
                return False
        elif op == "Exists":
            if key not in lbls:
                return False
        elif op == "DoesNotExist":
            if key in lbls:
                return False
        else:
            return False
    return True


def adopt_patch(job: Obj, pod: Obj) -> Obj:
    """Strategic-merge patch that makes the Job the pod's controller (UID precondition)."""
    return {"metadata": {"uid": fields.uid(pod), "ownerReferences": [controller_owner_ref(job)],
                         "finalizers": [fields.JOB_TRACKING_FINALIZER]}}


def release_patch(job: Obj, pod: Obj) -> Obj:
    """Strategic-merge patch that drops our ownerReference and tracking finalizer."""
    return {"metadata": {"uid": fields.uid(pod),
                         "ownerReferences": [{"$patch": "delete", "uid": fields.uid(job)}],
                         "$deleteFromPrimitiveList/finalizers": [fields.JOB_TRACKING_FINALIZER]}}


def remove_finalizer_patch(pod: Obj) -> Obj | None:
    if not fields.has_tracking_finalizer(pod):
        return None
    return {"metadata": {"$deleteFromPrimitiveList/finalizers": [fields.JOB_TRACKING_FINALIZER]}}


def with_tracking_finalizer(pod: Obj) -> Obj:
    """A copy that carries the finalizer, for counting a just-adopted pod in this sync."""
    if fields.has_tracking_finalizer(pod):
        return pod
    out = dict(pod)
    meta: Obj = dict(fields.md(pod))
    meta["finalizers"] = [*(meta.get("finalizers") or []), fields.JOB_TRACKING_FINALIZER]
    out["metadata"] = meta
    return out


def count_ready(pods: Iterable[Obj]) -> int:
    return sum(1 for p in pods if fields.is_ready(p))


def past_backoff_limit_on_failure(job: Obj, pods: list[Obj]) -> bool:
    """With ``restartPolicy: OnFailure`` container restarts of live pods count as failures."""
    tspec = ((fields.spec(job).get("template") or {}).get("spec") or {})
    if tspec.get("restartPolicy") != "OnFailure":
        return False
    restarts = 0
    for p in pods:
        if fields.phase(p) in (fields.RUNNING, fields.PENDING):
            st = p.get("status") or {}
            for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
                restarts += int(cs.get("restartCount") or 0)
    limit = fields.backoff_limit(job)
    if limit == 0:
        return restarts > 0
    return restarts >= limit
