"""A worker whose kubeconfig cannot be loaded: unhealthy with the reason, never contacted."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kruntime.client import ApiError
from kruntime.reachability import Reachability
from mirror import metrics
from mirror.config import Worker
from mirror.jobs.kind import JOB_KIND
from mirror.workers import WorkerCluster


class _NoCalls:
    """A client that fails the test on any request: a broken worker must not be contacted."""

    name = "w-broken"
    timeout = 5.0

    def __init__(self) -> None:
        self.reachability = Reachability()

    async def request(self, *a: Any, **kw: Any) -> Any:
        raise AssertionError(f"contacted a worker whose kubeconfig is unusable: {a}")


async def test_worker_with_unusable_kubeconfig_is_unhealthy_with_the_reason() -> None:
    reason = "unusable kubeconfig: kubeconfig /k: Expected key current-context"
    w = WorkerCluster(Worker(name="w-broken", kubeconfig=Path("/k")), _NoCalls(),  # type: ignore[arg-type]
                      kinds=[JOB_KIND], origin="o", config_error=reason)
    assert not w.healthy and w.last_error == reason
    w.probe_ok = True  # even a stray good probe result cannot make it healthy
    assert not w.healthy
    await w.probe_once()
    assert w.probed.is_set()
    assert not w.healthy
    assert w.describe()["lastError"] == reason and w.describe()["healthy"] is False
    assert metrics.WORKER_UP.labels("w-broken")._value.get() == 0


async def test_worker_without_config_error_is_probed() -> None:
    calls: list[str] = []

    class _Ok(_NoCalls):
        async def request(self, method: str, path: str, **kw: Any) -> Any:
            calls.append(path)
            return {}

    w = WorkerCluster(Worker(name="w-ok", kubeconfig=Path("/k")), _Ok(), kinds=[], origin="o")  # type: ignore[arg-type]
    await w.probe_once()
    assert calls == ["/readyz"] and w.healthy and w.last_error is None


async def test_an_unhealthy_spell_counts_from_its_own_start_not_an_earlier_ones() -> None:
    """``healthy`` also follows the copy watches, between probes: a watch recovery ends a spell, so a
    failure after it starts a new one (an old start would give the worker up before workerLostTimeout)."""
    now = [100.0]

    class _Ok(_NoCalls):
        name = "w-flaky"

        async def request(self, method: str, path: str, **kw: Any) -> Any:
            return {}

    w = WorkerCluster(Worker(name="w-flaky", kubeconfig=Path("/k")), _Ok(),  # type: ignore[arg-type]
                      kinds=[JOB_KIND], origin="o", clock=lambda: now[0])
    (watch,) = w.informers()
    watch.synced.set()
    watch._connected()
    await w.probe_once()
    assert w.healthy and w.unhealthy_for() == 0.0

    now[0] = 110.0
    w.mark_suspect("GET ...: connection refused")  # spell 1 begins at 110
    now[0] = 115.0
    assert not w.healthy and w.unhealthy_for() == 5.0
    watch.healthy = False  # the probe answers again, the copy watch not yet: still spell 1
    await w.probe_once()
    now[0] = 120.0
    assert not w.healthy and w.unhealthy_for() == 10.0

    watch._connected()  # at 121 the watch recovers, between probes: healthy, and nobody asks
    now[0] = 150.0
    w.mark_suspect("GET ...: connection refused")  # spell 2 begins at 150
    now[0] = 153.0
    assert not w.healthy and w.unhealthy_for() == 3.0  # not 43 (from 110)
    now[0] = 180.0
    assert w.unhealthy_for() == 30.0  # a continuing spell keeps its start


async def test_a_probe_that_finds_the_worker_back_wakes_its_watches() -> None:
    """After an outage a watch may be backing off for up to 30 s: the probe that sees the worker answer
    again cuts every such pause short (once per recovery, not on every good probe)."""
    answers: list[bool] = [False]

    class _Flaky(_NoCalls):
        name = "w-back"

        async def request(self, method: str, path: str, **kw: Any) -> Any:
            if not answers[-1]:
                raise ApiError(0, "Transport", "connect refused")
            return {}

    client = _Flaky()
    w = WorkerCluster(Worker(name="w-back", kubeconfig=Path("/k")), client, kinds=[], origin="o")  # type: ignore[arg-type]
    await w.probe_once()  # fails (after its own retries)
    assert not w.probe_ok and client.reachability.recoveries == 0
    paused = asyncio.create_task(client.reachability.pause(30.0))
    await asyncio.sleep(0)
    answers.append(True)
    await w.probe_once()
    await asyncio.wait_for(paused, 1.0)  # woken, not slept out
    assert w.probe_ok and client.reachability.recoveries == 1
    await w.probe_once()
    assert client.reachability.recoveries == 1  # already answering: nothing to wake
