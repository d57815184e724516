"""kruntime/events.py against a real API server: queueing, dropping when full, folding, flush."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import pytest
from prometheus_client import REGISTRY

from clusterbed.cluster import ClusterSpec
from kruntime.client import ClusterClient
from kruntime.events import EventRecorder
from kruntime.resources import EVENTS, Obj
from tests.conftest import MANAGER, ensure_namespace

pytestmark = pytest.mark.integration

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]


def involved(ns: str, name: str) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"namespace": ns, "name": name, "uid": str(uuid.uuid4()), "resourceVersion": "1"}}


async def events_in(client: ClusterClient, ns: str) -> list[Obj]:
    items, _ = await client.list_all(EVENTS, ns)
    return items


async def test_full_queue_drops_and_counts_instead_of_blocking(client_for: ClientFor, ns: str) -> None:
    client = await client_for(MANAGER)
    await ensure_namespace(client, ns)
    rec = EventRecorder(client, "events-test", max_queued=5)
    before = REGISTRY.get_sample_value("jobmirror_runtime_events_dropped_total", {"cluster": client.name}) or 0.0
    job = involved(ns, "noisy")
    for i in range(20):  # no await in between: the writer has not run, the queue holds 5
        rec.event(job, "Normal", "Created", f"created pod noisy-{i}")
    assert rec.dropped == 15
    after = REGISTRY.get_sample_value("jobmirror_runtime_events_dropped_total", {"cluster": client.name})
    assert after == before + 15
    await rec.flush()
    got = sorted(e["message"] for e in await events_in(client, ns))
    assert got == [f"created pod noisy-{i}" for i in range(5)]
    assert all(e["source"]["component"] == "events-test" and e["involvedObject"]["name"] == "noisy"
               for e in await events_in(client, ns))


async def test_identical_events_fold_into_one_with_a_count(client_for: ClientFor, ns: str) -> None:
    client = await client_for(MANAGER)
    await ensure_namespace(client, ns)
    rec = EventRecorder(client, "events-test")
    job = involved(ns, "repeat")
    for _ in range(3):
        rec.event(job, "Warning", "StatusRejected", "same message")
    rec.event(job, "Normal", "Dispatched", "another message")
    await rec.flush()
    by_reason = {e["reason"]: e for e in await events_in(client, ns)}
    assert set(by_reason) == {"StatusRejected", "Dispatched"}
    assert by_reason["StatusRejected"]["count"] == 3 and by_reason["StatusRejected"]["type"] == "Warning"
    assert by_reason["Dispatched"]["count"] == 1
    # After a flush the recorder starts its writer again on the next event.
    rec.event(job, "Normal", "Dispatched", "third message")
    await rec.flush()
    assert len(await events_in(client, ns)) == 3
