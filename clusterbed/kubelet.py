"""Drive pods through their lifecycle via the API exactly as a kubelet would.

On clusters without kwok nodes, tests play the kubelet: they write the pod status
subresource (phase, conditions, container states), the same way the upstream Job
integration tests do. Nothing here fakes the API server.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kruntime.client import ClusterClient
from kruntime.resources import PODS, Obj


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _container_states(pod: Obj, state: dict[str, Any], ready: bool) -> list[Obj]:
    return [
        {"name": c["name"], "image": c.get("image", ""), "ready": ready, "restartCount": 0, "state": state,
         "started": ready}
        for c in pod.get("spec", {}).get("containers", [])
    ]


def running_status(pod: Obj, *, ready: bool = True) -> Obj:
    now = _now()
    cond = "True" if ready else "False"
    return {
        "phase": "Running",
        "startTime": now,
        "conditions": [
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": cond, "lastTransitionTime": now},
            {"type": "ContainersReady", "status": cond, "lastTransitionTime": now},
        ],
        "containerStatuses": _container_states(pod, {"running": {"startedAt": now}}, ready),
    }


def terminated_status(pod: Obj, *, succeeded: bool, exit_code: int | None = None,
                      conditions: list[Obj] | None = None) -> Obj:
    now = _now()
    code = 0 if succeeded else (1 if exit_code is None else exit_code)
    reason = "PodCompleted" if succeeded else "PodFailed"
    return {
        "phase": "Succeeded" if succeeded else "Failed",
        "startTime": pod.get("status", {}).get("startTime", now),
        "conditions": [
            {"type": "Ready", "status": "False", "reason": reason, "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "False", "reason": reason, "lastTransitionTime": now},
            *(conditions or []),
        ],
        "containerStatuses": _container_states(
            pod,
            {"terminated": {"exitCode": code, "reason": "Completed" if succeeded else "Error",
                            "startedAt": now, "finishedAt": now}},
            False,
        ),
    }


async def write_status(client: ClusterClient, pod: Obj, status: Obj) -> Obj:
    md = pod["metadata"]
    body = {**pod, "status": status}
    return await client.replace(PODS, md["namespace"], md["name"], body, subresource="status")


async def start_pod(client: ClusterClient, pod: Obj, *, ready: bool = True) -> Obj:
    return await write_status(client, pod, running_status(pod, ready=ready))


async def finish_pod(client: ClusterClient, pod: Obj, *, succeeded: bool, exit_code: int | None = None,
                     conditions: list[Obj] | None = None) -> Obj:
    """Move a pod to Succeeded/Failed; ``conditions`` adds e.g. DisruptionTarget."""
    fresh = await client.get(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
    return await write_status(client, fresh, terminated_status(fresh, succeeded=succeeded, exit_code=exit_code,
                                                               conditions=conditions))


async def job_pods(client: ClusterClient, namespace: str, job_name: str) -> list[Obj]:
    items, _ = await client.list_all(PODS, namespace, label_selector=f"batch.kubernetes.io/job-name={job_name}")
    return sorted(items, key=lambda p: p["metadata"].get("creationTimestamp", "") + p["metadata"]["name"])
