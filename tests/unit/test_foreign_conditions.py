"""Foreign conditions from a worker copy are bounded in number and length, found by type (issue 32 item 8).

A worker copy with 6,000 unknown condition types cost ~0.95 s per status pass (a nested scan) and
grew the manager Job to ~1.3 MB. Now at most MAX_FOREIGN_CONDITIONS foreign types are on the
manager before one more is added, messages are cut at MAX_CONDITION_MESSAGE characters, and the
lookup is a dict. Every result is checked against the manager API server's status rules
(``tests/jobstatus_validation.py``), as the translator's other table tests do.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest

from jobapi.conditions import KNOWN_TYPES
from mirror.jobs.status_translation import (
    MAX_CONDITION_MESSAGE,
    MAX_FOREIGN_CONDITIONS,
    TRUNCATED,
    desired_manager_status,
    status_differs,
)
from tests.unit.test_status_translation import NOW, T0, cond, manager, remote, translate

#: one status pass, however many conditions the worker wrote (the old code: ~0.95 s at 6,000)
BUDGET = 0.1


def foreign(n: int, prefix: str = "Tool", message: str = "m") -> list[dict[str, Any]]:
    return [cond(f"{prefix}{i}", reason="Why", message=message) for i in range(n)]


def foreign_types(status: dict[str, Any]) -> list[str]:
    return [c["type"] for c in status.get("conditions", []) if c["type"] not in KNOWN_TYPES]


@pytest.mark.parametrize(("on_manager", "on_worker", "want"), [
    # (foreign conditions already on the manager, on the worker copy, foreign types after the pass)
    (0, 3, 3),
    (0, MAX_FOREIGN_CONDITIONS, MAX_FOREIGN_CONDITIONS),
    (0, MAX_FOREIGN_CONDITIONS + 1, MAX_FOREIGN_CONDITIONS),
    (0, 6_000, MAX_FOREIGN_CONDITIONS),
    (10, 6_000, MAX_FOREIGN_CONDITIONS),  # the same types: the first 10 updated, 6 more added
    (MAX_FOREIGN_CONDITIONS, 6_000, MAX_FOREIGN_CONDITIONS),
    (40, 6_000, MAX_FOREIGN_CONDITIONS),  # grown before the cap: the first ones kept
])
def test_foreign_conditions_are_capped_and_cheap(on_manager: int, on_worker: int, want: int) -> None:
    mgr = manager(status={"startTime": T0, "conditions": foreign(on_manager, message="old")})
    rem = remote({"startTime": T0, "conditions": foreign(on_worker, message="new")})
    start = time.process_time()
    new = desired_manager_status(mgr, rem, NOW)
    status_differs(mgr["status"], new)
    spent = time.process_time() - start
    assert len(foreign_types(new)) == want
    assert foreign_types(new) == [f"Tool{i}" for i in range(want)]  # the first ones, in the worker's order
    assert all(c["message"] == "new" for c in new["conditions"][:min(want, on_worker)])
    assert spent < BUDGET, f"{spent:.3f}s for {on_worker} worker conditions"


def test_capped_results_are_accepted_by_the_manager_api_server() -> None:
    """the validation oracle on a capped pass (translate() asserts it), and a finished Job still finishes"""
    rem = remote({"startTime": T0, "succeeded": 3, "conditions": [
        *foreign(100), cond("SuccessCriteriaMet", reason="CompletionsReached"),
        cond("Complete", reason="CompletionsReached")], "completionTime": T0})
    new = translate(manager(status={"startTime": T0}), rem)
    assert len(foreign_types(new)) == MAX_FOREIGN_CONDITIONS
    assert {"SuccessCriteriaMet", "Complete"} <= {c["type"] for c in new["conditions"]}


@pytest.mark.parametrize(("message", "want"), [
    ("short", "short"),
    ("x" * MAX_CONDITION_MESSAGE, "x" * MAX_CONDITION_MESSAGE),
    ("x" * (MAX_CONDITION_MESSAGE + 1), "x" * (MAX_CONDITION_MESSAGE - len(TRUNCATED)) + TRUNCATED),
    ("y" * 1_000_000, "y" * (MAX_CONDITION_MESSAGE - len(TRUNCATED)) + TRUNCATED),
])
def test_mirrored_messages_are_cut_with_a_marker(message: str, want: str) -> None:
    rem = remote({"startTime": T0, "conditions": [cond("ToolSays", message=message),
                                                  cond("FailureTarget", reason="BackoffLimitExceeded",
                                                       message=message)]})
    new = translate(manager(status={"startTime": T0}), rem)
    assert {c["type"]: c["message"] for c in new["conditions"]} == {"ToolSays": want, "FailureTarget": want}
    assert all(len(c["message"]) <= MAX_CONDITION_MESSAGE for c in new["conditions"])


def test_a_repeated_type_on_the_worker_is_one_entry_on_the_manager() -> None:
    rem = remote({"startTime": T0, "conditions": [cond("Tool", "True", message="a"), cond("Tool", "False",
                                                                                          message="b")] * 3_000})
    start = time.process_time()
    new = translate(manager(status={"startTime": T0}), rem)
    assert time.process_time() - start < 2 * BUDGET  # two validation runs included
    assert [(c["type"], c["status"], c["message"]) for c in new["conditions"]] == [("Tool", "False", "b")]


def pass_time(n: int) -> float:
    """The least CPU time of a few status passes over a manager and a copy with ``n`` foreign types each."""
    mgr = manager(status={"startTime": T0, "conditions": foreign(n, message="old")})
    rem = remote({"startTime": T0, "conditions": foreign(n, message="new")})
    best = float("inf")
    gc.disable()  # a collection inside one timed pass is not the pass's cost (a CI run: 20.8x at load ~10)
    try:
        for _ in range(7):
            start = time.process_time()
            status_differs(mgr["status"], desired_manager_status(mgr, rem, NOW))
            best = min(best, time.process_time() - start)
    finally:
        gc.enable()
    return best


def test_a_manager_grown_before_the_cap_costs_linear_time() -> None:
    """6,000 foreign types already on the manager (grown before the cap, or written there): 8 times
    the conditions cost at most ~20 times the time (a nested scan: ~64), and the pass trims them"""
    small, large = pass_time(750), pass_time(6_000)
    assert large / small < 20, f"{small:.4f}s at 750, {large:.4f}s at 6,000"
    assert large < BUDGET
    mgr = manager(status={"startTime": T0, "conditions": [*foreign(6_000, prefix="Mine"), cond("Suspended", "False")]})
    new = translate(mgr, remote({"startTime": T0, "conditions": foreign(6_000)}))
    assert foreign_types(new) == [f"Mine{i}" for i in range(MAX_FOREIGN_CONDITIONS)]  # the manager's first
    assert [c["type"] for c in new["conditions"] if c["type"] in KNOWN_TYPES] == ["Suspended"]  # known: all kept
