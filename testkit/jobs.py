"""The one Job builder (``make_job``: kwok pods that do what a test asks) and condition reads, shared by
the test tiers, the e2e harness and the benchmarks (``bench versions`` runs the same journeys as the
integration tests), so a Job is made runnable in one place."""

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
    namespace: str | None = None,
    managed_by: str | None = DEFAULT_CONTROLLER_NAME,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    completions: int | None = 1,
    parallelism: int | None = 1,
    backoff_limit: int | None = 6,
    suspend: bool = False,
    indexed: bool = False,
    success_policy: Obj | None = None,
    pod_failure_policy: Obj | None = None,
    kwok: bool = True,
    outcome: str = "succeed",
    duration_ms: int = 500,
    exit_code: int | None = None,
    pod_labels: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    container_name: str = "main",
    image: str | None = "busybox",
    command: list[str] | None = None,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    container: Obj | None = None,
    pod_spec: Obj | None = None,
    extra_spec: Obj | None = None,
) -> Obj:
    """The one batch/v1 Job builder of the tests, e2e and benchmarks.

    With ``kwok`` its pods, on kwok nodes, run ``duration_ms`` and then ``outcome`` (succeed, fail
    with ``exit_code`` (default 1), or hang until deleted); ``kwok=False`` writes no stage inputs
    (a template without metadata unless ``pod_labels``/``pod_annotations`` ask). ``pod_labels`` and
    ``pod_annotations`` go over the stage inputs; ``container`` adds fields to the one container
    (args, imagePullPolicy …), ``pod_spec`` to the pod spec, ``extra_spec`` to the Job spec. A count
    passed as None is left out (the API server's default), and so is ``image=None`` (for pure tables).
    """
    tmpl_labels: dict[str, str] = {}
    tmpl_annotations: dict[str, str] = {}
    if kwok:
        tmpl_labels = {KWOK_OUTCOME: outcome} if outcome != "succeed" else {}
        tmpl_annotations = {KWOK_DURATION: f"{duration_ms}ms"}
        if exit_code is not None:
            tmpl_annotations[KWOK_EXIT_CODE] = str(exit_code)
    tmpl_labels.update(pod_labels or {})
    tmpl_annotations.update(pod_annotations or {})
    main: Obj = {"name": container_name} if image is None else {"name": container_name, "image": image}
    if command is not None:
        main["command"] = command
    resources = {k: dict(v) for k, v in (("requests", requests), ("limits", limits)) if v}
    if resources:
        main["resources"] = resources
    main.update(container or {})
    template: Obj = {"spec": {"restartPolicy": "Never", "containers": [main], **(pod_spec or {})}}
    if kwok or pod_labels or pod_annotations:
        template = {"metadata": {"labels": tmpl_labels, "annotations": tmpl_annotations}, **template}
    spec: Obj = {"template": template}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
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
    if pod_failure_policy:
        spec["podFailurePolicy"] = pod_failure_policy
    spec.update(extra_spec or {})
    md: Obj = {"name": name}
    if namespace:
        md["namespace"] = namespace
    if labels:
        md["labels"] = labels
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
