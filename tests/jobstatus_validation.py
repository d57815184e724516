"""Test oracle: the manager API server's Job status validation, re-implemented in Python.

Written independently of ``mirror/`` (its own index parser, its own condition lookup) so a bug
in the translator cannot hide behind the same bug here. It models a server with JobManagedBy on
(beta 1.32, GA 1.35): every rule from ``shared/reference/job-status-validation.md`` with its
"checked when" gate, as computed by the status strategy from (old Job, new Job):

* the resume exception (kubernetes#134521): startTime may change in the write that flips
  Suspended True -> False;
* a suspended Job with completions == 0 may finish without startTime;
* SuccessCriteriaMet in the "extended scope" (NonIndexed, no successPolicy) is allowed.

Set ``resume_exception=False`` to model servers from before #134521, which reject any change of
a set startTime while spec.suspend is not true.

Times compare at second precision, as ``metav1.Time`` is stored. Absent vs empty follows Go's
decoding: ``active``/``succeeded``/``failed`` missing == 0, ``completedIndexes`` missing == "",
``ready``/``terminating``/``failedIndexes``/``uncountedTerminatedPods`` are pointers (missing !=
zero), and inside ``uncountedTerminatedPods`` a missing list equals an empty one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def validate_status_update(
    job_spec_and_meta: dict[str, Any],
    old_status: dict[str, Any] | None,
    new_status: dict[str, Any] | None,
    *,
    resume_exception: bool = True,
) -> list[str]:
    """Errors the API server would return for a status update from ``old_status`` to
    ``new_status`` of the Job whose spec is in ``job_spec_and_meta`` (an empty list: accepted)."""
    spec = job_spec_and_meta.get("spec") or {}
    old = old_status or {}
    new = new_status or {}
    errs: list[str] = []

    indexed = spec.get("completionMode") == "Indexed"
    completions = spec.get("completions")
    per_index = spec.get("backoffLimitPerIndex")

    old_c, new_c = _conds(old), _conds(new)
    old_complete, new_complete = _true(old_c, "Complete"), _true(new_c, "Complete")
    old_failed, new_failed = _true(old_c, "Failed"), _true(new_c, "Failed")
    old_ft, new_ft = _true(old_c, "FailureTarget"), _true(new_c, "FailureTarget")
    old_scm, new_scm = _true(old_c, "SuccessCriteriaMet"), _true(new_c, "SuccessCriteriaMet")
    old_finished, new_finished = old_complete or old_failed, new_complete or new_failed

    finished_changed = old_finished != new_finished
    complete_changed = old_complete != new_complete
    failed_changed = old_failed != new_failed
    ft_changed = old_ft != new_ft
    scm_changed = old_scm != new_scm
    completed_changed = (old.get("completedIndexes") or "") != (new.get("completedIndexes") or "")
    failed_idx_changed = old.get("failedIndexes") != new.get("failedIndexes")
    active_changed = _n(old, "active") != _n(new, "active")
    ready_changed = old.get("ready") != new.get("ready")
    terminating_changed = old.get("terminating") != new.get("terminating")
    start_changed = _t(old.get("startTime")) != _t(new.get("startTime"))
    completion_changed = _t(old.get("completionTime")) != _t(new.get("completionTime"))
    uncounted_changed = _uncounted(old) != _uncounted(new)
    resuming = _true(old_c, "Suspended") and _has(new_c, "Suspended", "False")
    suspended = spec.get("suspend") is True
    zero_completions_suspended = suspended and completions == 0

    # Always checked: ValidateJobStatus basics.
    for key in ("active", "succeeded", "failed"):
        if _n(new, key) < 0:
            errs.append(f"status.{key}: must be greater than or equal to 0")
    for key in ("ready", "terminating"):
        if new.get(key) is not None and new[key] < 0:
            errs.append(f"status.{key}: must be greater than or equal to 0")
    uncounted = new.get("uncountedTerminatedPods")
    if isinstance(uncounted, dict):
        seen: set[str] = set()
        for bucket in ("succeeded", "failed"):
            for i, uid in enumerate(uncounted.get(bucket) or []):
                where = f"status.uncountedTerminatedPods.{bucket}[{i}]"
                if uid == "":
                    errs.append(f"{where}: must not be empty")
                elif uid in seen:
                    errs.append(f"{where}: duplicate value")
                else:
                    seen.add(uid)

    if (complete_changed or failed_changed) and new_complete and new_failed:
        errs.append("status.conditions: cannot set Complete=True and Failed=true conditions")
    if (complete_changed or ft_changed) and new_complete and new_ft:
        errs.append("status.conditions: cannot set Complete=True and FailureTarget=true conditions")
    if (complete_changed or completion_changed) and new.get("completionTime") is not None and not new_complete:
        errs.append("status.completionTime: cannot set completionTime when there is no Complete=True condition")
    if (complete_changed or completion_changed) and new.get("completionTime") is None and new_complete:
        errs.append("status.completionTime: completionTime is required for Complete jobs")
    if start_changed or completion_changed:
        start, done = _t(new.get("startTime")), _t(new.get("completionTime"))
        if start is not None and done is not None and done < start:
            errs.append("status.completionTime: completionTime cannot be set before startTime")
    if (failed_changed or failed_idx_changed) and new_failed and not new_ft:
        errs.append("status.conditions: cannot set Failed=True condition without the FailureTarget=true condition")
    if (complete_changed or scm_changed) and new_complete and not new_scm:
        errs.append(
            "status.conditions: cannot set Complete=True condition without the SuccessCriteriaMet=true condition"
        )
    if (finished_changed or active_changed) and new_finished and _n(new, "active") > 0:
        errs.append("status.active: active>0 is invalid for finished job")
    if (
        (finished_changed or start_changed)
        and not zero_completions_suspended
        and new_finished
        and new.get("startTime") is None
    ):
        errs.append("status.startTime: startTime is required for finished job")
    if (finished_changed or uncounted_changed) and new_finished and any(_uncounted(new) or ()):
        errs.append("status.uncountedTerminatedPods: uncountedTerminatedPods needs to be empty for finished job")
    if completed_changed and completions is not None:
        problem = _index_format_error(new.get("completedIndexes") or "", completions)
        if problem:
            errs.append(f"status.completedIndexes: error parsing completedIndexes: {problem}")
    if (
        failed_idx_changed
        and completions is not None
        and per_index is not None
        and new.get("failedIndexes") is not None
    ):
        problem = _index_format_error(new["failedIndexes"], completions)
        if problem:
            errs.append(f"status.failedIndexes: error parsing failedIndexes: {problem}")
    if completed_changed and (new.get("completedIndexes") or "") and not indexed:
        errs.append("status.completedIndexes: cannot set non-empty completedIndexes when non-indexed completion mode")
    if failed_idx_changed and per_index is None and new.get("failedIndexes") is not None:
        errs.append("status.failedIndexes: cannot set non-null failedIndexes when backoffLimitPerIndex is null")
    if (failed_idx_changed or completed_changed) and completions is not None and new.get("failedIndexes") is not None:
        overlap = _overlap(new.get("completedIndexes") or "", new["failedIndexes"], completions)
        if overlap is not None:
            errs.append(f"status.failedIndexes: failedIndexes and completedIndexes overlap at index: {overlap}")
    if (finished_changed or terminating_changed) and new_finished and (new.get("terminating") or 0) > 0:
        errs.append("status.terminating: terminating>0 is invalid for finished job")
    if (ready_changed or active_changed) and new.get("ready") is not None and new["ready"] > _n(new, "active"):
        errs.append("status.ready: cannot set more ready pods than active")
    if new_scm and new_failed:
        errs.append("status.conditions: cannot set SuccessCriteriaMet=True and Failed=true conditions")
    if new_scm and new_ft:
        errs.append("status.conditions: cannot set SuccessCriteriaMet=True and FailureTarget=true conditions")
    if spec.get("successPolicy") is not None and not new_scm and new_complete:
        errs.append(
            "status.conditions: cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True"
        )

    # ValidateJobStatusUpdate: transitions.
    for ctype, was, now in (
        ("Failed", old_failed, new_failed),
        ("Complete", old_complete, new_complete),
        ("FailureTarget", old_ft, new_ft),
    ):
        if was and not now:
            errs.append(f"status.conditions: cannot disable the terminal {ctype}=True condition")
    if _n(new, "failed") < _n(old, "failed"):
        errs.append("status.failed: cannot decrease the failed counter")
    may_scale_down = indexed and completions == spec.get("parallelism")
    if not may_scale_down and _n(new, "succeeded") < _n(old, "succeeded"):
        errs.append("status.succeeded: cannot decrease the succeeded counter")
    old_done, new_done = _t(old.get("completionTime")), _t(new.get("completionTime"))
    if old_done is not None and new_done is not None and old_done != new_done:
        errs.append("status.completionTime: completionTime cannot be mutated")
    start_rule_on = start_changed and not (resume_exception and resuming)
    if start_rule_on and old.get("startTime") is not None and not suspended:
        errs.append("status.startTime: field is immutable for unsuspended job once set")
    if old_scm and not new_scm:
        errs.append("status.conditions: cannot disable the SuccessCriteriaMet=True condition")
    if old_complete and not old_scm and new_scm:
        errs.append(
            "status.conditions: cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions"
        )
    return errs


# --------------------------------------------------------------------------- helpers


def _conds(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in status.get("conditions") or [] if isinstance(c, dict)]


def _true(conds: list[dict[str, Any]], ctype: str) -> bool:
    return _has(conds, ctype, "True")


def _has(conds: list[dict[str, Any]], ctype: str, status: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == status for c in conds)


def _n(status: dict[str, Any], key: str) -> int:
    value = status.get(key)
    return int(value) if value is not None else 0


def _t(value: Any) -> datetime | None:
    if value is None:
        return None
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(microsecond=0)


def _uncounted(status: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    raw = status.get("uncountedTerminatedPods")
    if raw is None:
        return None
    return tuple(raw.get("succeeded") or ()), tuple(raw.get("failed") or ())


def _atoi(text: str) -> int | None:
    body = text[1:] if text[:1] in "+-" and len(text) > 1 else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    return int(text)


def _interval(text: str, completions: int) -> tuple[int, int] | str:
    parts = text.split("-")
    if len(parts) > 2:
        return f"the fragment {text!r} has more than two parts"
    first = _atoi(parts[0])
    if first is None:
        return f"cannot convert string to integer for index: {parts[0]!r}"
    if first >= completions:
        return f"too large index: {parts[0]!r}"
    if len(parts) == 1:
        return first, first
    last = _atoi(parts[1])
    if last is None:
        return f"cannot convert string to integer for index: {parts[1]!r}"
    if last >= completions:
        return f"too large index: {parts[1]!r}"
    if first >= last:
        return f"non-increasing order, previous: {first}, current: {last}"
    return first, last


def _index_format_error(text: str, completions: int) -> str | None:
    if not text:
        return None
    previous: int | None = None
    for fragment in text.split(","):
        parsed = _interval(fragment, completions)
        if isinstance(parsed, str):
            return parsed
        if previous is not None and previous >= parsed[0]:
            return f"non-increasing order, previous: {previous}, current: {parsed[0]}"
        previous = parsed[1]
    return None


def _overlap(completed: str, failed: str, completions: int) -> int | None:
    """First overlapping index, walking both interval lists like upstream (bad fragments are
    skipped here; the format check reports them)."""
    if not completed or not failed:
        return None
    good_c = [p for p in (_interval(f, completions) for f in completed.split(",")) if not isinstance(p, str)]
    good_f = [p for p in (_interval(f, completions) for f in failed.split(",")) if not isinstance(p, str)]
    i = j = 0
    while i < len(good_c) and j < len(good_f):
        (cx, cy), (fx, fy) = good_c[i], good_f[j]
        if cx <= fy and fx <= cy:
            return max(cx, fx)
        if cx <= fx:
            i += 1
        else:
            j += 1
    return None
