"""The kind seam is real: a second, minimal kind drives the reconciler's pure decisions.

``Widget`` (``example.dev/v1``, testkit/widget.py) is a made-up kind with the smallest behaviour a
mirrored kind needs (test_widget_fleet.py drives it through a fleet of fake API servers). Nothing in
``mirror.decisions``, the worker caches or the queue keys knows it exists, yet all of them work for
it, and a Widget never collides with a Job of the same name.
"""

from __future__ import annotations

import ast
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kruntime.bounded import LruDict
from kruntime.resources import Obj, Resource
from mirror.config import Config, Worker
from mirror.decisions import CopyPlan, Placement, Step, decide, placement_of, plan_copy, status_to_write
from mirror.identity import manager_key_of
from mirror.jobs.kind import JOB_KIND
from mirror.kinds import QueueKey
from mirror.naming import ANNOTATION_CLUSTER, origin_annotation
from mirror.reconciler import JobMemory, Reconciler
from mirror.workers import WorkerCluster
from testkit.widget import WIDGET

NOW = datetime(2026, 11, 23, 10, tzinfo=UTC)
ORIGIN = "mgr"
CONTROLLER = "jobmirror.dev/controller"


def widget(*, placed: str | None = None, size: int = 1, paused: bool = False, phase: str | None = None,
           deleting: bool = False) -> Obj:
    md: dict[str, Any] = {"name": "train", "namespace": "ns", "uid": "w-uid", "resourceVersion": "5"}
    if placed:
        md["annotations"] = {ANNOTATION_CLUSTER: placed}
    if deleting:
        md["deletionTimestamp"] = "2026-11-23T09:00:00Z"
    obj: Obj = {"metadata": md, "spec": {"owner": CONTROLLER, "size": size, "paused": paused}}
    if phase:
        obj["status"] = {"phase": phase}
    return obj


@pytest.mark.parametrize(
    ("obj", "copies_on", "want"),
    [
        (widget(deleting=True, placed="w1"), ["w1"], Step.FINALIZE),
        (widget(phase="Done", placed="w1"), ["w1"], Step.FINISH),
        (widget(placed="w1"), ["w2"], Step.CONFIRM_PLACEMENT),
        (widget(), ["w1"], Step.CONFIRM_PLACEMENT),  # a copy but no placement: adopt it, do not make another
        (widget(paused=True), [], Step.HOLD),
        (widget(), [], Step.PLACE),
        (widget(placed="w1"), [], Step.SYNC),
        (widget(placed="w1"), ["w1"], Step.SYNC),
    ],
    ids=["finalize", "finish", "stale-copy", "unplaced-copy", "hold", "place", "create", "sync"],
)
def test_decide_for_a_second_kind(obj: Obj, copies_on: list[str], want: Step) -> None:
    assert decide(WIDGET, obj, placement_of(obj), copies_on) is want


def test_copy_plan_and_status_for_a_second_kind() -> None:
    manager = widget(placed="w1", size=3)
    remote = WIDGET.build_copy(manager, origin=ORIGIN, origin_cluster="mgr", remote_name="train")
    remote["spec"]["size"] = 1
    assert plan_copy(WIDGET, manager, remote, origin=ORIGIN) == CopyPlan(spec_patch={"spec": {"size": 3}})
    remote["spec"]["size"] = 3
    assert plan_copy(WIDGET, manager, remote, origin=ORIGIN) == CopyPlan()
    assert plan_copy(WIDGET, manager, remote, origin="someone-else") == CopyPlan(collision=True)

    remote["status"] = {"phase": "Done"}
    desired = status_to_write(WIDGET, manager, remote, NOW)
    assert desired == {"phase": "Done"}
    assert WIDGET.is_finished({**manager, "status": desired})
    assert status_to_write(WIDGET, {**manager, "status": desired}, remote, NOW) is None


def test_the_job_kind_decides_the_same_way() -> None:
    job: Obj = {"metadata": {"name": "train", "namespace": "ns", "uid": "j-uid"},
                "spec": {"managedBy": CONTROLLER, "suspend": True}}
    assert decide(JOB_KIND, job, placement_of(job), []) is Step.HOLD
    job["spec"]["suspend"] = False
    assert decide(JOB_KIND, job, placement_of(job), []) is Step.PLACE
    assert decide(JOB_KIND, job, Placement("w1", "train"), []) is Step.SYNC
    job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert decide(JOB_KIND, job, Placement("w1", "train"), ["w1"]) is Step.FINISH


