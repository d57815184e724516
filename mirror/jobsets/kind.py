"""``jobset.x-k8s.io/v1alpha2`` JobSet as a :class:`mirror.kinds.MirroredKind`.

It binds the JobSet-specific pure modules to the seam; nothing here talks to a cluster. Enabled
by the config's ``kinds`` (the manager must serve the JobSet CRD, the workers run JobSet).
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import datetime

from kruntime.resources import Obj, Resource
from mirror.jobs.remote_copy import dropped_fields
from mirror.jobsets import remote_copy, status_translation
from mirror.jobsets.pods import JOBSET_PODS
from mirror.kinds import CopyPods, PodDemand

JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")


class JobSetKind:
    resource: Resource = JOBSETS
    pods: CopyPods | None = JOBSET_PODS

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
        return False  # the patch never rewrites a template: a refusal is not met by re-creating

    def dropped_fields(self, sent: Obj, created: Obj) -> list[str]:
        return dropped_fields(sent, created)

    def desired_status(self, manager: Obj, remote: Obj | None, now: datetime) -> Obj:
        return status_translation.desired_manager_status(manager, remote, now)

    def decided_status(self, manager: Obj, now: datetime) -> Obj | None:
        return None  # no interim condition: decided and finished are written in one go

    def status_differs(self, current: Obj | None, desired: Obj | None) -> bool:
        return status_translation.status_differs(current, desired)

    def outcome(self, copy: Obj) -> Hashable | None:
        return status_translation.terminal_state(copy.get("status"))

    def is_finished(self, obj: Obj) -> bool:
        return status_translation.is_finished(obj)

    def is_suspended(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("suspend"))

    def state(self, obj: Obj) -> str | None:
        ended = status_translation.terminal_state(obj.get("status"))
        if ended is not None:
            return ended
        return status_translation.SUSPENDED if self.is_suspended(obj) else None

    def pod_demand(self, obj: Obj) -> list[PodDemand]:
        return [PodDemand(template, count) for template, count in remote_copy.pod_demand(obj)]

    def pods_wanted(self, obj: Obj) -> int:
        """Pods it runs at once at most (at least one)."""
        return max(1, sum(d.pods for d in self.pod_demand(obj)))


JOBSET_KIND = JobSetKind()
