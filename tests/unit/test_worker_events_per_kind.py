"""Worker events are followed per (kind, worker): wiring a second kind must not replace the
first kind's event mirroring on the same worker (it did when they were keyed by worker alone)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from kruntime.events import EventRecorder
from kruntime.informer import Informer
from kruntime.resources import Resource
from mirror.config import Config, Worker
from mirror.controller import MirrorController
from mirror.jobs.kind import JOB_KIND
from mirror.jobsets.kind import JOBSET_KIND
from mirror.workers import WorkerCluster


class _NoCalls:
    """A client no test call reaches: wiring builds informers, it does not list."""

    def __init__(self, name: str) -> None:
        self.name = name

    def sibling(self, *_: object, **__: object) -> _NoCalls:
        return self


def _controller() -> MirrorController:
    cfg = Config.model_validate({"workers": [{"name": "w1", "kubeconfig": "/k"}, {"name": "w2", "kubeconfig": "/k"}]})
    ctl = MirrorController(cfg, kinds=[JOB_KIND, JOBSET_KIND])
    ctl.recorder = EventRecorder(_NoCalls("manager"), "jobmirror")  # type: ignore[arg-type]
    for name in ("w1", "w2"):
        ctl.workers[name] = WorkerCluster(Worker(name=name, kubeconfig=Path("/k")), _NoCalls(name),  # type: ignore[arg-type]
                                          kinds=[JOB_KIND, JOBSET_KIND], origin="mgr")
    return ctl


def test_each_kind_keeps_its_worker_events_on_every_worker() -> None:
    ctl = _controller()
    for kind in (JOB_KIND, JOBSET_KIND):
        ctl._follow_worker_events(kind, Informer(_NoCalls("manager"), kind.resource))  # type: ignore[arg-type]
    assert {(k, w): we.kind.name for (k, w), we in ctl.worker_events.items()} == {
        ("Job", "w1"): "Job", ("Job", "w2"): "Job", ("JobSet", "w1"): "JobSet", ("JobSet", "w2"): "JobSet"}


async def test_a_started_worker_follows_the_events_of_every_kind() -> None:
    ctl = _controller()
    for kind in (JOB_KIND, JOBSET_KIND):
        ctl._follow_worker_events(kind, Informer(_NoCalls("manager"), kind.resource))  # type: ignore[arg-type]
    spawned: list[str] = []

    def spawn(coro: Coroutine[Any, Any, None], name: str) -> None:
        coro.close()
        spawned.append(name)

    ctl._spawn = spawn  # type: ignore[method-assign]
    ctl._start_worker(ctl.workers["w1"])
    assert sorted(n for n in spawned if "warning-events" in n) == ["w1-Job-warning-events", "w1-JobSet-warning-events"]
    await asyncio.sleep(0)


def test_a_kind_without_pods_follows_no_events() -> None:
    ctl = _controller()
    widget = type("Widget", (), {"name": "Widget", "pods": None, "resource": Resource("e.dev", "v1", "ws", "W")})()
    ctl._follow_worker_events(widget, Informer(_NoCalls("manager"), widget.resource))  # type: ignore[arg-type]
    assert ctl.worker_events == {}