def test_a_job_and_a_widget_of_the_same_name_never_collide() -> None:
    job = {"metadata": {"name": "train", "namespace": "ns", "uid": "j-uid"}, "spec": {"managedBy": CONTROLLER}}
    job_copy = JOB_KIND.build_copy(job, origin=ORIGIN, origin_cluster="mgr", remote_name="train")
    widget_copy = WIDGET.build_copy(widget(), origin=ORIGIN, origin_cluster="mgr", remote_name="train")
    assert manager_key_of(JOB_KIND.name, job_copy) == manager_key_of(WIDGET.name, widget_copy) == "ns/train"
    assert manager_key_of(WIDGET.name, job_copy) is None and manager_key_of(JOB_KIND.name, widget_copy) is None
    assert QueueKey(JOB_KIND.name, "ns/train") != QueueKey(WIDGET.name, "ns/train")
    assert str(QueueKey(WIDGET.name, "ns/train")) == "Widget:ns/train"
    assert origin_annotation("Job") == "jobmirror.dev/origin-job"


class _ListOnly:
    """Enough of a client for an informer's initial list (the cache under test is ours)."""

    name = "w1"

    def __init__(self, items: dict[str, list[Obj]]) -> None:
        self.items = items

    async def list_pages(self, resource: Resource, namespace: str | None,
                         **_: Any) -> AsyncIterator[tuple[list[Obj], str]]:
        yield self.items.get(resource.plural, []), "1"


async def test_worker_keeps_one_cache_and_uid_index_per_kind() -> None:
    job = {"metadata": {"name": "train", "namespace": "ns", "uid": "same-uid"}, "spec": {}}
    job_copy = JOB_KIND.build_copy(job, origin=ORIGIN, origin_cluster="mgr", remote_name="train")
    widget_copy = WIDGET.build_copy({**widget(), "metadata": {**widget()["metadata"], "uid": "same-uid"}},
                                    origin=ORIGIN, origin_cluster="mgr", remote_name="train")
    for i, obj in enumerate((job_copy, widget_copy)):
        obj["metadata"]["resourceVersion"] = str(i + 1)
    client = _ListOnly({"jobs": [job_copy], "widgets": [widget_copy]})
    w = WorkerCluster(Worker(name="w1", kubeconfig=Path("/k")), client,  # type: ignore[arg-type]
                      kinds=[JOB_KIND, WIDGET], origin=ORIGIN)
    for informer in w.informers():
        await informer._relist()
        informer.synced.set()
    assert w.copy_of(JOB_KIND, job) is job_copy
    assert w.copy_of(WIDGET, {**widget(), "metadata": {**widget()["metadata"], "uid": "same-uid"}}) is widget_copy
    assert w.copies(WIDGET) == [widget_copy] and w.synced(WIDGET)
    assert w.unfinished() == 2  # load counts every kind


def test_a_reconciler_serves_the_kind_it_is_given() -> None:
    cfg = Config.model_validate({"workers": [{"name": "w1", "kubeconfig": "/k"}]})
    r = Reconciler(cfg, WIDGET, None, None, {}, None, None)  # type: ignore[arg-type]
    assert r.resource is WIDGET.resource and r.kind is WIDGET
    assert cfg.claim_rule.claims(WIDGET, widget()) and not cfg.claim_rule.claims(JOB_KIND, widget())


def test_what_a_reconciler_remembers_about_a_job_is_one_record_forgotten_whole() -> None:
    """every per-Job note lives in one JobMemory: reading makes none, forget drops it whole"""
    r = Reconciler.__new__(Reconciler)  # only its memory is under test
    r._memory = LruDict(10)
    memory = r._remember_about("u1")
    memory.refused["w1"] = 5.0
    memory.refusals["create"] = 3
    assert r._recalled("u1") is memory and r._recalled("u2") == JobMemory()
    assert "u2" not in r._memory  # reading never stores
    r._memory.pop("u1", None)
    assert r._recalled("u1") == JobMemory()


MIRROR = Path(__file__).resolve().parents[2] / "mirror"
#: the wiring and the command line may name the Job kind; every other module of the core may not
WIRING = {"controller.py", "cli.py", "__init__.py"}
GENERIC = sorted(str(p.relative_to(MIRROR)) for p in (*MIRROR.glob("*.py"), *MIRROR.glob("room/*.py"))
                 if p.name not in WIRING or p.parent != MIRROR)
JOB_SPECIFIC = ("mirror.jobs", "mirror.inspect")


def test_the_core_is_what_is_checked() -> None:
    assert {"reconciler.py", "decisions.py", "workers.py", "gc.py", "worker_events.py", "kinds.py"} <= set(GENERIC)


@pytest.mark.parametrize("module", GENERIC)
def test_the_generic_core_imports_nothing_job_specific(module: str) -> None:
    """the kind seam is closed: only the wiring (controller, cli) names the Job kind"""
    tree = ast.parse((MIRROR / module).read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {f"mirror.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "mirror"
                 for a in n.names}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    leaks = sorted(m for m in imported if m.startswith(JOB_SPECIFIC))
    assert not leaks, f"mirror/{module} imports {leaks}"
