"""The names jobmirror writes into clusters. Change only with a reason, and everywhere at once."""

from __future__ import annotations

import hashlib

from jobapi.names import BUILTIN_JOB_CONTROLLER, CONTROLLER_UID_LABELS, JOBMIRROR_CONTROLLER
from kruntime.resources import Obj

DEFAULT_CONTROLLER_NAME = JOBMIRROR_CONTROLLER
BUILTIN_CONTROLLER_NAME = BUILTIN_JOB_CONTROLLER

#: Every label and annotation key jobmirror reads or writes starts with this; none is ever copied
#: from a manager object to its copy (a user's key there could forge a copy's identity).
PREFIX = "jobmirror.dev/"


def is_ours(key: str) -> bool:
    return key.startswith(PREFIX)


# On the remote copy.
LABEL_ORIGIN = "jobmirror.dev/origin"
LABEL_ORIGIN_UID = "jobmirror.dev/origin-uid"
#: The manager cluster's identity (its kube-system namespace UID): lets GC prove a copy is
#: ours even when two installations share an ``origin`` value.
LABEL_ORIGIN_CLUSTER = "jobmirror.dev/origin-cluster"

def origin_annotation(kind: str) -> str:
    """The annotation on a copy naming its manager object (``<ns>/<name>``); one per kind, so
    the value never has to say which kind it names."""
    return f"jobmirror.dev/origin-{kind.lower()}"


ANNOTATION_ORIGIN_JOB = origin_annotation("Job")

# On the manager Job.
ANNOTATION_CLUSTER = "jobmirror.dev/cluster"
ANNOTATION_REMOTE_NAME = "jobmirror.dev/remote-name"
ANNOTATION_PIN = "jobmirror.dev/pin-cluster"
#: how long the Job is expected to run once started ("90s", "5m", "1h30m", or seconds): lets it backfill
ANNOTATION_EXPECTED_DURATION = "jobmirror.dev/expected-duration"
#: set by users: a label selector (kubectl syntax) over the workers' configured ``labels``
ANNOTATION_WORKER_SELECTOR = "jobmirror.dev/worker-selector"
#: why the Job went where it did: the policy and each worker's load at that moment (or the pin)
ANNOTATION_PLACEMENT_REASON = "jobmirror.dev/placement-reason"
FINALIZER = "jobmirror.dev/cleanup"


def holds_finalizer(obj: Obj) -> bool:
    """Whether ``obj`` carries our finalizer (its copies' cleanup, or the finalizer's release, is left to do)."""
    return FINALIZER in (obj["metadata"].get("finalizers") or [])


#: the ``origin`` of the installation that added FINALIZER: lets it release the finalizer
#: once it no longer claims the Job (namespaces narrowed, controllerName changed)
ANNOTATION_CLAIMED_BY = "jobmirror.dev/claimed-by"
#: set by a user: how the copy is deleted when the manager Job is (Orphan | Foreground | Background)
ANNOTATION_DELETE_PROPAGATION = "jobmirror.dev/delete-propagation"
#: on a copy: digest of the manager pod template's scheduling directives it was last brought in line with
ANNOTATION_TEMPLATE_HASH = "jobmirror.dev/template-hash"

#: the keys of ours a user may set on a manager object (the admission policy lets them through)
USER_ANNOTATIONS = (ANNOTATION_PIN, ANNOTATION_DELETE_PROPAGATION)

FIELD_MANAGER = "jobmirror"

__all__ = ["BUILTIN_CONTROLLER_NAME", "CONTROLLER_UID_LABELS", "DEFAULT_CONTROLLER_NAME"]


#: the default origin before it became per manager cluster: copies of installs upgraded without
#: setting ``origin`` still carry it (``check-config`` warns)
LEGACY_DEFAULT_ORIGIN = "jobmirror"


def default_origin(manager_cluster: str) -> str:
    """The origin used when none is configured: unique per manager cluster, so two
    installations on different manager clusters never share one by accident."""
    return f"jobmirror-{manager_cluster}"[:63].rstrip("-.")


def derived_remote_name(name: str, origin: str) -> str:
    """Deterministic name for a copy that lives in the manager cluster itself (role sharing).

    It cannot share the Job's name there, so it gets a stable suffix; the result stays
    a valid Job name (≤ 63 characters, so the pods' job-name label stays valid too).
    """
    digest = hashlib.sha256(f"{origin}/{name}".encode()).hexdigest()[:8]
    suffix = f"-jm-{digest}"
    return name[: 63 - len(suffix)].rstrip("-.") + suffix
