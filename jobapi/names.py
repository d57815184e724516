"""Well-known names of the batch/v1 API and of the two controllers that manage Jobs here."""

from __future__ import annotations

#: ``spec.managedBy`` of a Job the built-in (kube-controller-manager or our builtin) controller runs.
BUILTIN_JOB_CONTROLLER = "kubernetes.io/job-controller"
#: ``spec.managedBy`` the mirror claims by default (configurable as ``controllerName``).
JOBMIRROR_CONTROLLER = "jobmirror.dev/controller"

JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX_KEY = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT_KEY = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT_KEY = "batch.kubernetes.io/job-index-ignored-failure-count"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"

#: Labels the API server generates for a Job's selector and pod template.
CONTROLLER_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")
JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")

NON_INDEXED = "NonIndexed"
INDEXED = "Indexed"

INT32_MAX = 2**31 - 1


def atoi(text: object) -> int | None:
    """A decimal integer the way Go's ``strconv.Atoi`` reads it, else None.

    Optional sign, then ASCII digits only: Python's ``int()`` also takes ``"1_0"``, ``" 7"``
    and non-ASCII digits (``"²"``), which every Kubernetes component rejects.
    """
    if not isinstance(text, str):
        return None
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    return int(text)
