"""Table tests for mirror/gc.py's pure verdict on one remote copy."""

from __future__ import annotations

from typing import Any

import pytest

from mirror.gc import Verdict, judge
from mirror.naming import ANNOTATION_CLUSTER, LABEL_ORIGIN, LABEL_ORIGIN_UID

ORIGIN = "mgr-a"
UID = "uid-1"


def remote(labels: dict[str, str] | None) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ns", "labels": labels}}


def manager(uid: str = UID, placed: str | None = "worker-1") -> dict[str, Any]:
    md: dict[str, Any] = {"name": "train", "namespace": "ns", "uid": uid}
    if placed is not None:
        md["annotations"] = {ANNOTATION_CLUSTER: placed}
    return {"metadata": md}


OURS = {LABEL_ORIGIN: ORIGIN, LABEL_ORIGIN_UID: UID}


@pytest.mark.parametrize(
    ("labels", "mgr", "expected"),
    [
        (OURS, manager(), Verdict.KEEP),
        (OURS, manager(placed=None), Verdict.KEEP),
        (OURS, None, Verdict.ORPHAN),
        (OURS, manager(uid="uid-2"), Verdict.ORPHAN),
        (OURS, manager(uid="uid-2", placed="worker-2"), Verdict.ORPHAN),
        ({LABEL_ORIGIN: ORIGIN}, manager(), Verdict.ORPHAN),
        (OURS, manager(placed="worker-2"), Verdict.STALE),
        # Copies of another manager (or none at all) are never ours to judge, whatever the manager says.
        ({LABEL_ORIGIN: "other-manager", LABEL_ORIGIN_UID: UID}, None, Verdict.KEEP),
        ({LABEL_ORIGIN: "other-manager", LABEL_ORIGIN_UID: UID}, manager(placed="worker-2"), Verdict.KEEP),
        ({LABEL_ORIGIN_UID: UID}, None, Verdict.KEEP),
        ({}, None, Verdict.KEEP),
        (None, None, Verdict.KEEP),
    ],
    ids=["placed-here", "not-yet-annotated", "manager-gone", "uid-mismatch-recreated", "uid-mismatch-elsewhere",
         "no-origin-uid", "placed-elsewhere", "foreign-origin-manager-gone", "foreign-origin-placed-elsewhere",
         "no-origin-label", "no-labels", "labels-null"],
)
def test_judge(labels: dict[str, str] | None, mgr: dict[str, Any] | None, expected: Verdict) -> None:
    assert judge(remote(labels), mgr, origin=ORIGIN, worker="worker-1") is expected


@pytest.mark.parametrize(("worker", "expected"), [("worker-1", Verdict.KEEP), ("worker-2", Verdict.STALE)],
                         ids=["judged-on-placement", "judged-elsewhere"])
def test_the_same_copy_is_judged_per_worker(worker: str, expected: Verdict) -> None:
    assert judge(remote(OURS), manager(placed="worker-1"), origin=ORIGIN, worker=worker) is expected


def test_verdicts_are_metric_label_values() -> None:
    assert {v.value for v in Verdict} == {"keep", "orphan", "stale"}
