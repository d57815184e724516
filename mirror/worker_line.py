"""Jobs parked while a worker's client is rate-limited: they come back when their token is near.

A worker client at 5 QPS with a queue of calls makes the next call wait for its token. That wait
is ours, not the worker's (it is never judged slowness), but a pass waiting for it holds a
reconcile slot, and passes that give up and re-poll spend the worker's tokens on nothing (issue
38). So a call whose token is further away than ``limit`` seconds is not made: the Job is parked
in the worker's line with the moment its turn comes (one token per parked Job, in arrival order)
and its pass ends; the work queue brings it back then. While Jobs are parked, newcomers queue
behind them, so the ones parked first go first and nobody is turned away twice for the same token.

Pure: the clock, the token delay and the QPS are passed in.
"""

from __future__ import annotations

#: a parked Job coming back this much before its turn counts as on time (timers fire a hair early)
EARLY = 0.05
#: a parked Job not back this long after its turn has gone elsewhere (finished, deleted, moved):
#: its place is dropped so it holds up nobody
STALE = 10.0
#: the shortest park: a turn already due is taken on the next look, not in a busy loop
MIN_PARK = 0.05


class TokenLine:
    """The parked Jobs of one worker, by manager uid, with the moment each one's turn comes."""

    def __init__(self, limit: float) -> None:
        #: the longest token wait a pass may sit through holding its reconcile slot
        self.limit = limit
        self._due: dict[str, float] = {}
        #: the moment the next Job parked may go (one token after the last one parked)
        self._next = 0.0

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, uid: str) -> bool:
        return uid in self._due

    def admit(self, uid: str, now: float, delay: float, qps: float) -> float | None:
        """Whether the pass of ``uid`` may call the worker now, its token ``delay`` s away: None to
        call, else the seconds until its turn (it is parked until then)."""
        self._drop_stale(now)
        due = self._due.get(uid)
        if due is not None:
            if now < due - EARLY:
                return due - now  # an event brought it back before its turn: keep its place
            if delay <= 2 * self.limit:
                del self._due[uid]
                return None
            # Its token went to calls that do not queue here (probes, GC, another kind's): wait again.
            return self._park(uid, now + delay - self.limit, qps, now)
        if not self._due and delay <= self.limit:
            return None
        return self._park(uid, max(now + delay - self.limit, self._next), qps, now)

    def forget(self, uid: str) -> None:
        """The Job no longer calls this worker (it finished, was deleted or moved)."""
        self._due.pop(uid, None)

    def _park(self, uid: str, due: float, qps: float, now: float) -> float:
        self._due[uid] = due
        self._next = max(self._next, due + (1 / qps if qps > 0 else 0.0))
        return max(due - now, MIN_PARK)

    def _drop_stale(self, now: float) -> None:
        """Drop places long past their turn from the head of the line (parked in turn order, so
        this is a look at one or two entries, not a walk of the line)."""
        while self._due:
            uid, due = next(iter(self._due.items()))
            if now - due <= STALE:
                break
            del self._due[uid]
        if not self._due:
            self._next = 0.0
