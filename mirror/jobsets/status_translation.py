"""Translate a worker JobSet's status into the status of its manager JobSet.

The JobSet controller's webhook does not cover the status subresource: the manager's API server
checks a status only against the CRD's schema, so it would accept a status JobSet itself never
writes. This module keeps JobSet's own invariants on every write, as a pure function so a
property test (``tests/unit/test_jobset_kind.py``) can say so:

* ``terminalState`` is set exactly when its terminal condition (``Completed`` or ``Failed``) is
  True, and both are written in one go; a finished manager JobSet is frozen. A worker saying
  both is read as failed (the conservative reading); one saying ``terminalState`` without the
  condition, or the reverse, is still finished by what it says.
* ``restarts`` and ``restartsCountTowardsMax`` never go backwards (max of manager and worker);
  while the manager's ``restarts`` stays, a replicatedJob's ``succeeded``/``failed`` never go
  backwards either (a stale worker view, or a re-dispatched copy counting anew, cannot undo
  them), whereas ``active``/``ready``/``suspended`` follow the worker. A worker's new attempt
  (``restarts`` past the manager's) starts the counters afresh, as JobSet's does: none of the
  previous attempt's is kept (Kueue #8162 showed stale counters).
* Every condition fits the CRD schema (a type it accepts, a reason matching its pattern, a
  message, a transition time), and ``replicatedJobsStatus`` names only the manager's replicatedJobs.
* The status is mirrored whatever the suspension (Kueue #8308 missed updates while suspended);
  with no copy visible the manager keeps what it has.

JobSet has no interim condition (a Job's ``SuccessCriteriaMet``/``FailureTarget``): its outcome
is decided when its terminal condition is written, which this translation does in the same write
as ``terminalState``, so an outcome is never decided without being finished.
"""

from __future__ import annotations

import copy
import re
from datetime import datetime
from typing import Any

from jobapi.times import format_time
from jobapi.times import parse_time_seconds as parse_time
from kruntime.resources import Obj

Status = dict[str, Any]

COMPLETED = "Completed"
FAILED = "Failed"
SUSPENDED = "Suspended"
TERMINAL = (FAILED, COMPLETED)  # Failed first: the conservative reading of a worker saying both
#: the status fields this translation writes; other fields on the manager are kept as they are,
#: other fields of the worker (the in-place restart attempts read by a worker's pods) are not copied
STATUS_FIELDS = frozenset({"conditions", "restarts", "restartsCountTowardsMax", "terminalState",
                           "replicatedJobsStatus"})
_RJOB_COUNTERS = ("ready", "succeeded", "failed", "active", "suspended")
#: per attempt, these only grow in JobSet (its finished child Jobs)
_MONOTONIC_RJOB = ("succeeded", "failed")
_RESTART_LISTS = ("jobRestarts", "jobRestartsCountTowardsMax")
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_TYPE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                   r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
_MAX_MESSAGE = 32768
_MAX_REASON = 1024
_MAX_TYPE = 316
_INT32_MAX = 2**31 - 1
#: the reason written when the worker's does not fit the schema
MIRRORED_REASON = "MirroredFromWorker"


# --------------------------------------------------------------------------- outcome


def terminal_state(status: Status | None) -> str | None:
    """What a JobSet status says it ended as (Failed beats Completed), else None."""
    status = status or {}
    said = {status.get("terminalState")} | {t for t in TERMINAL if _is_true(status, t)}
    return next((t for t in TERMINAL if t in said), None)


def is_finished(obj: Obj) -> bool:
    return terminal_state(_status(obj)) is not None


# --------------------------------------------------------------------------- translation


def desired_manager_status(manager: Obj, remote: Obj | None, now: datetime) -> Status:
    """The full ``status`` the manager JobSet should have, given its copy (None: not visible)."""
    current = _status(manager)
    if terminal_state(current) is not None or remote is None:
        return copy.deepcopy(current)
    rstatus = _status(remote)
    now_s = format_time(now)
    out: Status = {k: copy.deepcopy(v) for k, v in current.items() if k not in STATUS_FIELDS}
    ended = terminal_state(rstatus)
    conds = _unique([_valid_condition(c, now_s) for c in _conditions(rstatus)])
    # A terminal type is written True only with terminalState, and then once: the worker's entry goes.
    conds = [c for c in conds if c["type"] != ended and (c["type"] not in TERMINAL or c["status"] != "True")]
    if ended is not None:
        conds.append(_terminal_condition(ended, rstatus, now_s))
        out["terminalState"] = ended
    if conds:
        out["conditions"] = conds
    out["restarts"] = max(_int(current.get("restarts")), _int(rstatus.get("restarts")))
    towards_max = max(_int(current.get("restartsCountTowardsMax")), _int(rstatus.get("restartsCountTowardsMax")))
    if towards_max:
        out["restartsCountTowardsMax"] = towards_max
    # The manager's attempt changes only when the worker's restarts passes it; until then its counters
    # only grow (a worker behind it is a stale view, or a re-dispatched copy counting anew).
    same_attempt = _int(rstatus.get("restarts")) <= _int(current.get("restarts"))
    rjobs = _replicated_jobs_status(_rjob_names(manager), current, rstatus, same_attempt)
    if rjobs:
        out["replicatedJobsStatus"] = rjobs
    return out


