"""The API resources the simulated clusters serve, and what discovery says about them (pure).

Only built-in kinds: a probe for an API the fleet does not serve (``jobset.x-k8s.io``) gets the
real server's 404, so the controller finds that API off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: every resource can be selected by these
META_FIELDS = ("metadata.name", "metadata.namespace")
POD_FIELDS = ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
              "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName")
EVENT_FIELDS = ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
                "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
                "reason", "reportingComponent", "source", "type")


@dataclass(frozen=True, slots=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    #: written through a ``/status`` subresource (main writes keep it; creates reset it)
    status: bool = False
    #: field paths a field selector may name besides metadata.name/namespace (the real server's list)
    fields: tuple[str, ...] = ()
    #: a review: POST answers it, nothing is stored
    review: bool = False

    @property
    def key(self) -> str:
        return f"{self.group_version}/{self.plural}"

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def selectable(self) -> frozenset[str]:
        return frozenset((*META_FIELDS, *self.fields))


PODS = Kind("", "v1", "pods", "Pod", status=True, fields=POD_FIELDS)
NAMESPACES = Kind("", "v1", "namespaces", "Namespace", namespaced=False, status=True, fields=("status.phase",))
NODES = Kind("", "v1", "nodes", "Node", namespaced=False, status=True, fields=("spec.unschedulable",))
EVENTS = Kind("", "v1", "events", "Event", fields=EVENT_FIELDS)
SERVICE_ACCOUNTS = Kind("", "v1", "serviceaccounts", "ServiceAccount")
JOBS = Kind("batch", "v1", "jobs", "Job", status=True, fields=("status.successful",))
LEASES = Kind("coordination.k8s.io", "v1", "leases", "Lease")
PRIORITY_CLASSES = Kind("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)

KINDS: tuple[Kind, ...] = (
    PODS, NAMESPACES, NODES, EVENTS, SERVICE_ACCOUNTS, JOBS, LEASES, PRIORITY_CLASSES,
    Kind("", "v1", "configmaps", "ConfigMap"),
    Kind("", "v1", "secrets", "Secret", fields=("type",)),
    Kind("", "v1", "services", "Service", status=True),
    Kind("", "v1", "resourcequotas", "ResourceQuota", status=True),
    Kind("", "v1", "limitranges", "LimitRange"),
    Kind("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", status=True),
    Kind("batch", "v1", "cronjobs", "CronJob", status=True),
    Kind("apps", "v1", "deployments", "Deployment", status=True),
    Kind("apps", "v1", "replicasets", "ReplicaSet", status=True),
    Kind("apps", "v1", "daemonsets", "DaemonSet", status=True),
    Kind("apps", "v1", "statefulsets", "StatefulSet", status=True),
    Kind("events.k8s.io", "v1", "events", "Event"),
    Kind("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", namespaced=False,
         review=True),
    Kind("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", namespaced=False,
         review=True),
    Kind("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False, review=True),
    Kind("authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", review=True),
    Kind("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False, review=True),
    Kind("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", namespaced=False, review=True),
)

#: (group/version, plural) -> kind
BY_PATH: dict[tuple[str, str], Kind] = {(k.group_version, k.plural): k for k in KINDS}


def selectable_fields(kind: Kind, obj: dict[str, Any]) -> dict[str, str] | None:
    """The values of ``kind``'s selectable fields in ``obj`` (as the server renders them), None when none."""
    if not kind.fields:
        return None
    return {path: _field_value(obj, path) for path in kind.fields}


def _field_value(obj: dict[str, Any], path: str) -> str:
    if path == "source":  # an Event's source is selected by its component
        path = "source.component"
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "false" if path in ("spec.hostNetwork", "spec.unschedulable") else ""
    return str(value)


def group_versions() -> dict[str, list[Kind]]:
    """Served kinds by group/version (discovery)."""
    out: dict[str, list[Kind]] = {}
    for k in KINDS:
        out.setdefault(k.group_version, []).append(k)
    return out


def resource_list(group_version: str) -> dict[str, Any] | None:
    """``/api/v1`` or ``/apis/<group>/<version>``: the APIResourceList, None when not served."""
    kinds = group_versions().get(group_version)
    if kinds is None:
        return None
    resources = []
    for k in kinds:
        verbs = ["create"] if k.review else ["create", "delete", "get", "list", "patch", "update", "watch"]
        resources.append({"name": k.plural, "singularName": k.kind.lower(), "namespaced": k.namespaced,
                          "kind": k.kind, "verbs": verbs})
        if k.status:
            resources.append({"name": f"{k.plural}/status", "singularName": "", "namespaced": k.namespaced,
                              "kind": k.kind, "verbs": ["get", "patch", "update"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def group_list() -> dict[str, Any]:
    """``/apis``: every named group served."""
    groups: dict[str, list[str]] = {}
    for gv in group_versions():
        if "/" in gv:
            group, version = gv.split("/")
            groups.setdefault(group, []).append(version)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
         "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}} for g, vs in groups.items()]}
