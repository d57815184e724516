"""What the room view's cache costs per pod (issue 38: ≤ 300 bytes with its key).

20,000 pods shaped as a batch worker's are (Job pods named after their Job, a few request shapes,
a thousand nodes, fifty namespaces), listed through the room view's own informer; the bytes still
allocated after the relist (tracemalloc) are what the cache holds. A dict of the same fields cost
1,231 bytes a pod here (c26652e-1d5afd1's ``slim_pod``)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

from kruntime.resources import Obj, Resource
from mirror.room.view import pod_informer

PODS = 20_000
MAX_BYTES_PER_POD = 300
SHAPES = ({"cpu": "100m", "memory": "64Mi"}, {"cpu": "1", "memory": "2Gi"},
          {"cpu": "250m", "memory": "512Mi", "nvidia.com/gpu": "1"})


def pod(i: int) -> Obj:
    job = f"train-{i // 4:06d}"
    return {"metadata": {"name": f"{job}-{i % 4}-x8k{i % 97:02d}", "namespace": f"team-{i % 50:02d}",
                         "uid": f"6f1c2a3e-0b7d-4c55-9d3e-{i:012d}", "resourceVersion": str(48_000_000 + i),
                         "labels": {"batch.kubernetes.io/job-name": job, "batch.kubernetes.io/controller-uid": job},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                                              "uid": job, "controller": True}]},
            "spec": {"nodeName": f"worker-node-{i % 1000:04d}", "containers": [
                {"name": "main", "image": "registry.example/train:v3", "resources": {"requests": SHAPES[i % 3]}}]},
            "status": {"phase": "Running", "podIP": f"10.0.{i // 250 % 256}.{i % 250}"}}


class Lister:
    name = "worker"

    async def list_pages(self, resource: Resource, namespace: str | None,
                         **_: Any) -> AsyncIterator[tuple[list[Obj], str]]:
        for start in range(0, PODS, 500):
            yield [pod(i) for i in range(start, start + 500)], "1"


async def test_a_cached_pod_costs_at_most_300_bytes_with_its_key() -> None:
    informer = pod_informer(Lister())  # type: ignore[arg-type]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        await informer._relist()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(informer.cache) == PODS
    per_pod = held / PODS
    print(f"room view: {per_pod:.0f} bytes per cached pod ({PODS} pods)")
    assert per_pod <= MAX_BYTES_PER_POD, per_pod
