"""Translate a worker Job's status into the status of its manager Job.

The manager's API server validates every status write against the OLD manager status (the
JobManagedBy rules, see ``shared/reference/job-status-validation.md``). The worker, though, may
run any Kubernetes version: older Job controllers write ``Complete`` without
``SuccessCriteriaMet``, ``Failed`` without ``FailureTarget``, terminal conditions while pods are
still active or terminating, no ``completionTime``, and so on. Copying such a status verbatim
would be rejected forever and the manager Job would never finish. This module is the single
place that turns "what the worker says" into "a status the manager accepts", as a pure function
so that it can be property-tested against a re-implementation of the server's rules.

Decisions (each write must be valid on its own against the old manager status; the test oracle
``tests/jobstatus_validation.py`` re-implements the server's rules):

* A finished manager Job (Complete=True or Failed=True) is frozen: its status is returned
  unchanged, because every rule that could bite fires only on change.
* The first interim condition on the manager decides the outcome. Once it carries
  ``SuccessCriteriaMet`` the Job can only complete; once it carries ``FailureTarget`` it can only
  fail. A worker reporting the opposite (possible after a re-dispatch) does not flip it.
* Interim conditions are mirrored as soon as the worker reports them; if the worker skipped
  them (old controller) they are synthesised from the worker's terminal condition.
* The terminal condition is written as soon as the worker is terminal, together with
  ``active=0``, ``ready=0``, ``terminating=0`` and an empty ``uncountedTerminatedPods``: the
  worker Job is done, its pods no longer count, and an old worker may never report zero.
* ``succeeded``/``failed`` only grow (max; the API server rejects a decrease). The index sets
  follow the visible copy's run (within one run they only grow), so after a re-dispatch they
  reflect the run that decides the outcome, never the union of two runs (which could report
  an index as completed that the deciding run failed); with no copy visible they stay as last
  mirrored. ``active``/``ready``/``terminating`` follow the worker.
* A decided outcome is final (:func:`decided_final_status`): when the copy of a Job that
  carries ``SuccessCriteriaMet``/``FailureTarget`` vanishes, the Job is finished from its last
  mirrored status rather than run again.
* ``startTime`` is dropped while the manager is suspended and taken from the worker's current
  run once resumed. Changing a set ``startTime`` of an unsuspended Job is rejected (on servers
  before kubernetes#134521 even while resuming), whereas clearing it while ``spec.suspend`` is
  true and then going nil -> set is accepted by every server; it is also what upstream does
  with MutableSchedulingDirectivesForSuspendedJobs, and keeps the pod template's scheduling
  directives mutable for a queueing layer on top (see Kueue #3685).
* ``completionTime`` exists only with ``Complete``, is never moved once on the manager and is
  never before ``startTime``.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobapi import conditions as jc
from jobapi.intervals import Intervals
from jobapi.times import format_time
from jobapi.times import parse_time_seconds as parse_time

Status = dict[str, Any]

# Every batch/v1 JobStatus field this translator understands. Other keys on the manager are kept
# as they are; other keys from the worker are NOT copied: a field newer than this code may carry
# validation rules we cannot honour, and the manager API server may be too old to know it.
STATUS_FIELDS = frozenset(
    {
        "conditions",
        "startTime",
        "completionTime",
        "active",
        "succeeded",
        "failed",
        "terminating",
        "ready",
        "completedIndexes",
        "failedIndexes",
        "uncountedTerminatedPods",
    }
)

_SUCCESS = "success"
_FAILURE = "failure"

#: At most this many condition types we do not know are kept on a manager Job (the first ones):
#: whoever writes the copy's status on a worker (a worker-side tool, a user with ``jobs/status``)
#: could otherwise grow the manager Job without bound (6,000 types made it ~1.3 MB) and every
#: status pass with it (~0.95 s). Those on the manager come first; the worker's fill the rest.
MAX_FOREIGN_CONDITIONS = 16
#: Longest condition message (and reason) mirrored, in characters; longer ones are cut and end
#: with TRUNCATED. Upstream's own messages are a sentence; a user reads this in ``kubectl describe``.
MAX_CONDITION_MESSAGE = 1024
MAX_CONDITION_REASON = 256
TRUNCATED = "... [truncated]"


# --------------------------------------------------------------------------- translation


def desired_manager_status(manager: dict[str, Any], remote: dict[str, Any] | None, now: datetime) -> Status:
    """Return the full ``status`` object the manager Job should have.

    ``remote`` is the worker copy, or None when there is none yet or its cluster is
    unreachable; then the manager keeps what it has, apart from the suspend bookkeeping that is
    ours alone. ``now`` stamps the conditions this function adds itself.
    """
    current = _status(manager)
    if jc.finished_in(jc.conditions_of(current)):
        return copy.deepcopy(current)

    spec = _dict(manager.get("spec"))
    suspended = spec.get("suspend") is True
    now_s = format_time(now)
    rstatus = _status(remote) if remote is not None else None
    # Pod-level facts (active, uncounted pods, indexes) come from the worker when we can see it,
    # otherwise from what the manager last mirrored.
    source = rstatus if rstatus is not None else current

    out: Status = {k: copy.deepcopy(v) for k, v in current.items() if k not in STATUS_FIELDS}

    conds = [_copy_condition(c) for c in _capped(jc.conditions_of(current))]
    remote_conds = jc.conditions_of(rstatus)
    _mirror_foreign_conditions(conds, remote_conds)

    outcome = worker_outcome(remote_conds)
    if jc.is_true(conds, jc.FAILURE_TARGET):
        path: str | None = _FAILURE
    elif jc.is_true(conds, jc.SUCCESS_CRITERIA_MET):
        path = _SUCCESS
    else:
        path = outcome.path
    finishing = rstatus is not None and outcome.terminal and path is not None

    if path is not None:
        _path_conditions(conds, remote_conds, finishing, now_s, _PATHS[path])

    if not finishing:
        if suspended:
            jc.set_keeping_transition(conds, jc.SUSPENDED, "True", jc.REASON_JOB_SUSPENDED, jc.MSG_JOB_SUSPENDED,
                                      now_s)
        elif jc.is_true(conds, jc.SUSPENDED):
            jc.set_keeping_transition(conds, jc.SUSPENDED, "False", jc.REASON_JOB_RESUMED, jc.MSG_JOB_RESUMED, now_s)
    if conds:
        out["conditions"] = conds

    start = _start_time(current, remote, rstatus, suspended, finishing, now_s)
    if finishing and path == _SUCCESS:
        start, completion = _completion_time(current, rstatus, remote_conds, start, now_s)
        out["completionTime"] = completion
    if start is not None:
        out["startTime"] = start

    _counters(out, current, rstatus, suspended, finishing)
    _indexes(out, spec, current, rstatus)
    _uncounted(out, current, source, finishing)
    return out


def decided_final_status(manager: dict[str, Any], now: datetime) -> Status | None:
    """The terminal status for a Job whose outcome is decided but whose copy is gone, else None.

    None unless the manager carries ``SuccessCriteriaMet`` or ``FailureTarget`` and is not yet
    finished. Counters and indexes stay as last mirrored; pods no longer count (active, ready,
    terminating 0, no uncounted pods); the terminal condition copies the interim one's reason
    and message, as upstream does; a success gets a ``completionTime`` not before ``startTime``.
    """
    current = _status(manager)
    conds = [copy.deepcopy(c) for c in jc.conditions_of(current)]
    if jc.finished_in(conds):
        return None
    if jc.is_true(conds, jc.FAILURE_TARGET):
        path = _PATHS[_FAILURE]
    elif jc.is_true(conds, jc.SUCCESS_CRITERIA_MET):
        path = _PATHS[_SUCCESS]
    else:
        return None
    now_s = format_time(now)
    out: Status = copy.deepcopy(current)
    interim = jc.first_true(conds, path.interim)
    assert interim is not None
    _put(conds, _terminal(path.terminal, interim, None, now_s))
    out["conditions"] = conds
    start = _norm_time(current.get("startTime")) or now_s
    out["startTime"] = start
    if path is _PATHS[_SUCCESS]:
        out["startTime"], out["completionTime"] = _completion_time(current, None, [], start, now_s)
    out.pop("active", None)
    for key in ("ready", "terminating"):
        if key in out:
            out[key] = 0
    uncounted = out.get("uncountedTerminatedPods")
    if isinstance(uncounted, dict):
        if (manager.get("spec") or {}).get("completionMode") != "Indexed":
            # Terminated pods the worker had not counted yet still ran: a Job controller counts
            # them before its terminal condition, so do we (found by the hand-edits chaos
            # scenario: a copy deleted right after SuccessCriteriaMet left succeeded=0). An
            # Indexed Job's are left out: their indexes are unknown here, and succeeded must
            # match completedIndexes.
            for bucket in ("succeeded", "failed"):
                uids = uncounted.get(bucket)
                if isinstance(uids, list) and uids:
                    out[bucket] = _count(current, bucket) + len({u for u in uids if isinstance(u, str) and u})
        out["uncountedTerminatedPods"] = {}
    return out


def status_differs(current: Status | None, desired: Status | None) -> bool:
    """Whether writing ``desired`` would change the stored ``current`` status.

    Compares the way the API server serialises a JobStatus: zero ``active``/``succeeded``/
    ``failed`` and an empty ``completedIndexes`` are omitted, so missing equals zero/empty;
    ``ready``, ``terminating``, ``failedIndexes`` and ``uncountedTerminatedPods`` are pointers,
    so missing differs from zero/empty; times compare by instant at second precision; condition
    order and dict key order do not matter.
    """
    if len(jc.conditions_of(current)) != len(jc.conditions_of(desired)):
        return True  # as the sorted lists below would differ: without their cost (thousands of conditions)
    return _normalize(current or {}) != _normalize(desired or {})


# --------------------------------------------------------------------------- conditions


@dataclass(frozen=True)
class Outcome:
    path: str | None
    terminal: bool


def worker_outcome(remote_conds: list[jc.Condition]) -> Outcome:
    """What the worker has decided. A terminal condition beats an interim one; Failed beats
    Complete only in the impossible case of both, where failing is the conservative reading."""
    complete = jc.is_true(remote_conds, jc.COMPLETE)
    failed = jc.is_true(remote_conds, jc.FAILED)
    if failed:
        return Outcome(_FAILURE, True)
    if complete:
        return Outcome(_SUCCESS, True)
    if jc.is_true(remote_conds, jc.FAILURE_TARGET):
        return Outcome(_FAILURE, False)
    if jc.is_true(remote_conds, jc.SUCCESS_CRITERIA_MET):
        return Outcome(_SUCCESS, False)
    return Outcome(None, False)


@dataclass(frozen=True)
class _Path:
    """The interim condition a terminal one must follow, and what to say when a worker skipped it."""

    interim: str
    terminal: str
    default_reason: str = ""
    default_message: str = ""


_PATHS = {
    _SUCCESS: _Path(jc.SUCCESS_CRITERIA_MET, jc.COMPLETE, jc.REASON_COMPLETIONS_REACHED, jc.MSG_COMPLETIONS_REACHED),
    _FAILURE: _Path(jc.FAILURE_TARGET, jc.FAILED),
}


def _path_conditions(conds: list[jc.Condition], remote_conds: list[jc.Condition], finishing: bool, now: str,
                     path: _Path) -> None:
    interim = jc.first_true(conds, path.interim)
    if interim is None:
        mirrored = jc.first_true(remote_conds, path.interim)
        if mirrored is not None:
            interim = _copied(mirrored, now)
        else:
            # Old worker: Complete/Failed directly (reason "" or its own), without the interim condition.
            terminal = jc.first_true(remote_conds, path.terminal) or {}
            interim = jc.new_condition(
                path.interim,
                "True",
                _cut(_text(terminal.get("reason")), MAX_CONDITION_REASON) or path.default_reason,
                _cut(_text(terminal.get("message")), MAX_CONDITION_MESSAGE) or path.default_message,
                now,
            )
        _put(conds, interim)
    if finishing and not jc.is_true(conds, path.terminal):
        _put(conds, _terminal(path.terminal, interim, jc.first_true(remote_conds, path.terminal), now))


def _terminal(ctype: str, interim: jc.Condition, mirrored: jc.Condition | None, now: str) -> jc.Condition:
    """The terminal condition: the worker's own when it has the same one (keeping its times),
    else derived from the manager's interim condition, as upstream copies reason and message."""
    if mirrored is None:
        return jc.new_condition(ctype, "True", _text(interim.get("reason")), _text(interim.get("message")), now)
    cond = _copied(mirrored, now)
    if not cond["reason"]:
        cond["reason"] = _text(interim.get("reason"))
    if not cond["message"]:
        cond["message"] = _text(interim.get("message"))
    return cond


