"""What the controller's manager cache keeps (issue 38: finished Jobs leave it; no managedFields)."""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from kruntime.informer import without_managed_fields
from kruntime.resources import Obj
from mirror.claim import worth_caching
from mirror.jobs.kind import JOB_KIND
from mirror.naming import FINALIZER


def job(*, finished: str | None = None, finalizer: bool = False) -> Obj:
    conditions = [] if finished is None else [{"type": finished, "status": "True"}]
    return {"metadata": {"name": "j", "namespace": "ns", "finalizers": [FINALIZER] if finalizer else []},
            "status": {"conditions": conditions}}


@pytest.mark.parametrize(("obj", "claimed", "kept", "why"), [
    (job(), True, True, "ours, running or waiting: the work in flight"),
    (job(finalizer=True), True, True, "ours, placed"),
    (job(finished="Complete", finalizer=True), True, True, "finished, its copy's cleanup or release left"),
    (job(finished="Failed", finalizer=True), True, True, "the same for a failed one"),
    (job(finished="Complete"), True, False, "finished and released: nothing left for us"),
    (job(finished="Failed"), True, False, "the same for a failed one"),
    (job(), False, False, "not ours, nothing of ours on it"),
    (job(finalizer=True), False, True, "not claimed any more, our finalizer to release"),
    (job(finished="Complete", finalizer=True), False, True, "the same, finished"),
])
def test_the_manager_cache_keeps_what_is_left_to_do(obj: Obj, claimed: bool, kept: bool, why: str) -> None:
    assert worth_caching(JOB_KIND, obj, claimed=claimed) is kept, why


def test_cached_objects_carry_no_managed_fields() -> None:
    obj = {"metadata": {"name": "j", "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
           "spec": {"parallelism": 1}}
    assert without_managed_fields(obj) == {"metadata": {"name": "j"}, "spec": {"parallelism": 1}}
    assert without_managed_fields({"kind": "Status"}) == {"kind": "Status"}  # no metadata: as sent


def test_a_cached_claimed_job_costs_less_than_half_of_what_it_decodes_to() -> None:
    """A Job as a v1.37.2 API server sent it (kubectl apply, then our claim and status writes:
    tests/unit/data/claimed-job-v1.37.2.json): decoded ~24 KB, of which managedFields' field trees ~13."""
    raw = (Path(__file__).parent / "data" / "claimed-job-v1.37.2.json").read_text()

    def held(make: Callable[[], Obj], n: int = 500) -> float:
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            kept = [make() for _ in range(n)]
            gc.collect()
            return (tracemalloc.get_traced_memory()[0] - before) / len(kept)
        finally:
            tracemalloc.stop()

    whole = held(lambda: json.loads(raw))
    cached = held(lambda: without_managed_fields(json.loads(raw)))
    print(f"a claimed Job decoded: {whole:.0f} B; cached: {cached:.0f} B")
    assert cached < whole / 2, (cached, whole)
