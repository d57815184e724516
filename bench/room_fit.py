"""Micro-benchmark of one ``RoomView.fit`` call (no cluster): 4 nodes, ~440 pods, 20 copies reserved.

What a placement costs the controller's CPU, in four cases: nothing changed since the last
fit; one pod event before it; one copy placed (reserved) before it; one reservation released
and another made before it. Run it with
``PYTHONPATH=. .venv/bin/python bench/room_fit.py`` (not through ``python -m bench``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from kruntime.resources import Obj
from mirror.room.requests import PodShape, shape_of_template
from mirror.room.view import RoomView, slim_node, slim_pod
from testkit.fakecluster import FakeApiServer

NODES, PODS_PER_NODE, RESERVED = 4, 108, 20


def _node(i: int) -> Obj:
    return {"metadata": {"name": f"node-{i}", "resourceVersion": "1", "labels": {"kubernetes.io/hostname": f"n{i}"}},
            "spec": {}, "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110",
                                                   "ephemeral-storage": "100Gi"},
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, node: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": "1",
                         "labels": {"batch.kubernetes.io/job-name": name}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {
                "cpu": "100m", "memory": "64Mi"}}}]}}


def _view() -> tuple[RoomView, PodShape]:
    view = RoomView("w", FakeApiServer().client("w"))  # the informers are fed by hand, never run
    for i in range(NODES):
        view.nodes.cache[f"node-{i}"] = slim_node(_node(i))
    for i in range(NODES * PODS_PER_NODE):
        p = slim_pod(_pod(f"p{i}", f"node-{i % NODES}"))
        view.pods.cache[f"ns/p{i}"] = p
        view._on_pod("ADDED", None, p)
    shape = shape_of_template({"spec": {"containers": [{"name": "c", "resources": {"requests": {
        "cpu": "100m", "memory": "64Mi"}}}]}})
    for i in range(RESERVED):
        view.reserve(f"r{i}", "ns", f"r{i}", shape, 1)
    return view, shape


def _time(step: Callable[[RoomView, PodShape, int], None], n: int) -> float:
    """Microseconds per ``step``, best of 5 rounds, each on a fresh view."""
    best = float("inf")
    for _ in range(5):
        view, shape = _view()
        view.fit(shape, 1)
        t0 = time.perf_counter()
        for i in range(n):
            step(view, shape, i)
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e6


def steady(view: RoomView, shape: PodShape, _: int) -> None:
    view.fit(shape, 1)


def after_pod_event(view: RoomView, shape: PodShape, i: int) -> None:
    old = view.pods.cache["ns/p0"]
    new = dataclasses.replace(old, version=i)
    view.pods.cache["ns/p0"] = new
    view._on_pod("MODIFIED", old, new)
    view.fit(shape, 1)


def after_reserve(view: RoomView, shape: PodShape, i: int) -> None:
    view.reserve(f"new{i}", "ns", f"new{i}", shape, 1)
    view.fit(shape, 1)


def after_release_and_reserve(view: RoomView, shape: PodShape, i: int) -> None:
    view.release(f"r{i % RESERVED}")  # RESERVED stay outstanding: one out, one in
    view.reserve(f"r{i % RESERVED}", "ns", f"r{i % RESERVED}", shape, 1)
    view.fit(shape, 1)


def main() -> None:

    print(f"RoomView.fit, {NODES} nodes, {NODES * PODS_PER_NODE} pods, {RESERVED} reservations (µs per call):")
    for name, step, n in (("nothing changed", steady, 2000), ("after a pod event", after_pod_event, 2000),
                          ("after a reserve", after_reserve, 100),  # 20 -> 120 outstanding
                          ("after release + reserve", after_release_and_reserve, 2000)):
        print(f"  {name:<24} {_time(step, n):8.1f}")


if __name__ == "__main__":
    main()
