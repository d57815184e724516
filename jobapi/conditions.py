"""Job conditions over raw API dicts: types, reasons, lookups and the two ways to set one.

Conditions come from whoever wrote the status (another Kubernetes version, a worker-side
tool), so every reader here tolerates missing keys and junk entries.

Lookups differ on purpose, and the names say how:

* :func:`find` / :func:`found_true`: the *first* entry of a type (upstream's
  ``findConditionByType``), used where a controller reads its own bookkeeping;
* :func:`is_true`: *any* entry of a type is True (the status validation's
  ``IsConditionTrue`` and upstream's ``FinishedCondition``), used for "is it finished".

Setting differs on purpose too:

* :func:`set_restamping`: the upstream Job controller's rule, which the builtin controller
  reproduces: any change of status, reason or message replaces the condition, both times
  restamped;
* :func:`set_keeping_transition`: the API conventions' rule, which the mirror follows so a
  repeated reconcile or a reason-only correction does not make a condition look newer:
  ``lastTransitionTime`` moves only when the status does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# -- types -------------------------------------------------------------------------------------

COMPLETE = "Complete"
FAILED = "Failed"
FAILURE_TARGET = "FailureTarget"
SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"
SUSPENDED = "Suspended"

#: Types whose meaning the API server's status validation knows about.
KNOWN_TYPES = frozenset({COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED})
#: Types that make a Job finished (terminal) when True.
TERMINAL_TYPES = (COMPLETE, FAILED)

# -- reasons and messages, as the upstream controller writes them -----------------------------

REASON_POD_FAILURE_POLICY = "PodFailurePolicy"
REASON_BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"
REASON_MAX_FAILED_INDEXES_EXCEEDED = "MaxFailedIndexesExceeded"
REASON_FAILED_INDEXES = "FailedIndexes"
REASON_SUCCESS_POLICY = "SuccessPolicy"
REASON_COMPLETIONS_REACHED = "CompletionsReached"
REASON_JOB_SUSPENDED = "JobSuspended"
REASON_JOB_RESUMED = "JobResumed"

MSG_BACKOFF_LIMIT = "Job has reached the specified backoff limit"
MSG_DEADLINE = "Job was active longer than specified deadline"
MSG_MAX_FAILED_INDEXES = "Job has exceeded the specified maximal number of failed indexes"
MSG_FAILED_INDEXES = "Job has failed indexes"
MSG_COMPLETIONS_REACHED = "Reached expected number of succeeded pods"
MSG_JOB_SUSPENDED = "Job suspended"
MSG_JOB_RESUMED = "Job resumed"

Condition = dict[str, Any]


# -- reading -----------------------------------------------------------------------------------

def conditions_of(status: object) -> list[Condition]:
    """Condition entries of a status; non-object entries are skipped (data to survive, not trust)."""
    if not isinstance(status, Mapping):
        return []
    raw = status.get("conditions")
    if not isinstance(raw, list):
        return []
    return [c for c in raw if isinstance(c, dict)]


def job_conditions(job: object) -> list[Condition]:
    """The condition entries of a Job (or of anything with a ``status``); [] for junk."""
    return conditions_of(job.get("status") if isinstance(job, Mapping) else None)


def find(conditions: list[Condition], ctype: str) -> Condition | None:
    """The first entry of ``ctype`` (upstream's lookup; the one a controller's bookkeeping reads)."""
    for c in conditions:
        if c.get("type") == ctype:
            return c
    return None


def found_true(conditions: list[Condition], ctype: str) -> bool:
    """Whether the *first* entry of ``ctype`` is True (see :func:`is_true` for *any* entry)."""
    c = find(conditions, ctype)
    return c is not None and c.get("status") == "True"


def is_true(conditions: list[Condition], ctype: str) -> bool:
    """Whether *any* entry of ``ctype`` is True, exactly as the validation's IsConditionTrue."""
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conditions)


def holds(cond: Condition | None, ctype: str) -> bool:
    """Whether ``cond`` is a True condition of ``ctype``."""
    return cond is not None and cond.get("type") == ctype and cond.get("status") == "True"


def first_true(conditions: list[Condition], ctype: str) -> Condition | None:
    """The first entry of ``ctype`` that is True."""
    for c in conditions:
        if c.get("type") == ctype and c.get("status") == "True":
            return c
    return None


def condition(job: object, ctype: str) -> Condition | None:
    """The Job's first condition of ``ctype``, or None."""
    return find(job_conditions(job), ctype)


def is_finished(job: object) -> bool:
    """Terminal by the API server's definition: any ``Complete`` or ``Failed`` entry is True.

    The one definition both controllers, the status validation, CronJob and upstream's
    ``IsJobFinished`` use; interim conditions do not count.
    """
    return finished_in(job_conditions(job))


def finished_in(conditions: list[Condition]) -> bool:
    """:func:`is_finished` over a condition list."""
    return any(is_true(conditions, t) for t in TERMINAL_TYPES)


# -- writing -----------------------------------------------------------------------------------

def new_condition(ctype: str, status: str, reason: str, message: str, now: str) -> Condition:
    """A condition stamped with ``now`` (a formatted time) for both probe and transition times."""
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }


def set_restamping(conditions: list[Condition], ctype: str, status: str, reason: str, message: str,
                   now: str) -> bool:
    """Upstream Job controller rule: replace the condition, times restamped, when anything differs.

    An absent condition is only added when not ``False`` (nothing -> False says nothing).
    Returns whether the list changed.
    """
    for i, c in enumerate(conditions):
        if c.get("type") == ctype:
            if c.get("status") != status or (c.get("reason") or "") != reason or (c.get("message") or "") != message:
                conditions[i] = new_condition(ctype, status, reason, message, now)
                return True
            return False
    if status != "False":
        conditions.append(new_condition(ctype, status, reason, message, now))
        return True
    return False


def set_keeping_transition(conditions: list[Condition], ctype: str, status: str, reason: str, message: str,
                           now: str) -> bool:
    """API-conventions rule: ``lastTransitionTime`` moves only when the status does.

    A reason/message change on the same status updates them and ``lastProbeTime`` in place.
    An absent condition is only added when not ``False``. Returns whether anything changed.
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
