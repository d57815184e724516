"""A worker whose kubeconfig cannot be loaded: unhealthy with the reason, never contacted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mirror import metrics
from mirror.config import Worker
from mirror.jobs.kind import JOB_KIND
from mirror.workers import WorkerCluster


class _NoCalls:
    """A client that fails the test on any request: a broken worker must not be contacted."""

    name = "w-broken"
    timeout = 5.0

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
