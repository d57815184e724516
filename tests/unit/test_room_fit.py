"""Table tests of the room model: quantities, a pod's effective request, node and worker fit."""

from __future__ import annotations

from typing import Any

import pytest

from mirror.room.fit import (
    NodeRoom,
    Taint,
    node_room,
    pods_fitting_now,
    runs_now,
    selects,
    tolerates,
    worker_fit,
)
from mirror.room.quantity import QuantityError, amount, parse, show
from mirror.room.requests import HostPort, PodShape, pod_requests, shape_of_template

GPU = "example.com/gpu"


@pytest.mark.parametrize(("resource", "text", "want"), [
    ("cpu", "500m", 500), ("cpu", "2", 2000), ("cpu", "0.1", 100), ("cpu", "1.0001", 1001),  # rounded up
    ("cpu", "100u", 1), ("cpu", "1e3", 1_000_000), ("memory", "1Gi", 2**30), ("memory", "1.5Mi", 1572864),
    ("memory", "128M", 128_000_000), ("memory", "1k", 1000), ("memory", "0.5", 1), ("pods", "110", 110),
    (GPU, "1", 1), ("memory", "1E", 10**18), ("memory", ".5Ki", 512),
])
def test_amount(resource: str, text: str, want: int) -> None:
    assert amount(resource, text) == want


@pytest.mark.parametrize("bad", ["", "1.2.3", "Gi", "1 Gi", "1gi", "--1", "1e", "abc"])
def test_bad_quantities_are_named(bad: str) -> None:
    with pytest.raises(QuantityError, match="not a Kubernetes quantity"):
        parse(bad)


@pytest.mark.parametrize(("resource", "value", "shown"), [
    ("cpu", 500, "500m"), ("cpu", 4000, "4"), ("memory", 2**30, "1Gi"), ("memory", 3 * 2**20, "3Mi"), (GPU, 2, "2"),
])
def test_show(resource: str, value: int, shown: str) -> None:
    assert show(resource, value) == shown


def c(name: str = "c", requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
      **kw: Any) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    return {"name": name, "resources": res, **kw}


