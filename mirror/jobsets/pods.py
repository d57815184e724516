"""How a worker's JobSet controller names and labels the pods of a copy (``MirroredKind.pods``).

A JobSet's pods belong to its child Jobs, named ``<jobset>-<replicatedJob>-<index>``; their pods
add ``-<index>-<5 random>``. Every pod carries the JobSet's name and uid labels, which decide;
names only give candidates so the worker event watch can drop what cannot be ours without a read.
"""

from __future__ import annotations

from collections.abc import Callable

from jobapi.objects import labels_of
from kruntime.resources import Obj

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"


def jobset_name_candidates(pod_name: str) -> list[str]:
    """Every prefix of ``pod_name`` before one of its dashes, longest first: the JobSet's name is
    one of them (a replicatedJob's name may hold dashes too, so none can be ruled out)."""
    return [pod_name[:i] for i in range(len(pod_name) - 1, 0, -1) if pod_name[i] == "-"]


class JobSetPods:
    def selector(self, copy: Obj) -> str:
        return f"{JOBSET_UID_LABEL}={copy['metadata']['uid']}"

    def owner_uid(self, pod: Obj) -> str:
        return labels_of(pod).get(JOBSET_UID_LABEL) or ""

    def owner_candidates(self, pod_name: str, copy_named: Callable[[str], Obj | None]) -> list[Obj]:
        found = (copy_named(name) for name in jobset_name_candidates(pod_name))
        return [c for c in found if c is not None]


JOBSET_PODS = JobSetPods()