def _mirror_foreign_conditions(conds: list[jc.Condition], remote_conds: list[jc.Condition]) -> None:
    """Copy condition types no validation rule knows about (e.g. written by a worker-side tool).

    They cannot make a write invalid, and dropping them would hide information from users. The
    known types are never copied blindly: their meaning on the manager is derived above. A type
    new to the manager is added only while fewer than MAX_FOREIGN_CONDITIONS foreign types are
    there; entries are found by type in a dict (linear in the conditions, not their square).
    """
    by_type: dict[str, jc.Condition] = {}
    for c in conds:
        ctype = c.get("type")
        if isinstance(ctype, str):
            by_type.setdefault(ctype, c)  # the first entry of a type, as jc.find
    foreign = sum(1 for t in by_type if t not in jc.KNOWN_TYPES)
    for rc in remote_conds:
        ctype = rc.get("type")
        status = rc.get("status")
        if not isinstance(ctype, str) or not ctype or ctype in jc.KNOWN_TYPES:
            continue
        if status not in ("True", "False", "Unknown"):
            continue
        existing = by_type.get(ctype)
        if existing is None and foreign >= MAX_FOREIGN_CONDITIONS:
            continue
        mirrored = _copied(rc, None)
        mirrored["status"] = status
        if existing is None:
            conds.append(mirrored)
            by_type[ctype] = mirrored
            foreign += 1
        elif existing.get("status") == status:
            for key in ("reason", "message"):
                if existing.get(key, "") != mirrored[key]:
                    existing[key] = mirrored[key]
        else:
            existing.clear()
            existing.update(mirrored)


