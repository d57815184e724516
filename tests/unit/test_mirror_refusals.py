"""Pure decisions for a worker that refuses a copy (issue 11, item 1)."""

from __future__ import annotations

import pytest

from mirror.decisions import RefusalAction, is_refusal, refusal_action, refusal_exclusions


@pytest.mark.parametrize(
    ("status", "missing_namespace", "expected"),
    [
        (403, False, True),  # ResourceQuota exceeded, namespace terminating, webhook/VAP deny
        (422, False, True),  # invalid for that server (older API), VAP with reason Invalid
        (400, False, True),  # webhook BadRequest
        (404, False, True),  # the resource is not served there
        (404, True, False),  # missing namespace: created or reported on its own path
        (409, False, False),  # AlreadyExists / conflict: own paths
        (429, False, False),  # throttled: transient
        (401, False, False),  # credentials: the worker's health, not this Job
        (408, False, False),
        (500, False, False),
        (503, False, False),
        (0, False, False),  # transport error
    ],
)
def test_is_refusal(status: int, missing_namespace: bool, expected: bool) -> None:
    assert is_refusal(status, missing_namespace=missing_namespace) is expected


def test_refusal_action_moves_only_unpinned_jobs_with_somewhere_to_go() -> None:
    table = {  # (pinned, another worker can take it) -> action
        (False, True): RefusalAction.REPLACE,
        (False, False): RefusalAction.RETRY,
        (True, True): RefusalAction.RETRY,
        (True, False): RefusalAction.RETRY,
    }
    for (pinned, alternative), expected in table.items():
        assert refusal_action(pinned=pinned, alternative=alternative) is expected, (pinned, alternative)


def test_refusal_exclusions_expire() -> None:
    until = {"w1": 100.0, "w2": 50.0}
    assert refusal_exclusions(until, 10.0) == {"w1", "w2"}
    assert refusal_exclusions(until, 50.0) == {"w1"}  # a deadline reached is over
    assert refusal_exclusions(until, 100.0) == frozenset()
    assert refusal_exclusions({}, 0.0) == frozenset()
