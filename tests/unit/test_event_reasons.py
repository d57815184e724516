"""mirror/event_reasons.py is the one table of the mirror controller's events: the code writes only its reasons."""

from __future__ import annotations

import ast
from pathlib import Path

from mirror import event_reasons, placement
from mirror.event_reasons import ALL, BY_REASON, NORMAL, WARNING

MIRROR = Path(__file__).resolve().parents[2] / "mirror"

#: The reasons (and types) the controller wrote before the table existed: users, alerts and tests
#: filter on them, so none may change or vanish unless retired on purpose (RETIRED).
KNOWN = {
    "Redispatched": NORMAL, "PlacementMoved": NORMAL, "WaitingForRoom": NORMAL, "WaitingForQuota": NORMAL,
    "ExceedsQuota": WARNING, "UnknownPriorityClass": WARNING,
    "NoWorker": WARNING, "NoWorkerFits": WARNING, "WorkerNotConfigured": WARNING, "WorkerLost": WARNING,
    "NamespaceNotAllowed": WARNING, "NamespaceMissing": WARNING, "WorkerRefused": WARNING,
    "WorkerDroppedFields": WARNING, "CopyRecreated": NORMAL, "Replaced": NORMAL, "NameCollision": WARNING,
    "RemoteDeleted": NORMAL, "FinalizerReleased": NORMAL, "FinishedWithoutCopy": WARNING,
    "CopyLeftForGC": WARNING, "StatusRejected": WARNING, "StaleCopyOutcomeUsed": NORMAL,
    "CopyUnschedulable": WARNING, "CopyStuck": WARNING, "WorkerWarning": WARNING,
    "HeadOfLineHoldEnded": NORMAL,  # issue 32: a waiting Job's hold on its workers is bounded
    "NamespaceWeaker": WARNING,  # issue 32: a worker namespace weaker than the manager's gets no copy
    "CopyNotMoved": WARNING,  # issue 36: a stuck copy the move limits keep where it is
}

#: Reasons no longer written, and why: none may come back, least of all with another meaning.
RETIRED = {
    # issue 23 (456d9e8): the Job's placement annotations say where its copy is and why, and a POST
    # per Job was a fifth of the manager calls; tests count the copies a worker held instead.
    "Dispatched": NORMAL,
}


def test_the_table_keeps_every_reason_and_type() -> None:
    assert {e.reason: e.type for e in ALL} == KNOWN
    assert len(BY_REASON) == len(ALL), "a reason is listed twice"


def test_a_retired_reason_is_not_written_again() -> None:
    assert not set(RETIRED) & set(BY_REASON)
    assert not set(RETIRED) & set(KNOWN)


def test_every_row_says_when_and_what_to_do() -> None:
    for e in ALL:
        assert e.when.strip() and e.action.strip(), e.reason
        assert "|" not in e.when + e.action, f"{e.reason}: '|' would break the reference table"


def test_every_constant_is_in_the_table() -> None:
    constants = [v for v in vars(event_reasons).values() if isinstance(v, event_reasons.EventReason)]
    assert set(constants) == set(ALL)


def test_placement_refusals_carry_reasons_of_the_table() -> None:
    """The placement's exceptions name their reason; the reconciler writes it with the table's type."""
    assert BY_REASON[placement.NoWorker.reason] == event_reasons.NO_WORKER
    assert BY_REASON[placement.NoWorkerFits.reason].type == event_reasons.NO_WORKER.type
    assert BY_REASON[placement.WaitingForRoom.reason] == event_reasons.WAITING_FOR_ROOM


def _event_calls() -> list[tuple[str, ast.Call]]:
    calls = []
    for path in sorted(MIRROR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "event":
                calls.append((f"{path.relative_to(MIRROR.parent)}:{node.lineno}", node))
    return calls


def test_no_event_call_in_mirror_spells_its_reason_or_type() -> None:
    """``recorder.event(obj, "Warning", "Reason", …)`` would bypass the table (and the docs)."""
    calls = _event_calls()
    assert calls, "no event call found: has the recorder's method been renamed?"
    for where, call in calls:
        literal = [a for a in call.args[1:3] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        assert not literal, f"{where}: event type or reason spelled out; add it to mirror/event_reasons.py"