def _terminal_condition(ended: str, rstatus: Status, now: str) -> Obj:
    """The worker's own terminal condition when valid, else one saying it ended so."""
    mirrored = next((c for c in _conditions(rstatus) if c.get("type") == ended and c.get("status") == "True"), None)
    cond = _valid_condition(mirrored, now) if mirrored is not None else None
    if cond is None:
        cond = {"type": ended, "status": "True", "reason": MIRRORED_REASON,
                "message": f"the worker's copy is {ended}", "lastTransitionTime": now}
    return cond


def _valid_condition(raw: object, now: str) -> Obj | None:
    """A copy of a worker condition the CRD schema accepts, or None for one it cannot mend."""
    if not isinstance(raw, dict):
        return None
    ctype, status = raw.get("type"), raw.get("status")
    if not isinstance(ctype, str) or len(ctype) > _MAX_TYPE or not _TYPE.match(ctype):
        return None
    if status not in ("True", "False", "Unknown"):
        return None
    reason = raw.get("reason")
    if not isinstance(reason, str) or len(reason) > _MAX_REASON or not _REASON.match(reason):
        reason = MIRRORED_REASON
    message = raw.get("message")
    moment = parse_time(raw.get("lastTransitionTime"))
    return {"type": ctype, "status": status, "reason": reason,
            "message": message[:_MAX_MESSAGE] if isinstance(message, str) else "",
            "lastTransitionTime": format_time(moment) if moment is not None else now}


def _unique(conds: list[Obj | None]) -> list[Obj]:
    """One condition per type, the first (the schema keys the list by type)."""
    seen: set[str] = set()
    out = []
    for c in conds:
        if c is not None and c["type"] not in seen:
            seen.add(c["type"])
            out.append(c)
    return out


def _rjob_names(manager: Obj) -> list[str]:
    rjobs = (manager.get("spec") or {}).get("replicatedJobs") or []
    return [r["name"] for r in rjobs if isinstance(r, dict) and isinstance(r.get("name"), str)]


def _replicated_jobs_status(names: list[str], current: Status, rstatus: Status, same_attempt: bool) -> list[Obj]:
    """The worker's per-replicatedJob counters for the manager's replicatedJobs, in spec order."""
    theirs, mine = _by_name(rstatus), _by_name(current)
    out = []
    for name in names:
        src = theirs.get(name)
        if src is None:
            if same_attempt and name in mine:
                out.append(copy.deepcopy(mine[name]))
            continue
        entry: Obj = {"name": name, **{k: _int(src.get(k)) for k in _RJOB_COUNTERS}}
        if same_attempt and name in mine:
            for k in _MONOTONIC_RJOB:
                entry[k] = max(entry[k], _int(mine[name].get(k)))
        for k in _RESTART_LISTS:
            values = src.get(k)
            if isinstance(values, list):
                entry[k] = [_int(v) for v in values[:1024]]
        out.append(entry)
    return out


def _by_name(status: Status) -> dict[str, Obj]:
    rjobs = status.get("replicatedJobsStatus")
    if not isinstance(rjobs, list):
        return {}
    return {r["name"]: r for r in rjobs if isinstance(r, dict) and isinstance(r.get("name"), str)}


# --------------------------------------------------------------------------- comparison


def status_differs(current: Status | None, desired: Status | None) -> bool:
    """Whether writing ``desired`` changes ``current``: condition order, key order and time
    spelling do not count; an absent ``restarts`` is zero (JobSet always serialises it)."""
    return _normalize(current or {}) != _normalize(desired or {})


def _normalize(status: Status) -> Obj:
    out: Obj = {k: v for k, v in status.items() if v is not None}
    out["restarts"] = _int(status.get("restarts"))
    if not _int(status.get("restartsCountTowardsMax")):
        out.pop("restartsCountTowardsMax", None)
    conds = status.get("conditions")
    if isinstance(conds, list):
        out["conditions"] = sorted(
            tuple(sorted((k, _time_key(v) if k == "lastTransitionTime" else repr(v)) for k, v in c.items()))
             for c in conds if isinstance(c, dict))
        if not out["conditions"]:
            del out["conditions"]
    return out


def _time_key(value: object) -> str:
    moment = parse_time(value)
    return format_time(moment) if moment is not None else repr(value)


# --------------------------------------------------------------------------- raw access


def _status(obj: Obj | None) -> Status:
    status = obj.get("status") if isinstance(obj, dict) else None
    return status if isinstance(status, dict) else {}


def _conditions(status: Status) -> list[Obj]:
    conds = status.get("conditions")
    return [c for c in conds if isinstance(c, dict)] if isinstance(conds, list) else []


def _is_true(status: Status, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in _conditions(status))


def _int(value: object) -> int:
    """A non-negative int32 count; junk counts as zero so it cannot reach the server."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return min(max(value, 0), _INT32_MAX)