@pytest.mark.parametrize(("spec", "want"), [
    ({"containers": [c(requests={"cpu": "1"}), c(requests={"cpu": "500m", "memory": "1Gi"})]},
     {"cpu": 1500, "memory": 2**30}),
    # a limit without a request requests the limit
    ({"containers": [c(limits={"cpu": "2", GPU: "1"})]}, {"cpu": 2000, GPU: 1}),
    ({"containers": [c(requests={"cpu": "1"}, limits={"cpu": "2"})]}, {"cpu": 1000}),
    # an ordinary init container runs alone: the larger of it and the regular containers
    ({"initContainers": [c(requests={"cpu": "3"})], "containers": [c(requests={"cpu": "1"})]}, {"cpu": 3000}),
    ({"initContainers": [c(requests={"cpu": "500m"})], "containers": [c(requests={"cpu": "1"})]}, {"cpu": 1000}),
    # a sidecar keeps running: added to the regular containers, and to every init container after it
    ({"initContainers": [c(requests={"cpu": "1"}, restartPolicy="Always"), c("i2", requests={"cpu": "2"})],
      "containers": [c(requests={"cpu": "1"})]}, {"cpu": 3000}),
    ({"initContainers": [c("i1", requests={"cpu": "2"}), c(requests={"cpu": "1"}, restartPolicy="Always")],
      "containers": [c(requests={"cpu": "500m"})]}, {"cpu": 2000}),
    # pod overhead on top; pod-level requests replace the container sum for what they name
    ({"containers": [c(requests={"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "64Mi"}},
     {"cpu": 1250, "memory": 64 * 2**20}),
    ({"containers": [c(requests={"cpu": "1", "memory": "1Gi"})], "resources": {"requests": {"cpu": "3"}}},
     {"cpu": 3000, "memory": 2**30}),
    ({"containers": [c()]}, {}),
])
def test_pod_requests(spec: dict[str, Any], want: dict[str, int]) -> None:
    assert pod_requests(spec) == want


def node(name: str = "n", *, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
         labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         cordoned: bool = False, ready: bool = True,
         extra: dict[str, str] | None = None) -> NodeRoom:
    return node_room({
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"unschedulable": cordoned, "taints": taints or []},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    })


def shape(cpu: str = "1", *, extra: dict[str, str] | None = None, **spec: Any) -> PodShape:
    return shape_of_template({"spec": {"containers": [c(requests={"cpu": cpu, **(extra or {})})], **spec}})


@pytest.mark.parametrize(("toleration", "taint", "want"), [
    ({"key": "a", "value": "b", "effect": "NoSchedule"}, Taint("a", "b", "NoSchedule"), True),
    ({"key": "a", "value": "c", "effect": "NoSchedule"}, Taint("a", "b", "NoSchedule"), False),
    ({"key": "a", "operator": "Exists"}, Taint("a", "b", "NoExecute"), True),
    ({"operator": "Exists"}, Taint("x", "y", "NoSchedule"), True),
    ({"key": "a", "operator": "Exists", "effect": "NoExecute"}, Taint("a", "", "NoSchedule"), False),
    ({"key": "", "operator": "Equal"}, Taint("a", "", "NoSchedule"), False),
])
def test_tolerates(toleration: dict[str, str], taint: Taint, want: bool) -> None:
    assert tolerates(toleration, taint) is want


def _affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize(("spec", "labels", "want"), [
    ({"nodeSelector": {"disk": "ssd"}}, {"disk": "ssd"}, True),
    ({"nodeSelector": {"disk": "ssd"}}, {"disk": "hdd"}, False),
    ({"affinity": _affinity({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]})},
     {"zone": "b"}, True),
    ({"affinity": _affinity({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]})},
     {}, True),
    ({"affinity": _affinity({"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]})},
     {"gen": "4"}, True),
    ({"affinity": _affinity({"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["3"]}]})},
     {"gen": "x"}, False),
    ({"affinity": _affinity({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]},
                            {"matchExpressions": [{"key": "zone", "operator": "Exists"}]})}, {"gpu": "1"}, False),
    ({"affinity": _affinity({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]},
                            {"matchExpressions": [{"key": "zone", "operator": "Exists"}]})},
     {"gpu": "1", "zone": "a"}, True),
    ({"affinity": _affinity({})}, {"a": "b"}, False),  # an empty term selects nothing
    ({"affinity": _affinity({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]})},
     {}, True),
])
def test_selects(spec: dict[str, Any], labels: dict[str, str], want: bool) -> None:
    assert selects(shape(**spec), node(labels=labels)) is want


#: what the node lifecycle controller adds to a cordoned / NotReady node besides the field or condition
CORDON_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


@pytest.mark.parametrize("n", [
    node(cordoned=True), node(ready=False),
    node(cordoned=True, taints=[CORDON_TAINT]), node(ready=False, taints=[NOT_READY_TAINT]),
    node(taints=[{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}]),
], ids=["cordoned", "not-ready", "cordoned-with-its-taint", "not-ready-with-its-taint", "memory-pressure"])
def test_a_node_in_a_passing_state_runs_nothing_now_but_counts_for_ever(n: NodeRoom) -> None:
    fit = worker_fit(shape(), [n], want=1)
    assert fit.ever and fit.now == 0, fit


def test_a_pod_tolerating_the_cordon_runs_on_a_cordoned_node() -> None:
    tolerant = shape(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert runs_now(tolerant, node(cordoned=True))
    assert runs_now(tolerant, node(cordoned=True, taints=[CORDON_TAINT]))
    assert "cordoned or not Ready" in worker_fit(shape(), [node(cordoned=True, taints=[CORDON_TAINT])], want=1).why


def test_pods_fitting_now_counts_free_room_and_slots() -> None:
    busy = NodeRoom("n", {}, {"cpu": 4000, "pods": 3}, requested={"cpu": 1500}, pod_count=1)
    assert pods_fitting_now(shape("1"), busy, limit=10) == 2  # 2.5 cpu free, 2 slots
    assert pods_fitting_now(shape("500m"), busy, limit=10) == 2  # slots bind
    assert pods_fitting_now(shape("500m"), busy, limit=1) == 1
    ported = shape("100m", containers=[c(requests={"cpu": "100m"}, ports=[{"containerPort": 80, "hostPort": 8080}])])
    assert pods_fitting_now(ported, busy, limit=5) == 1
    taken = NodeRoom("n", {}, {"cpu": 4000, "pods": 10}, ports=frozenset({HostPort("TCP", 8080)}))
    assert pods_fitting_now(ported, taken, limit=5) == 0
    elsewhere = NodeRoom("n", {}, {"cpu": 4000, "pods": 10}, ports=frozenset({HostPort("UDP", 8080)}))
    assert pods_fitting_now(ported, elsewhere, limit=5) == 1


@pytest.mark.parametrize(("nodes", "pod", "ever", "now", "why"), [
    ([node(), node("m")], shape(extra={GPU: "1"}), False, 0, f"no node has {GPU}"),
    ([node(cpu="4"), node("m", cpu="2")], shape("8"), False, 0, "largest node has 4 cpu < 8 cpu requested"),
    ([node(labels={"disk": "hdd"})], shape(nodeSelector={"disk": "ssd"}), False, 0, "nodeSelector disk=ssd"),
    ([node(taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}])], shape(), False, 0,
     "untolerated taint (dedicated=ml:NoSchedule)"),
    ([node(taints=[{"key": "soft", "effect": "PreferNoSchedule"}])], shape(), True, 1, "1 of 1 pods fit now"),
    ([node(extra={GPU: "2"})], shape(extra={GPU: "1"}), True, 1, "1 of 1 pods fit now"),
    ([], shape(), False, 0, "no nodes"),
])
def test_worker_fit(nodes: list[NodeRoom], pod: PodShape, ever: bool, now: int, why: str) -> None:
    fit = worker_fit(pod, nodes, want=1)
    assert (fit.ever, fit.now) == (ever, now)
    assert why in fit.why


def test_worker_fit_without_room_now_says_what_is_short() -> None:
    full = NodeRoom("n", {}, {"cpu": 4000, "memory": 2**33, "pods": 110}, requested={"cpu": 3500}, pod_count=3)
    fit = worker_fit(shape("1"), [full], want=4)
    assert fit.ever and fit.now == 0 and not fit.has_room
    assert fit.why == "no room now: largest free node has 500m cpu < 1 cpu requested"
    roomy = NodeRoom("m", {}, {"cpu": 4000, "pods": 110})
    fit = worker_fit(shape("1"), [full, roomy], want=8)
    assert (fit.now, fit.has_room) == (4, True) and fit.why == "4 of 8 pods fit now (4500m cpu free)"
