"""Quantities a tenant may write, however large, cost microseconds (issue 32 item 2).

The API server accepts ``cpu: 10e9999999`` on a Pod and on a Job's template; the old parser
built ``10**9999999`` (seconds of CPU per watch event and per placement). Now the exponent is
bounded, everything beyond any node is :data:`HUGE` ("never fits"), ``show`` answers in
scientific notation, and a pod whose requests cannot be read is counted as taking its node,
logged once, without the room view's watch path raising.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

import pytest

import mirror.room.view as view_module
from kruntime.resources import NODES, PODS, Obj
from mirror.room.fit import NodeRoom, worker_fit
from mirror.room.quantity import HUGE, QuantityError, amount, nanos, parse, show
from mirror.room.requests import shape_of_template
from mirror.room.view import UNREADABLE_REQUESTS, Loads, RoomView, slim_pod
from testkit.fakecluster import FakeApiServer

#: far above the microseconds these take; the old parser took seconds on the first rows
BUDGET = 0.05
SCIENTIFIC = re.compile(r"^-?\d(\.\d{1,2})?e-?\d+$")


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    start = time.process_time()
    out = fn(*args)
    return out, time.process_time() - start


@pytest.mark.parametrize(("resource", "text", "want"), [
    ("cpu", "10e9999999", HUGE),
    ("cpu", "1e400", HUGE),
    ("memory", "1e400", HUGE),
    ("memory", "9e99999999999999999999", HUGE),  # an exponent too long to read: huge all the same
    ("cpu", "1" + "0" * 100_000, HUGE),  # a mantissa of 100,001 digits (no big integer built)
    ("memory", "1e31", HUGE),
    ("memory", "1e29", 10**29),  # below HUGE: exact
    ("memory", "9223372036854775807", 2**63 - 1),  # int64's largest, exact
    ("cpu", "0.000000000000000000001", 1),  # below 1n: rounded up, like the API server
    ("cpu", "1e-9999999", 1),
    ("memory", "1e-400", 1),
    ("cpu", "0." + "0" * 100_000 + "1", 1),
    ("cpu", "1." + "0" * 100_000 + "1", 1001),  # 1 and a little: rounded up to the next millicore
    ("cpu", "0e9999999", 0),
    ("cpu", "000000000000000000000000000000.5", 500),
    ("memory", "1.5Ei", 3 * 2**59),
    ("memory", "0.1n", 1),
])
def test_huge_and_tiny_quantities_are_bounded_and_cheap(resource: str, text: str, want: int) -> None:
    got, spent = timed(amount, resource, text)
    assert got == want
    assert spent < BUDGET, f"{text[:20]!r} took {spent:.3f}s"


@pytest.mark.parametrize("text", ["10e9999999", "1e400", "-1e400"])
def test_parse_gives_a_bounded_value(text: str) -> None:
    value, spent = timed(parse, text)
    assert abs(value) == HUGE and spent < BUDGET


@pytest.mark.parametrize("bad", ["1e" + "9" * 100_000 + "x", "1" * 300_000 + "q", "e9999999", "1e+-3"])
def test_bad_long_quantities_are_refused_quickly_and_quoted_short(bad: str) -> None:
    start = time.process_time()
    with pytest.raises(QuantityError) as err:
        nanos(bad)
    assert time.process_time() - start < BUDGET
    assert len(str(err.value)) < 100


@pytest.mark.parametrize(("resource", "value", "shown"), [
    ("cpu", HUGE, "1e27"),
    ("memory", HUGE, "1e30"),
    ("memory", 10**400, "1e400"),  # never a float of it (OverflowError)
    ("cpu", 10**403 + 5 * 10**401, "1.05e400"),
    (f"example.com/{'x' * 10}", 123_456 * 10**20, "1.23e25"),
    ("memory", -HUGE, "-1e30"),
])
def test_show_writes_huge_values_in_scientific_notation(resource: str, value: int, shown: str) -> None:
    out, spent = timed(show, resource, value)
    assert out == shown and SCIENTIFIC.match(out) and spent < BUDGET


def node(name: str, cpu: str = "4") -> Obj:
    return {"metadata": {"name": name}, "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, node_name: str, resources: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": resources}]}}


@pytest.mark.parametrize(("job_cpu", "ever", "why"), [
    ("10e9999999", False, "largest node has 4 cpu < 1e27 cpu requested"),
    ("1e400", False, "largest node has 4 cpu < 1e27 cpu requested"),
    ("3", True, "1 of 1 pods fit now"),
])
def test_a_job_asking_beyond_every_node_never_fits(job_cpu: str, ever: bool, why: str) -> None:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": job_cpu}}}]}}
    (fit, spent) = timed(lambda: worker_fit(shape_of_template(template), [NodeRoom("n1", {}, {"cpu": 4000,
                                                                                         "pods": 110})], 1))
    assert fit.ever is ever and fit.why.startswith(why) and spent < BUDGET


@pytest.mark.parametrize(("resources", "requests"), [
    ({"requests": {"cpu": "10e9999999"}}, {"cpu": HUGE}),
    ({"limits": {"cpu": "1e400", "memory": "1e-400"}}, {"cpu": HUGE, "memory": 1}),
    ({"requests": {"cpu": "lots"}}, UNREADABLE_REQUESTS),  # what no API server would store: taken as huge
    ({"requests": ["cpu"]}, UNREADABLE_REQUESTS),
    ({"requests": {"cpu": {"nested": "1"}}}, UNREADABLE_REQUESTS),
])
def test_a_pods_odd_requests_are_counted_never_raised(resources: Any, requests: dict[str, int]) -> None:
    slim, spent = timed(slim_pod, pod("p", "n1", resources))
    assert dict(slim.requests) == requests and spent < BUDGET


def test_a_pod_with_unreadable_requests_takes_its_node_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    view_module._logged.clear()
    loads = Loads()
    bad = pod("bad", "n1", {"requests": {"cpu": "lots"}})
    with caplog.at_level(logging.WARNING, logger="mirror.room.view"):
        for _ in range(5):  # every status update of a pod is a watch event
            slim = slim_pod(bad)
    loads.count(slim, +1)
    logged = [r for r in caplog.records if "requests not readable" in r.getMessage()]
    assert len(logged) == 1 and "ns/bad" in logged[0].getMessage()
    rooms = loads.rooms([node("n1"), node("n2")])
    tiny = shape_of_template({"spec": {"containers": [{"name": "c"}]}})  # asks for nothing but a pod slot
    assert worker_fit(tiny, rooms[:1], 1).now == 0  # the node is taken, even its pod slots
    assert worker_fit(tiny, rooms, 1).now == 1  # the other node is not
    loads.count(slim, -1)
    assert worker_fit(tiny, loads.rooms([node("n1")]), 1).now == 1  # and it gives the node back


async def test_the_room_views_watch_keeps_going_past_odd_pods() -> None:
    """huge, tiny and unreadable quantities through the real informer: no relist, every pod counted"""
    server = FakeApiServer()
    server.seed(NODES.path(), node("n1", cpu="8"))
    view = RoomView("w1", server.client("w1"))
    tasks = [asyncio.create_task(i.run()) for i in view.informers()]
    try:
        await asyncio.gather(*(i.wait_synced(2) for i in view.informers()))
        kubelet = server.client("kubelet")
        odd = ["10e9999999", "1e400", "0.000000000000000000001", "not-a-quantity"]
        start = time.process_time()
        for i, q in enumerate(odd):
            await kubelet.create(PODS, "ns", pod(f"p{i}", "n1", {"requests": {"cpu": q}}))
        await kubelet.create(PODS, "ns", pod("normal", "n1", {"requests": {"cpu": "1"}}))
        for _ in range(50):
            await asyncio.sleep(0)
            if len(view.pods.cache) == len(odd) + 1:
                break
        assert time.process_time() - start < 1.0
        assert len(view.pods.cache) == len(odd) + 1 and view.pods.healthy
        totals = view.totals()
        assert totals["requested"]["cpu"] >= 3 * HUGE
        assert view_module.free_summary(totals, view.pending).startswith("cpu 0/8 free")
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