def _copied(src: jc.Condition, now: str | None) -> jc.Condition:
    """A known-shape copy of a worker condition, keeping its times where it has them."""
    cond: jc.Condition = {
        "type": src.get("type"),
        "status": "True",
        "reason": _cut(_text(src.get("reason")), MAX_CONDITION_REASON),
        "message": _cut(_text(src.get("message")), MAX_CONDITION_MESSAGE),
    }
    probe = _norm_time(src.get("lastProbeTime"))
    if probe is not None:
        cond["lastProbeTime"] = probe
    transition = _norm_time(src.get("lastTransitionTime")) or now
    if transition is not None:
        cond["lastTransitionTime"] = transition
    return cond


def _capped(conds: list[jc.Condition]) -> list[jc.Condition]:
    """``conds`` with the entries of foreign types after the first MAX_FOREIGN_CONDITIONS left out
    (the known types all kept): a manager Job that holds more (grown before this cap, or written
    directly) costs one linear pass to trim, then stays small."""
    kept: list[jc.Condition] = []
    foreign: set[str] = set()
    for c in conds:
        ctype = c.get("type")
        key = ctype if isinstance(ctype, str) else repr(ctype)
        if key in jc.KNOWN_TYPES or key in foreign:
            kept.append(c)
        elif len(foreign) < MAX_FOREIGN_CONDITIONS:
            foreign.add(key)
            kept.append(c)
    return kept


