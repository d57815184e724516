"""Pod re-creation backoff: delay math, finish-time evidence, per-Job and per-index records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from builtin_controller import fields
from builtin_controller.backoff import (
    BackoffRecord,
    BackoffStore,
    delay_for_failures,
    finished_time,
    new_backoff_record,
    remaining_for_failures,
    remaining_for_index,
)

T0 = datetime(2026, 11, 23, 10, 0, 0, tzinfo=UTC)


def ts(seconds: float) -> str:
    return fields.format_time(T0 + timedelta(seconds=seconds))


def pod(*, finished: float | None = None, ready_false: float | None = None, deleted: float | None = None,
        grace: int | None = None, created: float = -100, running: bool = False,
        annotations: dict[str, str] | None = None, sidecar_finished: float | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "p", "uid": "u", "creationTimestamp": ts(created), "annotations": annotations or {}}
    if deleted is not None:
        md["deletionTimestamp"] = ts(deleted)
        if grace is not None:
            md["deletionGracePeriodSeconds"] = grace
    st: dict[str, Any] = {"conditions": []}
    if finished is not None:
        st["containerStatuses"] = [{"name": "c", "state": {"terminated": {"exitCode": 1, "finishedAt": ts(finished)}}}]
    if running:
        st.setdefault("containerStatuses", []).append({"name": "d", "state": {"running": {}}})
    if ready_false is not None:
        st["conditions"].append({"type": "Ready", "status": "False", "lastTransitionTime": ts(ready_false)})
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if sidecar_finished is not None:
        spec["initContainers"] = [{"name": "side", "restartPolicy": "Always"}]
        st["initContainerStatuses"] = [
            {"name": "side", "state": {"terminated": {"exitCode": 0, "finishedAt": ts(sidecar_finished)}}}]
    return {"metadata": md, "spec": spec, "status": st}


@pytest.mark.parametrize(
    ("failures", "want"),
    [(0, 0), (1, 10), (2, 20), (3, 40), (4, 80), (6, 320), (7, 600), (8, 600), (1000, 600)],
)
def test_delay_for_failures(failures: int, want: float) -> None:
    assert delay_for_failures(failures) == want


@pytest.mark.parametrize(
    ("failures", "ago", "want"),
    [
        (0, 0, 0),  # nothing failed
        (1, 0, 10),
        (1, 4, 6),
        (1, 10, 0),
        (1, 11, 0),
        (2, 5, 15),
        (3, 39, 1),
        (10, 60, 540),  # capped at 10 min
    ],
)
def test_remaining(failures: int, ago: float, want: float) -> None:
    now = T0 + timedelta(seconds=ago)
    assert remaining_for_failures(failures, T0, now) == pytest.approx(want)
    assert BackoffRecord("k", failures, T0).remaining(now) == pytest.approx(want)


def test_remaining_without_failure_time_is_zero() -> None:
    assert remaining_for_failures(3, None, T0) == 0


@pytest.mark.parametrize(
    ("p", "want"),
    [
        (pod(finished=5), 5),
        (pod(finished=5, ready_false=3), 5),  # containers win
        (pod(finished=5, running=True, ready_false=3), 3),  # one container still running
        (pod(ready_false=7), 7),
        (pod(deleted=30, grace=10), 20),
        (pod(deleted=30), 30),
        (pod(), -100),  # creation time as last resort
        (pod(finished=5, sidecar_finished=9), 9),  # a sidecar ends after the main container
    ],
)
def test_finished_time(p: dict[str, Any], want: float) -> None:
    assert finished_time(p) == T0 + timedelta(seconds=want)


@pytest.mark.parametrize(
    ("old", "succeeded", "failed", "want"),
    [
        ((0, None), [], [], (0, None)),
        ((2, 1), [], [], (2, 1)),  # nothing new: the record stands
        ((0, None), [], [5], (1, 5)),
        ((1, 2), [], [7, 5], (3, 7)),  # count accumulates, latest failure wins
        ((3, 2), [4], [], (0, None)),  # a success resets
        ((3, 2), [4], [3, 6, 8], (2, 8)),  # only failures after the last success count
        ((3, 2), [9], [3, 6, 8], (0, None)),
    ],
)
def test_new_backoff_record(old: tuple[int, float | None], succeeded: list[float], failed: list[float],
                            want: tuple[int, float | None]) -> None:
    store = BackoffStore()
    store.update(BackoffRecord("ns/j", old[0], None if old[1] is None else T0 + timedelta(seconds=old[1])))
    rec = new_backoff_record(store, "ns/j", [pod(finished=s) for s in succeeded], [pod(finished=f) for f in failed])
    assert rec.failures_after_last_success == want[0]
    assert rec.last_failure_time == (None if want[1] is None else T0 + timedelta(seconds=want[1]))


def test_store_roundtrip() -> None:
    store = BackoffStore()
    assert store.get("a") == BackoffRecord("a")
    store.update(BackoffRecord("a", 2, T0))
    assert store.get("a").failures_after_last_success == 2
    assert len(store) == 1
    store.remove("a")
    store.remove("a")
    assert len(store) == 0


@pytest.mark.parametrize(
    ("annotations", "ago", "want"),
    [
        ({}, 0, 10),  # first failure in the index
        ({}, 3, 7),
        ({fields.INDEX_FAILURE_COUNT_KEY: "1"}, 5, 15),
        ({fields.INDEX_FAILURE_COUNT_KEY: "1", fields.INDEX_IGNORED_FAILURE_COUNT_KEY: "1"}, 0, 40),
        ({fields.INDEX_FAILURE_COUNT_KEY: "bogus"}, 0, 10),
        ({fields.INDEX_FAILURE_COUNT_KEY: "2"}, 100, 0),
    ],
)
def test_remaining_for_index(annotations: dict[str, str], ago: float, want: float) -> None:
    p = pod(finished=0, annotations=annotations)
    assert remaining_for_index(p, T0 + timedelta(seconds=ago)) == pytest.approx(want)


def test_remaining_for_index_without_previous_pod() -> None:
    assert remaining_for_index(None, T0) == 0
