"""Exponential delay before re-creating pods after failures.

A Job whose pods keep failing must not hammer the cluster: the n-th consecutive failure
(counted since the last success) delays the next pod creation by ``10 s * 2^(n-1)``, capped
at 10 minutes, measured from the moment the last failure happened. With
``backoffLimitPerIndex`` each index keeps its own count in the replacement pod's
``job-index-failure-count`` annotation, so the delay survives a controller restart; the
global count lives in memory only, as upstream's does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from builtin_controller import fields
from kruntime.resources import Obj

DEFAULT_BACKOFF = 10.0
MAX_BACKOFF = 600.0


@dataclass(frozen=True)
class BackoffRecord:
    key: str
    failures_after_last_success: int = 0
    last_failure_time: datetime | None = None

    def remaining(self, now: datetime, base: float = DEFAULT_BACKOFF, cap: float = MAX_BACKOFF) -> float:
        return remaining_for_failures(self.failures_after_last_success, self.last_failure_time, now, base, cap)


class BackoffStore:
    """Per-Job failure history, keyed by ``namespace/name``."""

    def __init__(self) -> None:
        self._records: dict[str, BackoffRecord] = {}

    def get(self, key: str) -> BackoffRecord:
        return self._records.get(key) or BackoffRecord(key)

    def update(self, record: BackoffRecord) -> None:
        self._records[record.key] = record

    def remove(self, key: str) -> None:
        self._records.pop(key, None)

    def __len__(self) -> int:
        return len(self._records)


def delay_for_failures(failures: int, base: float = DEFAULT_BACKOFF, cap: float = MAX_BACKOFF) -> float:
    """The full delay owed after ``failures`` consecutive failures (0 for none)."""
    if failures <= 0:
        return 0.0
    delay = base
    for _ in range(1, failures):
        delay *= 2
        if delay >= cap:
            return cap
    return delay


def remaining_for_failures(
    failures: int, last_failure: datetime | None, now: datetime, base: float = DEFAULT_BACKOFF,
    cap: float = MAX_BACKOFF,
) -> float:
    """Seconds still to wait before the next pod may be created (0 when the wait is over)."""
    if failures <= 0 or last_failure is None:
        return 0.0
    delay = delay_for_failures(failures, base, cap)
    elapsed = (now - last_failure).total_seconds()
    if delay < elapsed:
        return 0.0
    return delay - elapsed


def finished_time(pod: Obj) -> datetime:
    """When the pod finished, by the best evidence available.

    In order: the latest container ``finishedAt`` (only when every regular container —
    and every restartable init container, i.e. sidecar — has terminated), the
    ``Ready=False`` transition, the deletion time minus the grace period, and finally
    the creation time.
    """
    t = _finish_from_containers(pod)
    if t is not None:
        return t
    ready = fields.pod_condition(pod, "Ready")
    if ready is not None and ready.get("status") == "False":
        t = fields.parse_time(ready.get("lastTransitionTime"))
        if t is not None:
            return t
    deleted = fields.parse_time(fields.deletion_timestamp(pod))
    if deleted is not None:
        grace = fields.md(pod).get("deletionGracePeriodSeconds") or 0
        return deleted - timedelta(seconds=int(grace))
    created = fields.parse_time(fields.md(pod).get("creationTimestamp"))
    return created if created is not None else datetime.min.replace(tzinfo=fields.utcnow().tzinfo)


def _latest_finish(prev: datetime | None, statuses: Iterable[Obj]) -> tuple[datetime | None, bool]:
    """Fold container statuses into the latest finish; ``False`` when one is still running."""
    latest = prev
    for cs in statuses:
        term = (cs.get("state") or {}).get("terminated")
        t = fields.parse_time((term or {}).get("finishedAt"))
        if term is None or t is None:
            return None, False
        if latest is None or latest < t:
            latest = t
    return latest, True


def _finish_from_containers(pod: Obj) -> datetime | None:
    st = pod.get("status") or {}
    latest, ok = _latest_finish(None, st.get("containerStatuses") or [])
    if not ok:
        return None
    sidecars = {
        c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or [] if c.get("restartPolicy") == "Always"
    }
    init = [s for s in st.get("initContainerStatuses") or [] if s.get("name") in sidecars]
    latest, ok = _latest_finish(latest, init)
    return latest if ok else None


def new_backoff_record(store: BackoffStore, key: str, new_succeeded: list[Obj], new_failed: list[Obj]) -> BackoffRecord:
    """The record after this sync's newly finished pods.

    Any new success resets the count; failures that finished after the latest success
    still count, so a success in the middle of a failure streak is honoured in time order.
    """
    old = store.get(key)
    succ = sorted(finished_time(p) for p in new_succeeded)
    fail = sorted(finished_time(p) for p in new_failed)
    if not succ:
        if not fail:
            return old
        return BackoffRecord(key, old.failures_after_last_success + len(fail), fail[-1])
    last_success = succ[-1]
    after = [t for t in fail if t > last_success]
    if not after:
        return BackoffRecord(key, 0, None)
    return BackoffRecord(key, len(after), after[-1])


def remaining_for_index(last_failed_pod: Obj | None, now: datetime, base: float = DEFAULT_BACKOFF,
                        cap: float = MAX_BACKOFF) -> float:
    """Per-index wait: the failed pod's own failure count (+1 for itself) drives the delay."""
    if last_failed_pod is None:
        return 0.0
    failures = fields.index_absolute_failure_count(last_failed_pod) + 1
    return remaining_for_failures(failures, finished_time(last_failed_pod), now, base, cap)
