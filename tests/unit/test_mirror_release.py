"""Deletion never hangs forever; unclaimed Jobs are let go (issue 11, item 6)."""

from __future__ import annotations

from typing import Any

import pytest

from mirror.decisions import cleanup_waits_for, copy_propagation, release_unclaimed
from mirror.jobs.remote_copy import build_remote_copy
from mirror.naming import ANNOTATION_CLAIMED_BY, ANNOTATION_DELETE_PROPAGATION, FINALIZER


@pytest.mark.parametrize(
    ("down_for", "expected"),
    [(0.0, True), (899.0, True), (900.0, False), (5000.0, False)],
)
def test_cleanup_waits_for_an_unreachable_worker_at_most_worker_lost_timeout(down_for: float, expected: bool) -> None:
    assert cleanup_waits_for(down_for, worker_lost_timeout=900.0) is expected


def job(*, finalizers: tuple[str, ...] = (FINALIZER,), stamp: str | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "j", "namespace": "ns", "uid": "u1", "finalizers": list(finalizers)}
    if stamp is not None:
        md["annotations"] = {ANNOTATION_CLAIMED_BY: stamp}
    return {"metadata": md, "spec": {"managedBy": "jobmirror.dev/controller"}}


@pytest.mark.parametrize(
    ("obj", "claimed", "claimed_in_any_namespace", "expected"),
    [
        (job(stamp="o1"), True, True, False),  # still ours: keep
        (job(stamp="o1"), False, False, True),  # stamped by us, controllerName changed
        (job(stamp="o1"), False, True, True),  # stamped by us, namespace narrowed
        (job(stamp="o2"), False, False, False),  # another installation's Job
        (job(stamp="o2"), False, True, False),  # another installation (same controllerName)
        (job(), False, True, True),  # before the stamp: our controllerName, namespace narrowed
        (job(), False, False, False),  # before the stamp and another controllerName: cannot prove it
        (job(finalizers=("other/keep",), stamp="o1"), False, False, False),  # nothing of ours to release
        (job(finalizers=()), False, True, False),
    ],
)
def test_release_unclaimed(obj: dict[str, Any], claimed: bool, claimed_in_any_namespace: bool,
                           expected: bool) -> None:
    assert release_unclaimed(obj, claimed=claimed, claimed_in_any_namespace=claimed_in_any_namespace,
                             origin="o1") is expected


def test_claim_stamp_does_not_travel_to_the_copy() -> None:
    copy = build_remote_copy(job(stamp="o1"), origin="o1", origin_cluster="c", remote_name="j")
    assert ANNOTATION_CLAIMED_BY not in copy["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (None, "Background"),
        ("Orphan", "Orphan"),
        ("Foreground", "Foreground"),
        ("Background", "Background"),
        ("orphan", "Background"),  # exact values only, as the API's propagationPolicy
        ("", "Background"),
    ],
)
def test_copy_propagation_follows_the_annotation(annotation: str | None, expected: str) -> None:
    obj = job()
    if annotation is not None:
        obj["metadata"]["annotations"] = {ANNOTATION_DELETE_PROPAGATION: annotation}
    assert copy_propagation(obj) == expected


def test_delete_propagation_annotation_does_not_travel_to_the_copy() -> None:
    obj = job()
    obj["metadata"]["annotations"] = {ANNOTATION_DELETE_PROPAGATION: "Orphan"}
    copy = build_remote_copy(obj, origin="o1", origin_cluster="c", remote_name="j")
    assert ANNOTATION_DELETE_PROPAGATION not in copy["metadata"]["annotations"]
