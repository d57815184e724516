"""Which nodes could ever run a pod, kept per (shape, node) while the Node object stays (issue 38:
~80 % of a placement's CPU at 50 workers of 100 nodes went to asking it again)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mirror.room.fit import EverMemo, Taint, could_ever_run, node_room
from mirror.room.requests import shape_of_template


def node(name: str, *, cpu: str = "4", labels: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None) -> Any:
    return node_room({"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []},
                      "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                                 "conditions": [{"type": "Ready", "status": "True"}]}})


def shape(cpu: str = "1", selector: dict[str, str] | None = None,
          tolerations: list[dict[str, str]] | None = None) -> Any:
    return shape_of_template({"spec": {"nodeSelector": selector or {}, "tolerations": tolerations or [],
                                       "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}})


NODES = [node("plain"), node("small", cpu="500m"), node("gpu", labels={"pool": "gpu"}),
         node("tainted", taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}])]
SHAPES = [shape(), shape("2"), shape(selector={"pool": "gpu"}),
          shape(tolerations=[{"key": "dedicated", "operator": "Exists"}]), shape("8")]


@pytest.mark.parametrize("s", SHAPES, ids=["1cpu", "2cpu", "gpu-pool", "tolerates", "too-big"])
def test_the_memo_says_what_could_ever_run_says(s: Any) -> None:
    memo = EverMemo()
    for _ in range(2):  # first made, then kept
        assert [memo.could_ever_run(s, n) for n in NODES] == [could_ever_run(s, n) for n in NODES]


def test_equal_shapes_of_two_jobs_share_a_verdict_and_a_new_node_object_is_judged_again() -> None:
    memo = EverMemo()
    plain = NODES[0]
    assert memo.could_ever_run(shape(), plain) is True
    assert shape().key == shape().key and shape().key != shape("2").key
    tainted = replace(plain, taints=(Taint("dedicated", "ml", "NoSchedule"),))  # the Node object changed
    assert memo.could_ever_run(shape(), tainted) is False
    loaded = replace(tainted, requested={"cpu": 3000}, pod_count=3)  # pods on it: the same node facts
    assert memo.could_ever_run(shape(), loaded) is False


def test_a_node_with_daemonset_pods_is_judged_each_time_and_the_memo_is_bounded() -> None:
    memo = EverMemo(limit=2)
    daemons = replace(NODES[0], daemon_pods=1, daemon_requested={"cpu": 3500})
    assert memo.could_ever_run(shape(), daemons) is False and len(memo._kept) == 0
    for n in NODES:
        memo.could_ever_run(shape(), n)
    assert len(memo._kept) <= 2
