"""Table tests for mirror/gc.py's pure verdict on one remote copy."""

from __future__ import annotations

from typing import Any

import pytest

from mirror.gc import CopyVerdict, judge
from mirror.naming import ANNOTATION_CLUSTER, LABEL_ORIGIN, LABEL_ORIGIN_CLUSTER, LABEL_ORIGIN_UID

ORIGIN = "mgr-a"
UID = "uid-1"
CLUSTER = "cluster-a"


def remote(labels: dict[str, str] | None) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ns", "labels": labels}}


def manager(uid: str = UID, placed: str | None = "worker-1") -> dict[str, Any]:
    md: dict[str, Any] = {"name": "train", "namespace": "ns", "uid": uid}
    if placed is not None:
        md["annotations"] = {ANNOTATION_CLUSTER: placed}
    return {"metadata": md}


OURS = {LABEL_ORIGIN: ORIGIN, LABEL_ORIGIN_UID: UID, LABEL_ORIGIN_CLUSTER: CLUSTER}
#: The same origin value, made by another manager cluster (two installs shipping one origin).
SHARED = {LABEL_ORIGIN: ORIGIN, LABEL_ORIGIN_UID: UID, LABEL_ORIGIN_CLUSTER: "cluster-b"}
#: Made before copies carried the manager cluster's identity.
LEGACY = {LABEL_ORIGIN: ORIGIN, LABEL_ORIGIN_UID: UID}

CONFIGURED = ("worker-1", "worker-2")

@pytest.mark.parametrize(
    ("labels", "mgr", "expected"),
    [
        (OURS, manager(), CopyVerdict.KEEP),
        (OURS, manager(placed=None), CopyVerdict.KEEP),
        (OURS, None, CopyVerdict.ORPHAN),
        (OURS, manager(uid="uid-2"), CopyVerdict.ORPHAN),
        (OURS, manager(uid="uid-2", placed="worker-2"), CopyVerdict.ORPHAN),
        ({LABEL_ORIGIN: ORIGIN, LABEL_ORIGIN_CLUSTER: CLUSTER}, manager(), CopyVerdict.ORPHAN),
        (OURS, manager(placed="worker-2"), CopyVerdict.STALE),
        # Same origin, but nothing proves this manager made it: never deleted as an orphan.
        (SHARED, None, CopyVerdict.UNPROVEN),
        (SHARED, manager(uid="uid-2"), CopyVerdict.UNPROVEN),
        (LEGACY, None, CopyVerdict.UNPROVEN),
        ({LABEL_ORIGIN: ORIGIN}, manager(), CopyVerdict.UNPROVEN),
        # ... unless the manager Job itself names it by uid (then it is ours, wherever it came from).
        (LEGACY, manager(), CopyVerdict.KEEP),
        (LEGACY, manager(placed="worker-2"), CopyVerdict.STALE),
        (SHARED, manager(placed="worker-2"), CopyVerdict.STALE),
        # Copies of another manager (or none at all) are never ours to judge, whatever the manager says.
        ({LABEL_ORIGIN: "other-manager", LABEL_ORIGIN_UID: UID}, None, CopyVerdict.KEEP),
        ({LABEL_ORIGIN: "other-manager", LABEL_ORIGIN_UID: UID}, manager(placed="worker-2"), CopyVerdict.KEEP),
        ({LABEL_ORIGIN_UID: UID}, None, CopyVerdict.KEEP),
        ({}, None, CopyVerdict.KEEP),
        (None, None, CopyVerdict.KEEP),
    ],
    ids=["placed-here", "not-yet-annotated", "manager-gone", "uid-mismatch-recreated", "uid-mismatch-elsewhere",
         "no-origin-uid", "placed-elsewhere", "shared-origin-manager-gone", "shared-origin-uid-mismatch",
         "legacy-manager-gone", "no-origin-uid-no-cluster", "legacy-placed-here", "legacy-placed-elsewhere",
         "shared-origin-uid-proven-stale", "foreign-origin-manager-gone", "foreign-origin-placed-elsewhere",
         "no-origin-label", "no-labels", "labels-null"],
)
def test_judge(labels: dict[str, str] | None, mgr: dict[str, Any] | None, expected: CopyVerdict) -> None:
    assert judge(remote(labels), mgr, origin=ORIGIN, manager_cluster=CLUSTER, worker="worker-1",
                 configured=CONFIGURED) is expected


@pytest.mark.parametrize(("placed", "expected"), [("worker-2", CopyVerdict.STALE), ("old-name", CopyVerdict.KEEP)],
                         ids=["placed-on-another-configured-worker", "placed-on-a-name-no-longer-configured"])
def test_a_renamed_workers_copy_waits_for_adoption(placed: str, expected: CopyVerdict) -> None:
    """a worker renamed in the config: its copies' Jobs still name the old entry; the reconciler
    adopts them where they run, so GC must not delete them as stale first"""
    assert judge(remote(OURS), manager(placed=placed), origin=ORIGIN, manager_cluster=CLUSTER, worker="worker-1",
                 configured=CONFIGURED) is expected


@pytest.mark.parametrize("manager_cluster", ["", "cluster-b"], ids=["identity-unknown", "other-cluster"])
def test_orphan_needs_this_managers_identity(manager_cluster: str) -> None:
    assert judge(remote(OURS), None, origin=ORIGIN, manager_cluster=manager_cluster,
                 worker="worker-1", configured=CONFIGURED) is CopyVerdict.UNPROVEN


@pytest.mark.parametrize(("worker", "expected"), [("worker-1", CopyVerdict.KEEP), ("worker-2", CopyVerdict.STALE)],
                         ids=["judged-on-placement", "judged-elsewhere"])
def test_the_same_copy_is_judged_per_worker(worker: str, expected: CopyVerdict) -> None:
    assert judge(remote(OURS), manager(placed="worker-1"), origin=ORIGIN, manager_cluster=CLUSTER,
                 worker=worker, configured=CONFIGURED) is expected


def test_verdicts_are_metric_label_values() -> None:
    assert {v.value for v in CopyVerdict} == {"keep", "orphan", "stale", "unproven"}
