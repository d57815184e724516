"""Jobs in sync keep no timer; their worker going down brings them back (mirror.in_sync, issue 38:
20,000 running Jobs on a 30 s resync were 667 passes a second that found nothing)."""

from __future__ import annotations

from kruntime.resources import JOBS
from mirror.in_sync import InSync
from mirror.naming import ANNOTATION_CLUSTER
from testkit.fakefleet import fake_fleet, job

RUNNING = {"active": 1, "ready": 1, "terminating": 0, "startTime": "2026-11-25T00:00:00Z",
           "uncountedTerminatedPods": {}}


def test_marks_are_per_worker_and_taken_once() -> None:
    s = InSync()
    s.mark("u1", "ns/a", "w1")
    s.mark("u2", "ns/b", "w1")
    s.mark("u3", "ns/c", "w2")
    s.mark("u3", "ns/c", "w1")  # moved: only its latest worker holds it
    assert sorted(s.workers()) == ["w1"] and len(s) == 3
    s.drop("u2")
    assert "u2" not in s and sorted(s.take("w1")) == ["ns/a", "ns/c"]
    assert s.take("w1") == [] and len(s) == 0 and list(s.workers()) == []


async def test_a_running_job_in_sync_has_no_timer_until_its_worker_goes_down() -> None:
    async with fake_fleet(("worker-1",)) as f:
        await f.create(job("a"))
        await f.sync("a")
        client = f.workers["worker-1"].client("kcm")
        current = await client.get(JOBS, "default", "a")
        await client.replace(JOBS, "default", "a", {**current, "status": RUNNING}, subresource="status")
        await f.settle()
        uid = f.job("a")["metadata"]["uid"]  # type: ignore[index]
        assert await f.sync("a") is None  # the running counters mirrored; then nothing to do, no timer
        assert f.job("a")["status"]["active"] == 1  # type: ignore[index]
        assert uid in f.reconciler.in_sync
        calls = len(f.manager.calls), len(f.workers["worker-1"].calls)
        assert await f.sync("a") is None  # a pass that finds nothing writes nothing and sets no timer
        assert (len(f.manager.calls), len(f.workers["worker-1"].calls)) == calls

        f.clusters["worker-1"]._set_health(False, "connection refused")
        assert f.reconciler.in_sync.take("worker-1") == ["default/a"]  # the controller queues these
        after = await f.sync("a")
        assert after is not None and after > 0  # waiting for the worker: looked at again on a timer
        assert uid not in f.reconciler.in_sync
        assert f.job("a")["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-1"  # type: ignore[index]