def _copy_condition(cond: jc.Condition) -> jc.Condition:
    """A copy of a condition to change, deep only where a value is not a scalar (a condition is
    flat; a deep copy of each of thousands cost more than the rest of the pass)."""
    return {k: copy.deepcopy(v) if isinstance(v, dict | list) else v for k, v in cond.items()}


def _cut(text: str, limit: int) -> str:
    """``text``, or its start ending with TRUNCATED when longer than ``limit`` characters."""
    return text if len(text) <= limit else text[:limit - len(TRUNCATED)] + TRUNCATED


def _put(conds: list[jc.Condition], cond: jc.Condition) -> None:
    """Set a condition to True: replace a non-True entry of the same type in place (so the list
    keeps one entry per type), or append."""
    for i, existing in enumerate(conds):
        if existing.get("type") == cond["type"]:
            conds[i] = cond
            return
    conds.append(cond)


# --------------------------------------------------------------------------- times


def _start_time(
    current: Status,
    remote: dict[str, Any] | None,
    rstatus: Status | None,
    suspended: bool,
    finishing: bool,
    now: str,
) -> str | None:
    mine = current.get("startTime") if parse_time(current.get("startTime")) is not None else None
    if finishing:
        # A finished Job needs a startTime; any value is accepted when the manager has none.
        if mine is not None:
            return str(mine)
        return (
            _norm_time((rstatus or {}).get("startTime"))
            or _norm_time(_dict(_dict(remote).get("metadata")).get("creationTimestamp"))
            or now
        )
    if suspended:
        return None
    if mine is not None:
        return str(mine)
    if remote is not None and rstatus is not None and _remote_running(remote, rstatus):
        return _norm_time(rstatus.get("startTime"))
    return None


