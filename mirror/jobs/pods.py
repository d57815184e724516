"""How the Job controller in a worker names and labels the pods of a copy (``MirroredKind.pods``).

Worker events arrive about pods, not copies; this is the Job kind's answer to "which copy
could own a pod of this name, and which copy do its labels name". Only the labels decide:
names give candidates so the event watch can drop what cannot be ours without a read.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from jobapi.names import CONTROLLER_UID_LABELS
from jobapi.objects import labels_of
from kruntime.resources import Obj

_GENERATED_SUFFIX = re.compile(r"^(?P<base>.+)-[a-z0-9]{5}$")
_INDEX_SUFFIX = re.compile(r"^(?P<base>.+)-(?P<index>\d+)$")


def job_name_candidates(pod_name: str) -> list[tuple[str, bool]]:
    """The Job names a Job's pod of this name can have, with whether that Job must be Indexed.

    The Job controller names pods ``<job>-<5 random>`` or, Indexed, ``<job>-<index>-<5 random>``.
    """
    m = _GENERATED_SUFFIX.match(pod_name)
    if not m:
        return []
    base = m.group("base")
    out = [(base, False)]
    idx = _INDEX_SUFFIX.match(base)
    if idx:
        out.append((idx.group("base"), True))
    return out


class JobPods:
    def selector(self, copy: Obj) -> str:
        # the batch.kubernetes.io/ label: set by every Job controller since 1.27, older than our oldest worker
        return f"{CONTROLLER_UID_LABELS[-1]}={copy['metadata']['uid']}"

    def owner_uid(self, pod: Obj) -> str:
        labels = labels_of(pod)
        return next((labels[k] for k in reversed(CONTROLLER_UID_LABELS) if labels.get(k)), "")

    def owner_candidates(self, pod_name: str, copy_named: Callable[[str], Obj | None]) -> list[Obj]:
        found = []
        for name, indexed in job_name_candidates(pod_name):
            c = copy_named(name)
            if c is not None and (not indexed or (c.get("spec") or {}).get("completionMode") == "Indexed"):
                found.append(c)
        return found


JOB_PODS = JobPods()
