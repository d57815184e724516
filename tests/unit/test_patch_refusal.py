"""A refused spec patch on fake API servers: said once, backed off (the plan requeues while the
backoff runs, no second PATCH), status still mirrored; accepted again once the worker takes it."""

from __future__ import annotations

from kruntime.resources import JOBS
from testkit.fakefleet import fake_fleet, job
from tests.unit.test_reconciler_passes import RUNNING, placed_on, refuse, worker_status


async def test_a_refused_spec_patch_backs_off_and_status_is_still_mirrored() -> None:
    async with fake_fleet() as f:
        await f.create(job("a"))
        await f.sync("a")
        worker = placed_on(f)
        f.workers[worker].react(refuse("PATCH", "/jobs/a", status=422))
        await f.manager.client("user").patch(JOBS, "default", "a", {"spec": {"parallelism": 2}})
        await f.settle()
        await worker_status(f, worker, RUNNING)
        after = await f.sync("a")
        assert after is not None and after > 1  # backoff
        mirrored = f.job("a")
        assert mirrored is not None and mirrored["status"]["active"] == 1  # status first
        assert f.workers[worker].count("PATCH", "/jobs/a") == 1
        [message] = [m for r, m in f.events("a") if r == "WorkerRefused"]
        assert "refused the spec change" in message and "retried with backoff" in message
        again = await f.sync("a")  # within the backoff: no second PATCH, looked at when it runs out
        assert again is not None and 0.5 <= again <= after
        assert f.workers[worker].count("PATCH", "/jobs/a") == 1
