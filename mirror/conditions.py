"""Job condition helpers over raw API dicts.

The mirror controller works on the JSON the API server returns, never on typed models, so
these helpers tolerate missing keys and junk entries: a status written by a different
Kubernetes version must not crash the reconcile loop.
"""

from __future__ import annotations

from typing import Any

COMPLETE = "Complete"
FAILED = "Failed"
FAILURE_TARGET = "FailureTarget"
SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"
SUSPENDED = "Suspended"

# Types whose meaning the API server's status validation knows about; the translator derives
# them itself instead of copying them blindly.
KNOWN_TYPES = frozenset({COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED})

Condition = dict[str, Any]


def conditions_of(status: dict[str, Any] | None) -> list[Condition]:
    """Condition entries of a status; non-object entries are skipped because a status from
    another writer is data we must survive, not trust."""
    if not isinstance(status, dict):
        return []
    raw = status.get("conditions")
    if not isinstance(raw, list):
        return []
    return [c for c in raw if isinstance(c, dict)]


def find(conditions: list[Condition], ctype: str) -> Condition | None:
    """The first condition of ``ctype``: the API server's checks look at any entry, and so does
    the upstream controller's lookup, so the first one is the one that counts."""
    for c in conditions:
        if c.get("type") == ctype:
            return c
    return None


def is_true(conditions: list[Condition], ctype: str) -> bool:
    """Whether any entry of ``ctype`` is True, exactly as the validation's IsConditionTrue."""
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conditions)


def new_condition(ctype: str, status: str, reason: str, message: str, now: str) -> Condition:
    """A condition stamped with ``now`` for both probe and transition times, like upstream's."""
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }


def ensure(conditions: list[Condition], ctype: str, status: str, reason: str, message: str, now: str) -> bool:
    """Make ``ctype`` carry ``status``/``reason``/``message``; returns whether anything changed.

    The transition time moves only when the status does, so a repeated reconcile (or a
    reason-only correction) does not make the condition look newer than it is. A False
    condition is never created from nothing, matching upstream: "not suspended" needs no entry.
    """
    existing = find(conditions, ctype)
    if existing is None:
        if status == "False":
            return False
        conditions.append(new_condition(ctype, status, reason, message, now))
        return True
    if existing.get("status") == status:
        if existing.get("reason", "") == reason and existing.get("message", "") == message:
            return False
        existing["reason"] = reason
        existing["message"] = message
        existing["lastProbeTime"] = now
        return True
    existing.clear()
    existing.update(new_condition(ctype, status, reason, message, now))
    return True
