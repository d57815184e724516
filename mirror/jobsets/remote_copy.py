"""Build the worker-side copy of a manager JobSet, and the spec changes that must follow it.

Pure functions over raw JSON, like the Job kind's: fields this code does not know travel to the
worker unchanged. What JobSet's own webhook lets change on a live JobSet is little: ``suspend``
(and, while suspended, the pod templates' scheduling directives, not followed yet); its
``replicatedJobs`` and ``managedBy`` are otherwise immutable.
"""

from __future__ import annotations

import copy

from jobapi.names import CONTROLLER_UID_LABELS, JOB_NAME_LABELS
from kruntime.resources import Obj
from mirror import identity
from mirror.naming import is_ours

API_VERSION = "jobset.x-k8s.io/v1alpha2"
KIND = "JobSet"
#: labels the JobSet controller (and a Job controller below it) write for one cluster's objects
GENERATED_LABEL_PREFIX = "jobset.sigs.k8s.io/"
_DROP_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "managedFields", "ownerReferences", "finalizers", "selfLink")
#: spec fields dropped from the copy: ours to decide (managedBy), or able to delete the copy on the
#: worker before its outcome is mirrored (a worker-side TTL; we delete the copy ourselves)
_DROP_SPEC = ("managedBy", "ttlSecondsAfterFinished")
_SYSTEM_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
_GENERATED_LABELS = (*CONTROLLER_UID_LABELS, *JOB_NAME_LABELS)


def _generated(key: str) -> bool:
    """A label one cluster's controllers wrote for their own objects: meaningless in another."""
    return key.startswith(GENERATED_LABEL_PREFIX) or key in _GENERATED_LABELS


def _theirs(keys: Obj | None, skip: tuple[str, ...] = ()) -> Obj:
    """The user's labels or annotations: none of ours (``jobmirror.dev/``), none in ``skip``."""
    return {k: v for k, v in (keys or {}).items() if not is_ours(k) and k not in skip}


def _user_labels(labels: Obj | None) -> Obj:
    return {k: v for k, v in _theirs(labels).items() if not _generated(k)}


def _clean_template_labels(template: Obj, *, drop_ours: bool) -> None:
    """Drop generated labels (and ours, with ``drop_ours``) from one template's metadata, in place
    (a present map stays a map)."""
    md = template.get("metadata")
    if isinstance(md, dict) and isinstance(md.get("labels"), dict):
        md["labels"] = {k: v for k, v in md["labels"].items()
                        if not _generated(k) and not (drop_ours and is_ours(k))}


def sanitised_spec(spec: Obj) -> Obj:
    """The manager's spec as the worker's JobSet controller should run it: no managedBy, no TTL,
    no label a controller generated in the manager on a Job or pod template, none of ours on a Job's."""
    out = {k: copy.deepcopy(v) for k, v in spec.items() if k not in _DROP_SPEC}
    for rjob in out.get("replicatedJobs") or []:
        job_template = rjob.get("template") if isinstance(rjob, dict) else None
        if not isinstance(job_template, dict):
            continue
        # A child Job (of the mirrored Job kind) labelled as one of our copies would be taken for a
        # copy by the worker's caches; its pods' labels stay the user's, as a Job copy's do.
        _clean_template_labels(job_template, drop_ours=True)
        pod_template = (job_template.get("spec") or {}).get("template")
        if isinstance(pod_template, dict):
            _clean_template_labels(pod_template, drop_ours=False)
    return out


def build_remote_copy(manager: Obj, *, origin: str, origin_cluster: str, remote_name: str) -> Obj:
    """The JobSet to create in a worker: the manager's spec, sanitised, stamped as our copy, no status."""
    md = manager["metadata"]
    meta = {k: copy.deepcopy(v) for k, v in md.items() if k not in _DROP_METADATA}
    meta["name"] = remote_name
    ours, our_annotations = identity.stamp(KIND, manager, origin=origin, origin_cluster=origin_cluster)
    meta["labels"] = {**_user_labels(meta.get("labels")), **ours}
    meta["annotations"] = {**_theirs(meta.get("annotations"), _SYSTEM_ANNOTATIONS), **our_annotations}
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta,
            "spec": sanitised_spec(manager.get("spec") or {})}


def _metadata_additions(manager: Obj, remote: Obj) -> Obj:
    """User labels/annotations of the manager the copy lacks or differs in; removals are not
    followed (a key on the copy may be the worker's own)."""
    md, rmd = manager.get("metadata") or {}, remote.get("metadata") or {}
    out: Obj = {}
    for field, want in (("labels", _user_labels(md.get("labels"))),
                        ("annotations", _theirs(md.get("annotations"), _SYSTEM_ANNOTATIONS))):
        have = rmd.get(field) or {}
        changed = {k: v for k, v in want.items() if have.get(k) != v}
        if changed:
            out[field] = changed
    return out


def spec_patch(manager: Obj, remote: Obj) -> Obj | None:
    """A merge patch bringing the copy's ``suspend`` (and user metadata) in line with the manager's, or None."""
    want = bool((manager.get("spec") or {}).get("suspend"))
    have = bool((remote.get("spec") or {}).get("suspend"))
    out: Obj = {}
    if want != have:
        out["spec"] = {"suspend": want}
    meta = _metadata_additions(manager, remote)
    if meta:
        out["metadata"] = meta
    return out or None


def pod_demand(jobset: Obj) -> list[tuple[Obj, int]]:
    """Each replicatedJob's pod template and how many of its pods run at once at most: ``replicas``
    times the Job template's ``parallelism`` (both default to 1)."""
    out = []
    for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        if not isinstance(rjob, dict):
            continue
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        out.append((job_spec.get("template") or {}, _count(rjob.get("replicas")) * _count(job_spec.get("parallelism"))))
    return out


def _count(value: object) -> int:
    """A replicas/parallelism field: 1 when absent, never negative."""
    if value is None:
        return 1
    return max(value, 0) if isinstance(value, int) and not isinstance(value, bool) else 1