def _remote_running(remote: dict[str, Any], rstatus: Status) -> bool:
    """Whether the worker's startTime belongs to the run the manager now wants.

    A worker that has not yet seen a resume still shows the previous run's startTime (or none);
    the manager would be stuck with that value, since a set startTime is immutable once resumed.
    """
    if _dict(remote.get("spec")).get("suspend") is True:
        return False
    return not jc.is_true(jc.conditions_of(rstatus), jc.SUSPENDED)


def _completion_time(
    current: Status, rstatus: Status | None, remote_conds: list[jc.Condition], start: str | None, now: str
) -> tuple[str | None, str]:
    """(startTime, completionTime) for the write that adds Complete."""
    start_at = parse_time(start)
    stray = current.get("completionTime")
    stray_at = parse_time(stray)
    if stray_at is not None:
        # Left over from another writer: it cannot be replaced in the same write that adds
        # Complete (completionTime is immutable once set), so keep it and make startTime fit.
        if current.get("startTime") is None and start_at is not None and start_at > stray_at:
            start = str(stray)
        return start, str(stray)
    remote_complete = jc.first_true(remote_conds, jc.COMPLETE) or {}
    completion = (
        _norm_time((rstatus or {}).get("completionTime"))
        or _norm_time(remote_complete.get("lastTransitionTime"))
        or now
    )
    completion_at = parse_time(completion)
    if start_at is not None and completion_at is not None and completion_at < start_at:
        completion = format_time(start_at)
    return start, completion


def _norm_time(value: object) -> str | None:
    return _norm_time_text(value) if isinstance(value, str) else _norm_time_of(value)


@functools.lru_cache(maxsize=4096)
def _norm_time_text(value: str) -> str | None:
    """A time string's canonical form, kept: a Job's many conditions mostly share a few times,
    and parsing each again made up most of a pass over thousands of them."""
    return _norm_time_of(value)


def _norm_time_of(value: object) -> str | None:
    moment = parse_time(value)
    return format_time(moment) if moment is not None else None


# --------------------------------------------------------------------------- counters & pods


def _counters(out: Status, current: Status, rstatus: Status | None, suspended: bool, finishing: bool) -> None:
    for key in ("succeeded", "failed"):
        value = max(_count(current, key), _count(rstatus, key))
        if value:
            out[key] = value

    if finishing:
        active = 0
    elif rstatus is None:
        active = 0 if suspended else _count(current, "active")
    else:
        active = _count(rstatus, "active")
    if active:
        out["active"] = active

    source = rstatus if rstatus is not None else current
    if _present_int(source, "ready"):
        out["ready"] = 0 if finishing else min(_count(source, "ready"), active)
    if _present_int(source, "terminating"):
        out["terminating"] = 0 if finishing else _count(source, "terminating")


