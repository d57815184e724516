"""Table tests for kruntime.identity: which failures are retried, how long it waits, and that it gives up."""

from __future__ import annotations

from typing import Any

import pytest

from kruntime.client import ApiError
from kruntime.identity import IdentityUnavailable, identity_retry_delay, read_identity
from mirror.config import Config, Worker
from mirror.naming import default_origin


def err(status: int) -> ApiError:
    return ApiError(status, "x", "boom", cluster="manager")


@pytest.mark.parametrize(
    ("status", "attempt", "expected"),
    [
        (0, 1, 0.5), (0, 2, 1.0), (0, 4, 4.0), (0, 5, 8.0), (0, 6, None),
        (429, 1, 0.5), (503, 3, 2.0),
        (403, 1, None), (404, 1, None), (401, 2, None),
    ],
    ids=["transport-1", "transport-2", "transport-4", "transport-capped", "transport-last", "throttled",
         "server-error", "forbidden", "not-found", "unauthorized"],
)
def test_retry_delay(status: int, attempt: int, expected: float | None) -> None:
    assert identity_retry_delay(err(status), attempt, attempts=6, base=0.5, cap=8.0) == expected


class _Flaky:
    """A client whose first ``failures`` reads fail with ``status``."""

    name = "manager"

    def __init__(self, failures: int, status: int = 0) -> None:
        self.failures, self.status, self.calls = failures, status, 0

    async def get(self, *_: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.failures:
            raise err(self.status)
        return {"metadata": {"uid": "kube-system-uid"}}


async def _no_sleep(_: float) -> None:
    return None


@pytest.mark.parametrize(("failures", "calls"), [(0, 1), (1, 2), (5, 6)], ids=["first", "second", "last-attempt"])
async def test_transient_failures_are_retried(failures: int, calls: int) -> None:
    client = _Flaky(failures)
    assert await read_identity(client, attempts=6, sleep=_no_sleep) == "kube-system-uid"  # type: ignore[arg-type]
    assert client.calls == calls


@pytest.mark.parametrize(("failures", "status", "calls"), [(6, 0, 6), (1, 403, 1)], ids=["exhausted", "forbidden"])
async def test_gives_up_bounded_and_says_why(failures: int, status: int, calls: int) -> None:
    client = _Flaky(failures, status)
    with pytest.raises(IdentityUnavailable, match=f"cluster manager after {calls} attempt"):
        await read_identity(client, attempts=6, sleep=_no_sleep)  # type: ignore[arg-type]
    assert client.calls == calls


@pytest.mark.parametrize(("configured", "expected"), [(None, "jobmirror-uid-a"), ("shared", "shared")],
                         ids=["default-derived", "explicit-kept"])
def test_origin_for(configured: str | None, expected: str) -> None:
    cfg = Config(workers=[Worker(name="w", kubeconfig="/k")], origin=configured)  # type: ignore[arg-type]
    assert cfg.origin_for("uid-a") == expected


def test_default_origin_is_a_label_value_for_a_real_uid() -> None:
    origin = default_origin("0b5c6f0e-1111-2222-3333-444455556666")
    Config(workers=[Worker(name="w", kubeconfig="/k")], origin=origin)  # type: ignore[arg-type]  # validates
    assert origin == "jobmirror-0b5c6f0e-1111-2222-3333-444455556666"
