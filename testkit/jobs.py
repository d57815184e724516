"""Job manifests whose kwok pods do what a test asks, and condition reads: shared by the test
tiers and the benchmarks (``bench versions`` runs the same journeys as the integration tests)."""

from __future__ import annotations

from kruntime.resources import Obj
from mirror.naming import DEFAULT_CONTROLLER_NAME

#: kwok stage inputs (config/kwok-stages.yaml): the pod's outcome, run time and failing exit code
KWOK_OUTCOME = "jobmirror.dev/kwok-outcome"
KWOK_DURATION = "jobmirror.dev/kwok-duration"
KWOK_EXIT_CODE = "jobmirror.dev/kwok-exit-code"


def make_job(
    name: str,
    *,
    managed_by: str | None = DEFAULT_CONTROLLER_NAME,
    completions: int | None = 1,
    parallelism: int = 1,
    outcome: str = "succeed",
    duration_ms: int = 500,
    backoff_limit: int = 6,
    suspend: bool = False,
    indexed: bool = False,
    success_policy: Obj | None = None,
    annotations: dict[str, str] | None = None,
    extra_spec: Obj | None = None,
    exit_code: int | None = None,
) -> Obj:
    """A Job whose pods, on kwok nodes, run ``duration_ms`` and then ``outcome`` (succeed, fail
    with ``exit_code`` (default 1), or hang until deleted)."""
    labels = {KWOK_OUTCOME: outcome} if outcome != "succeed" else {}
    pod_annotations = {KWOK_DURATION: f"{duration_ms}ms"}
    if exit_code is not None:
        pod_annotations[KWOK_EXIT_CODE] = str(exit_code)
    spec: Obj = {
        "parallelism": parallelism,
        "backoffLimit": backoff_limit,
        "template": {
            "metadata": {"labels": labels, "annotations": pod_annotations},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
        },
    }
    if completions is not None:
        spec["completions"] = completions
    if managed_by:
        spec["managedBy"] = managed_by
    if suspend:
        spec["suspend"] = True
    if indexed:
        spec["completionMode"] = "Indexed"
    if success_policy:
        spec["successPolicy"] = success_policy
    spec.update(extra_spec or {})
    md: Obj = {"name": name}
    if annotations:
        md["annotations"] = annotations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": md, "spec": spec}


def cond(job: Obj | None, ctype: str) -> str | None:
    """The status (``"True"``/``"False"``/...) of condition ``ctype``, or None without one."""
    for c in (job or {}).get("status", {}).get("conditions") or []:
        if c["type"] == ctype:
            return str(c["status"])
    return None


def true_types_in_order(job: Obj) -> list[str]:
    """The types of the True conditions, oldest transition first (ties keep the stored order)."""
    conds = sorted((job.get("status") or {}).get("conditions") or [], key=lambda c: c.get("lastTransitionTime", ""))
    return [c["type"] for c in conds if c["status"] == "True"]