def _indexes(out: Status, spec: dict[str, Any], current: Status, rstatus: Status | None) -> None:
    """completedIndexes / failedIndexes, only where the manager's spec allows them at all."""
    if spec.get("completionMode") != "Indexed":
        return
    completions = spec.get("completions")
    limit = completions if isinstance(completions, int) and not isinstance(completions, bool) else None
    # The visible copy's run decides (its sets only grow); with none visible, the last mirrored.
    run = rstatus if rstatus is not None else current
    done = Intervals.parse_lenient(run.get("completedIndexes"), limit)
    if done:
        out["completedIndexes"] = str(done)
    if spec.get("backoffLimitPerIndex") is None:
        return
    # The API server rejects an index in both sets; a worker never reports that, but be safe.
    failed = Intervals.parse_lenient(run.get("failedIndexes"), limit) - done
    if failed:
        out["failedIndexes"] = str(failed)
    elif isinstance(current.get("failedIndexes"), str) or isinstance(run.get("failedIndexes"), str):
        out["failedIndexes"] = ""


def _uncounted(out: Status, current: Status, source: Status, finishing: bool) -> None:
    key = "uncountedTerminatedPods"
    if finishing:
        if isinstance(current.get(key), dict) or isinstance(source.get(key), dict):
            out[key] = {}
        return
    raw = source.get(key)
    if not isinstance(raw, dict):
        return
    seen: set[str] = set()
    clean: dict[str, list[str]] = {}
    for bucket in ("succeeded", "failed"):
        uids = raw.get(bucket)
        kept: list[str] = []
        for uid in uids if isinstance(uids, list) else []:
            if isinstance(uid, str) and uid and uid not in seen:
                seen.add(uid)
                kept.append(uid)
        if kept:
            clean[bucket] = kept
    out[key] = clean


# --------------------------------------------------------------------------- comparison


def _normalize(status: Status) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in status.items():
        if value is None:
            continue
        if key in ("active", "succeeded", "failed"):
            if _int(value):
                out[key] = _int(value)
        elif key in ("ready", "terminating"):
            out[key] = _int(value)
        elif key == "completedIndexes":
            if value:
                out[key] = value
        elif key in ("startTime", "completionTime"):
            out[key] = _time_key(value)
        elif key == "uncountedTerminatedPods" and isinstance(value, dict):
            out[key] = {k: v for k, v in value.items() if v}
        elif key == "conditions" and isinstance(value, list):
            normalized = sorted(_condition_key(c) for c in value if isinstance(c, dict))
            if normalized:
                out[key] = normalized
        else:
            out[key] = value
    return out


_CONDITION_FIELDS = frozenset({"type", "status", "reason", "message", "lastProbeTime", "lastTransitionTime"})


def _condition_key(cond: jc.Condition) -> tuple[str, ...]:
    extra = [f"{k}={v!r}" for k, v in cond.items() if v is not None and k not in _CONDITION_FIELDS]
    probe, transition = cond.get("lastProbeTime"), cond.get("lastTransitionTime")
    return (
        _text(cond.get("type")),
        _text(cond.get("status")),
        _text(cond.get("reason")),
        _text(cond.get("message")),
        _time_key(probe) if probe is not None else "",
        _time_key(transition) if transition is not None else "",
        *sorted(extra),
    )


def _time_key(value: object) -> str:
    normal = _norm_time(value)
    return normal if normal is not None else repr(value)


# --------------------------------------------------------------------------- raw-dict access


def _status(job: dict[str, Any] | None) -> Status:
    if not isinstance(job, dict):
        return {}
    return _dict(job.get("status"))


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int:
    """A non-negative count; anything else counts as zero so junk cannot reach the server."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return max(value, 0)


def _count(status: Status | None, key: str) -> int:
    return _int((status or {}).get(key))


def _present_int(status: Status | None, key: str) -> bool:
    value = (status or {}).get(key)
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
