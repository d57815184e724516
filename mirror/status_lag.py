"""How long a copy's status change takes to reach the manager object (``jobmirror_status_propagation_seconds``).

Measured inside the controller on its monotonic clock: from the worker watch delivering a
copy whose status differs from what the cache held (the oldest such change not yet
mirrored) to the manager status write that mirrors the copy. Worker-side watch delivery is
not included, and no cross-cluster clock is involved. A change that needs no manager write
(the manager already says it) ends its wait without an observation.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kruntime.bounded import LruDict
from kruntime.resources import Obj
from mirror.kinds import MirroredKind


def status_changed(old: Obj | None, new: Obj) -> bool:
    """Whether a copy's watch event brings a status the cache did not have."""
    return old is None or (old.get("status") or {}) != (new.get("status") or {})


def newly_decided(kind: MirroredKind, old: Obj | None, new: Obj) -> bool:
    """Whether this event is the one where the copy's outcome was decided (or it finished).

    Such a change goes ahead of queued dispatches; the copy's running counters do not — while
    they wait in the queue, successive ones fold into one manager write.
    """
    now = kind.outcome(new)
    return now is not None and now != (kind.outcome(old) if old is not None else None)


def _conditions(status: Obj) -> list[tuple[str, str]]:
    return [(str(c.get("type")), str(c.get("status"))) for c in status.get("conditions") or []]


def interim_hold(stored: Obj, desired: Obj, *, pending_for: float | None, period: float) -> float:
    """Seconds the write of ``desired`` over ``stored`` may still wait; 0: write now.

    Only a change of running counters waits (active, ready, succeeded, startTime …), and only
    until the first unmirrored change is ``period`` old: the changes of that while then go in
    one write instead of one each. A change of the conditions (the outcome, Suspended) never
    waits, and neither does a change whose age is unknown (no watch event dated it, e.g. after a
    restart): nothing that decides is delayed, and nothing waits for ever.
    """
    if period <= 0 or pending_for is None or _conditions(stored) != _conditions(desired):
        return 0.0
    return max(0.0, period - pending_for)


def event_hold(old: Obj | None, new: Obj, *, pending: bool, period: float) -> float:
    """Seconds to wait before the pass a copy's status event asks for; 0: at once.

    The event handler's side of :func:`interim_hold`: when nothing was waiting to be mirrored and
    this change is running counters only, the pass it queues would only start the hold and a
    second pass would write; queued ``period`` later, one pass writes (issue 38: passes per Job).
    """
    if period <= 0 or pending or old is None:
        return 0.0
    before, after = old.get("status") or {}, new.get("status") or {}
    return period if before != after and _conditions(before) == _conditions(after) else 0.0


class StatusLag:
    """Per manager uid: when its copy's status first changed without being mirrored yet, and on which worker."""

    def __init__(self, maxlen: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._since: LruDict[str, tuple[float, str]] = LruDict(maxlen)
        self.clock = clock

    def changed(self, uid: str, worker: str) -> None:
        """A copy's status changed: start waiting, unless an earlier change is still waiting."""
        if uid not in self._since:
            self._since[uid] = (self.clock(), worker)

    def mirrored(self, uid: str) -> tuple[str, float] | None:
        """The manager now carries the copy's status: (worker, seconds waited), or None if nothing waited."""
        since = self._since.pop(uid, None)
        if since is None:
            return None
        return since[1], max(0.0, self.clock() - since[0])

    def pending_for(self, uid: str) -> float | None:
        """Seconds since the copy's oldest change not mirrored yet appeared; None when none is dated."""
        since = self._since.get(uid)
        return None if since is None else max(0.0, self.clock() - since[0])

    def forget(self, uid: str) -> None:
        self._since.pop(uid, None)

    def __len__(self) -> int:
        return len(self._since)
