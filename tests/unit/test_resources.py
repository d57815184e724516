"""kruntime.resources.status_only_change: which manager Job updates the mirror may ignore."""

from __future__ import annotations

import copy

import pytest

from kruntime.resources import Obj, is_newer, status_only_change

BASE: Obj = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j", "namespace": "n", "resourceVersion": "1", "generation": 1,
                 "annotations": {"a": "1"}, "finalizers": ["f"], "managedFields": [{"manager": "x"}]},
    "spec": {"parallelism": 1, "suspend": False},
    "status": {"active": 1},
}


def changed(**paths: object) -> Obj:
    new = copy.deepcopy(BASE)
    for path, value in paths.items():
        *parents, leaf = path.split("__")
        node = new
        for p in parents:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return new


@pytest.mark.parametrize(("name", "new", "expected"), [
    ("status counters", changed(status__active=0, status__succeeded=1), True),
    ("status plus resourceVersion and managedFields", changed(status__ready=1, metadata__resourceVersion="2",
                                                              metadata__managedFields=[]), True),
    ("status removed entirely", changed(status=None), True),
    ("identical", changed(), True),
    ("spec suspend", changed(spec__suspend=True), False),
    ("spec parallelism with generation", changed(spec__parallelism=3, metadata__generation=2), False),
    ("annotation (pin, placement)", changed(metadata__annotations={"a": "2"}), False),
    ("finalizer removed", changed(metadata__finalizers=[]), False),
    ("deletionTimestamp set", changed(metadata__deletionTimestamp="2026-11-23T00:00:00Z"), False),
    ("labels added", changed(metadata__labels={"x": "y"}), False),
    ("new top-level field", changed(extra={"k": 1}), False),
])
def test_status_only_change(name: str, new: Obj, expected: bool) -> None:
    assert status_only_change(BASE, new) is expected, name


def rv(v: object) -> Obj:
    return {"metadata": {"resourceVersion": v}}


@pytest.mark.parametrize(("a", "b", "expected"), [
    (rv("10"), rv("9"), True),  # numeric, not lexical: "10" < "9" as strings
    (rv("9"), rv("10"), False),
    (rv("7"), rv("7"), False),
    (rv("abc"), rv("1"), False),  # opaque versions: never claim to be newer
    ({"metadata": {}}, rv("1"), False),
    (rv(None), rv("1"), False),
])
def test_is_newer(a: Obj, b: Obj, expected: bool) -> None:
    assert is_newer(a, b) is expected
