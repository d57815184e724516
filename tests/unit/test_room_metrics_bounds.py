"""One worker's pods cannot stop the room-capacity metrics (issue 32 item 7).

A Pod with ``cpu: 1e400`` made ``Gauge.set`` raise OverflowError in the export task, which had no
error handling: the gauges of every worker stopped. Now the values are clamped to finite floats
and each worker's export handles its own errors.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator

import pytest

import mirror.room.view as view_module
from kruntime.resources import NODES, PODS, Obj
from mirror import metrics
from mirror.room.view import GAUGE_MAX, RoomView, gauge_value
from testkit.fakecluster import FakeApiServer


@pytest.mark.parametrize(("value", "want"), [
    (0, 0.0), (1500, 1500.0), (10**30, 1e30),
    (10**400, float(GAUGE_MAX)), (-(10**400), -float(GAUGE_MAX)),
    (math.inf, float(GAUGE_MAX)), (-math.inf, -float(GAUGE_MAX)), (math.nan, 0.0), (2.5, 2.5),
])
def test_gauge_values_are_finite_floats(value: int | float, want: float) -> None:
    got = gauge_value(value)
    assert isinstance(got, float) and math.isfinite(got) and got == want


def node(name: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, cpu: str, memory: str = "1Gi") -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {
                "cpu": cpu, "memory": memory}}}]},
            "status": {"phase": "Running"}}


@pytest.fixture
async def views() -> AsyncIterator[dict[str, tuple[FakeApiServer, RoomView]]]:
    out, tasks = {}, []
    for worker in ("odd-w1", "odd-w2"):
        server = FakeApiServer()
        server.seed(NODES.path(), node("n1"))
        view = RoomView(worker, server.client(worker))
        tasks += [asyncio.create_task(i.run()) for i in view.informers()]
        await asyncio.gather(*(i.wait_synced(2) for i in view.informers()))
        out[worker] = (server, view)
    yield out
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def gauge(g: object, *labels: str) -> float:
    return float(g.labels(*labels)._value.get())  # type: ignore[attr-defined]


@pytest.mark.parametrize(("cpu", "memory"), [
    ("1e400", "1Gi"), ("10e9999999", "1e400"), ("1e308", "1e308"), ("2", "not-a-quantity"),
])
async def test_huge_pods_on_one_worker_leave_every_workers_gauges_set(
        views: dict[str, tuple[FakeApiServer, RoomView]], cpu: str, memory: str) -> None:
    (s1, odd), (s2, plain) = views["odd-w1"], views["odd-w2"]
    for i in range(3):
        await s1.client("kubelet").create(PODS, "ns", pod(f"huge{i}", cpu, memory))
    await s2.client("kubelet").create(PODS, "ns", pod("plain", "1500m"))
    for _ in range(30):
        await asyncio.sleep(0)
    for view in (odd, plain):  # what the controller's export task does, every worker in turn
        view.export()
    for resource in ("cpu", "memory"):
        assert math.isfinite(gauge(metrics.WORKER_REQUESTED, "odd-w1", resource))
    assert gauge(metrics.WORKER_REQUESTED, "odd-w1", "cpu") >= 3e27  # clamped, not dropped
    assert gauge(metrics.WORKER_ALLOCATABLE, "odd-w1", "cpu") == 8000
    assert gauge(metrics.WORKER_REQUESTED, "odd-w2", "cpu") == 1500
    assert gauge(metrics.WORKER_ALLOCATABLE, "odd-w2", "memory") == 16 * 2**30


async def test_a_worker_whose_export_fails_does_not_stop_the_next(
        views: dict[str, tuple[FakeApiServer, RoomView]], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    (_, broken), (s2, plain) = views["odd-w1"], views["odd-w2"]
    await s2.client("kubelet").create(PODS, "ns", pod("plain", "250m"))
    for _ in range(30):
        await asyncio.sleep(0)

    def overflow() -> dict[str, dict[str, int]]:
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(broken, "totals", overflow)
    view_module._logged.clear()
    with caplog.at_level(logging.WARNING, logger="mirror.room.view"):
        for _ in range(3):  # three export rounds
            for view in (broken, plain):
                view.export()
    assert gauge(metrics.WORKER_REQUESTED, "odd-w2", "cpu") == 250
    said = [r.getMessage() for r in caplog.records if "room metrics not exported" in r.getMessage()]
    assert len(said) == 1 and "odd-w1" in said[0]  # once, not every round
