"""``batch/v1`` Job as a :class:`mirror.kinds.MirroredKind`: the one kind mirrored today.

It only binds the Job-specific pure modules (``remote_copy``, ``status``) and the shared
vocabulary (``jobapi``) to the seam; nothing here talks to a cluster.
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import datetime

from jobapi import conditions as jc
from kruntime.resources import JOBS, Obj, Resource
from mirror.jobs import remote_copy, status_translation
from mirror.jobs.pods import JOB_PODS
from mirror.kinds import CopyPods, PodDemand


def pods_wanted(job_spec: Obj) -> int:
    """How many pods of a Job run at once at most: ``min(parallelism, completions)`` (at least one, for the fit)."""
    parallelism = int(job_spec.get("parallelism", 1) or 0)
    return max(1, min(parallelism, int(job_spec.get("completions") or parallelism)))


class JobKind:
    resource: Resource = JOBS
    pods: CopyPods | None = JOB_PODS

    @property
    def name(self) -> str:
        return self.resource.kind

    def managed_by(self, obj: Obj) -> str | None:
        value = (obj.get("spec") or {}).get("managedBy")
        return value if isinstance(value, str) else None

    def build_copy(self, manager: Obj, *, origin: str, origin_cluster: str, remote_name: str) -> Obj:
        return remote_copy.build_remote_copy(manager, origin=origin, origin_cluster=origin_cluster,
                                             remote_name=remote_name)

    def spec_patch(self, manager: Obj, remote: Obj) -> Obj | None:
        return remote_copy.spec_patch(manager, remote)

    def recreate_when_refused(self, patch: Obj) -> bool:
        return remote_copy.rewrites_template(patch)

    def dropped_fields(self, sent: Obj, created: Obj) -> list[str]:
        return remote_copy.dropped_fields(sent, created)

    def desired_status(self, manager: Obj, remote: Obj | None, now: datetime) -> Obj:
        return status_translation.desired_manager_status(manager, remote, now)

    def decided_status(self, manager: Obj, now: datetime) -> Obj | None:
        return status_translation.decided_final_status(manager, now)

    def status_differs(self, current: Obj | None, desired: Obj | None) -> bool:
        return status_translation.status_differs(current, desired)

    def outcome(self, copy: Obj) -> Hashable | None:
        decided = status_translation.worker_outcome(jc.job_conditions(copy))
        return decided if decided.path is not None else None

    def is_finished(self, obj: Obj) -> bool:
        return jc.is_finished(obj)

    def pod_demand(self, obj: Obj) -> list[PodDemand]:
        spec = obj.get("spec") or {}
        return [PodDemand(spec.get("template") or {}, pods_wanted(spec))]

    def is_suspended(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("suspend"))

    def state(self, obj: Obj) -> str | None:
        conds = jc.job_conditions(obj)
        for t in jc.TERMINAL_TYPES:
            if jc.is_true(conds, t):
                return t
        return "Suspended" if self.is_suspended(obj) else None


JOB_KIND = JobKind()
