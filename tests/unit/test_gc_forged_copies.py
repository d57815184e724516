"""A user who may edit Jobs in one worker namespace cannot turn garbage collection off for every
worker (issue 32 item 4): the pure parts (names a copy may claim, the fair budget, the rotation)
and one GC round against fake manager and worker clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kruntime.resources import Obj, Resource
from mirror import metrics
from mirror.config import Worker
from mirror.gc import GcMemory, collect_once, fair_shares, rotated
from mirror.identity import manager_key_of
from mirror.jobs.kind import JOB_KIND
from mirror.naming import ANNOTATION_ORIGIN_JOB, LABEL_ORIGIN_CLUSTER
from mirror.workers import WorkerCluster
from testkit.gcfakes import MANAGER_CLUSTER, ORIGIN, FakeManager, FakeWorker, worker_copy

CLUSTER = MANAGER_CLUSTER


@pytest.mark.parametrize(("origin_job", "key"), [
    ("team-a/train", "team-a/train"),
    ("team-a/train.v2-1", "team-a/train.v2-1"),
    ("team-a/..", None),  # walks the URL path up: every GC round raised InvalidName
    ("team-a/.", None),
    ("team-a/a..b", None),
    ("team-a/.hidden", None),
    ("team-a/Train", None),
    ("team-a/a/b", None),
    ("team-a/a%2Fb", None),
    ("team-a/a b", None),
    ("team-a/" + "x" * 254, None),
    ("team-a/" + "x" * 253, "team-a/" + "x" * 253),
], ids=["plain", "dots-and-dashes", "dot-dot", "dot", "empty-label", "leading-dot", "upper-case", "slash",
        "escaped-slash", "space", "too-long", "longest"])
def test_a_copy_claims_only_a_name_an_object_can_have(origin_job: str, key: str | None) -> None:
    copy = {"metadata": {"name": "x", "namespace": "team-a", "annotations": {ANNOTATION_ORIGIN_JOB: origin_job}}}
    assert manager_key_of(JOB_KIND.name, copy) == key


@pytest.mark.parametrize("namespace", ["Team-A", "team_a", "-team", "x" * 64])
def test_a_copy_in_a_namespace_no_api_server_accepts_claims_nothing(namespace: str) -> None:
    copy = {"metadata": {"name": "x", "namespace": namespace,
                         "annotations": {ANNOTATION_ORIGIN_JOB: f"{namespace}/train"}}}
    assert manager_key_of(JOB_KIND.name, copy) is None


@pytest.mark.parametrize(("wanted", "budget", "first", "shares"), [
    ({"w1": 100, "w2": 1}, 100, 0, {"w1": 99, "w2": 1}),  # forged copies on w1 leave w2's orphan its read
    ({"w1": 100, "w2": 100}, 100, 0, {"w1": 50, "w2": 50}),
    ({"w1": 100, "w2": 100, "w3": 100}, 100, 0, {"w1": 34, "w2": 33, "w3": 33}),
    ({"w1": 100, "w2": 100, "w3": 100}, 100, 1, {"w1": 33, "w2": 34, "w3": 33}),  # the remainder rotates
    ({"w1": 3, "w2": 0}, 100, 0, {"w1": 3, "w2": 0}),
    ({"w1": 5, "w2": 5, "w3": 5}, 2, 0, {"w1": 1, "w2": 1, "w3": 0}),
    ({"w1": 5, "w2": 5, "w3": 5}, 2, 2, {"w1": 1, "w2": 0, "w3": 1}),  # fewer reads than workers: rotated too
    ({"w1": 5}, 0, 0, {"w1": 0}),
    ({}, 100, 3, {}),
], ids=["forged-vs-orphan", "even", "three-way", "three-way-rotated", "wants-less", "budget-below-workers",
        "budget-below-workers-rotated", "no-budget", "no-workers"])
def test_the_confirmation_budget_is_shared_fairly(wanted: dict[str, int], budget: int, first: int,
                                                  shares: dict[str, int]) -> None:
    assert fair_shares(wanted, budget, first=first) == shares


@pytest.mark.parametrize(("keys", "after", "order"), [
    (["b", "a", "c"], None, ["a", "b", "c"]),
    (["a", "b", "c"], "a", ["b", "c", "a"]),
    (["a", "b", "c"], "c", ["a", "b", "c"]),
    (["a", "c", "d"], "b", ["c", "d", "a"]),  # the copy stopped at is gone: resume after its place
    ([], "a", []),
], ids=["first-round", "after-first", "after-last", "stopped-at-gone", "none"])
def test_a_workers_confirmations_resume_where_they_stopped(keys: list[str], after: str | None,
                                                           order: list[str]) -> None:
    assert rotated(keys, after) == order


# -- one GC round -----------------------------------------------------------------------------


async def gc(manager: FakeManager, workers: list[FakeWorker], memory: GcMemory | None = None, budget: int = 100) -> int:
    return await collect_once(manager, workers, ORIGIN, JOB_KIND, CLUSTER, budget=budget,  # type: ignore[arg-type]
                              memory=memory)


def errors(worker: str) -> float:
    return metrics.GC_ERRORS.labels(worker)._value.get()


async def test_an_error_on_one_copy_does_not_end_the_round() -> None:
    """the manager read for one copy raises (what InvalidName did): the others of that worker and
    of the next are still collected, and the error is counted"""
    before = errors("w1")
    w1 = FakeWorker("w1", [worker_copy("bad"), worker_copy("orphan-1")])
    w2 = FakeWorker("w2", [worker_copy("orphan-2")])
    assert await gc(FakeManager(broken=("bad",)), [w1, w2]) == 2
    assert w1.client.deleted == ["orphan-1"] and w2.client.deleted == ["orphan-2"]
    assert errors("w1") == before + 1


async def test_a_dot_dot_copy_is_never_read_and_gc_goes_on() -> None:
    w1 = FakeWorker("w1", [worker_copy("forged", origin_job="ns/.."), worker_copy("orphan-1")])
    manager = FakeManager()
    assert await gc(manager, [w1]) == 1
    assert manager.reads == ["orphan-1"] and w1.client.deleted == ["orphan-1"]


async def test_an_unproven_copy_is_read_again_only_when_it_changes() -> None:
    forged = [worker_copy(f"forged-{i}", ours=False) for i in range(3)]
    w1 = FakeWorker("w1", forged)
    manager, memory = FakeManager(), GcMemory()
    await gc(manager, [w1], memory)
    assert sorted(manager.reads) == ["forged-0", "forged-1", "forged-2"]
    manager.reads.clear()
    await gc(manager, [w1], memory)
    assert manager.reads == []
    forged[1]["metadata"]["resourceVersion"] = "2"  # edited on the worker: judged again
    await gc(manager, [w1], memory)
    assert manager.reads == ["forged-1"] and w1.client.deleted == []


async def test_a_failed_copy_is_retried_only_when_it_changes() -> None:
    bad = worker_copy("bad")
    w1 = FakeWorker("w1", [bad])
    manager, memory = FakeManager(broken=("bad",)), GcMemory()
    await gc(manager, [w1], memory)
    await gc(manager, [w1], memory)
    assert manager.reads == ["bad"]
    bad["metadata"]["resourceVersion"] = "2"
    await gc(manager, [w1], memory)
    assert manager.reads == ["bad", "bad"]


async def test_forged_copies_on_one_worker_leave_the_budget_for_an_orphan_on_another() -> None:
    """100 forged copies on w1 (listed first) and a real orphan on w2: the orphan is collected in
    the first round, not never"""
    w1 = FakeWorker("w1", [worker_copy(f"forged-{i:03d}", ours=False) for i in range(100)])
    w2 = FakeWorker("w2", [worker_copy("orphan")])
    assert await gc(FakeManager(), [w1, w2], GcMemory()) == 1
    assert w2.client.deleted == ["orphan"]


async def test_copies_beyond_a_share_get_their_turn_next_round() -> None:
    """the manager answers 500 for every read (nothing proven, nothing remembered): with two reads
    a round, each round reads the next two copies, not the same first two"""
    w1 = FakeWorker("w1", [worker_copy(n) for n in "abcde"])
    manager, memory = FakeManager(status=500), GcMemory()
    for _ in range(3):
        await gc(manager, [w1], memory, budget=2)
    assert manager.reads == ["a", "b", "c", "d", "e", "a"]


async def test_the_memory_forgets_copies_that_are_gone() -> None:
    w1 = FakeWorker("w1", [worker_copy("forged", ours=False)])
    memory = GcMemory()
    await gc(FakeManager(), [w1], memory)
    assert memory.failed
    w1._copies = []
    await gc(FakeManager(), [w1], memory)
    assert memory.failed == {}


# -- load ---------------------------------------------------------------------------------------


class _ListOnly:
    name = "w1"

    def __init__(self, items: list[Obj]) -> None:
        self.items = items

    async def list_pages(self, resource: Resource, namespace: str | None,
                         **_: Any) -> AsyncIterator[tuple[list[Obj], str]]:
        yield self.items, "1"


def unfinished(c: Obj) -> Obj:
    return {**c, "spec": {}, "status": {}}


async def test_only_copies_carrying_our_manager_identity_count_as_load() -> None:
    """forged "copies" (our origin label, no or another origin-cluster label) do not push placement
    away from the worker they sit on"""
    other = unfinished(worker_copy("other"))
    other["metadata"]["labels"][LABEL_ORIGIN_CLUSTER] = "someone-else"
    items = [unfinished(worker_copy("real")), unfinished(worker_copy("forged", ours=False)), other]
    w = WorkerCluster(Worker.model_validate({"name": "w1", "kubeconfig": "/k"}), _ListOnly(items),  # type: ignore[arg-type]
                      kinds=[JOB_KIND], origin=ORIGIN, manager_cluster=CLUSTER)
    for informer in w.informers():
        await informer._relist()
    assert w.unfinished() == 1
