"""The waiting line under the scheduling order (issue 35 items 1 and 4): per worker, the first Job is
the best-ranked of the tenants' heads, with ranks from a ranker whose shares change between calls
(mirror/scheduling/line.py, with mirror/scheduling/order.py's rank as the Placer gives it)."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from mirror.scheduling.line import Waiting, WaitingLine, heads, hold_lapses_at
from mirror.scheduling.order import OrderRule

AGE = 600.0


class Ranker:
    """The Placer's rank: the order rule over the tenants' shares as they are at the call."""

    def __init__(self, fair: bool = True) -> None:
        self.rule = OrderRule(fair, AGE)
        self.shares: dict[str, float] = {}

    def __call__(self, w: Waiting, since: float, now: float) -> Any:
        return self.rule.rank(w.priority, w.order, self.shares.get(w.tenant, 0.0), now - since)


def created(second: int, uid: str) -> tuple[str, str]:
    return (f"2026-11-26T{10 + second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z", uid)


def waiting(uid: str, second: int, tenant: str, priority: int = 0, could: tuple[str, ...] = ("w1",)) -> Waiting:
    return Waiting(created(second, uid), frozenset(could), f"{tenant}/{uid}", tenant, priority)


def test_the_first_for_a_worker_follows_the_shares_as_they_change() -> None:
    rank = Ranker()
    line = WaitingLine(rank=rank)
    for i in range(10):  # tenant a's burst, all created before b's one Job
        line.add(f"a{i}", waiting(f"a{i}", i, "a"), 0.0)
    line.add("b0", waiting("b0", 30, "b"), 0.0)
    rank.shares = {"a": 0.5, "b": 0.0}
    assert line.first("w1", 1.0) == "b0"  # b runs nothing: its Job goes first
    rank.shares = {"a": 0.0, "b": 0.5}  # a's Jobs ended and b's started: a's oldest is first again
    assert line.first("w1", 1.0) == "a0"
    rank.shares = {"a": 0.2, "b": 0.2}  # the same share: arrival
    assert line.first("w1", 1.0) == "a0"
    line.pop("a0")
    assert line.first("w1", 1.0) == "a1"


def test_a_high_priority_job_is_first_before_its_own_tenants_earlier_ones_and_every_lower_one() -> None:
    rank = Ranker()
    line = WaitingLine(rank=rank)
    for i in range(3):
        line.add(f"a{i}", waiting(f"a{i}", i, "a"), 0.0)
    line.add("b0", waiting("b0", 5, "b"), 0.0)
    rank.shares = {"a": 0.9, "b": 0.0}
    line.add("a-urgent", waiting("a-urgent", 50, "a", priority=1000), 0.0)
    assert line.first("w1", 1.0) == "a-urgent"
    line.pop("a-urgent")
    assert line.first("w1", 1.0) == "b0"


def test_a_job_waiting_past_the_starvation_age_goes_ahead_of_fair_share_but_not_of_a_higher_priority() -> None:
    rank = Ranker()
    rank.shares = {"busy": 0.9, "idle": 0.0}
    line = WaitingLine(rank=rank)
    line.add("busy0", waiting("busy0", 0, "busy"), 0.0)
    line.add("idle0", waiting("idle0", 1, "idle"), 500.0)
    assert line.first("w1", 599.0) == "idle0"
    assert line.first("w1", 600.0) == "busy0"  # waited 600 s: ahead of the idle tenant's Job
    line.add("idle-high", waiting("idle-high", 2, "idle", priority=1), 600.0)
    assert line.first("w1", 10_000.0) == "idle-high"


def test_arrival_order_ignores_shares_and_age() -> None:
    rank = Ranker(fair=False)
    rank.shares = {"a": 0.9, "b": 0.0}
    line = WaitingLine(rank=rank)
    line.add("b0", waiting("b0", 10, "b"), 0.0)
    line.add("a0", waiting("a0", 0, "a"), 900.0)
    assert line.first("w1", 900.0) == "a0" and line.first("w1", 5000.0) == "a0"


def test_re_added_jobs_leave_stale_entries_that_never_answer() -> None:
    rank = Ranker()
    line = WaitingLine(rank=rank)
    line.add("a0", waiting("a0", 0, "a", could=("w1", "w2")), 0.0)
    line.add("a1", waiting("a1", 1, "a", could=("w1",)), 0.0)
    line.add("a0", waiting("a0", 0, "a", could=("w2",)), 5.0)  # looked at again: only w2 could take it now
    assert line.first("w1", 6.0) == "a1" and line.first("w2", 6.0) == "a0"
    assert line.since("a0") == 0.0  # it kept its place: when it began waiting
    line.add("a1", waiting("a1", 1, "a", priority=-1, could=("w1",)), 7.0)  # its PriorityClass changed
    line.add("a2", waiting("a2", 2, "a", could=("w1",)), 7.0)
    assert line.first("w1", 8.0) == "a2"
    line.pop("a2")
    line.pop("a0")
    assert line.first("w1", 8.0) == "a1" and line.first("w2", 8.0) is None
    assert dict(line) == {"a1": waiting("a1", 1, "a", priority=-1, could=("w1",))}


def test_holder_and_held_before_under_shares_and_the_hold_bound() -> None:
    rank = Ranker()
    rank.shares = {"a": 0.5, "b": 0.1, "c": 0.0}
    line = WaitingLine(rank=rank)
    line.add("a0", waiting("a0", 0, "a", could=("w1", "w2")), 0.0)
    line.add("b0", waiting("b0", 1, "b", could=("w1",)), 100.0)
    c_rank = rank(waiting("c0", 2, "c"), 150.0, 150.0)
    assert line.held_before(c_rank, 150.0, 120.0, 150.0) == {}  # c is furthest below its share: first
    a_rank = rank(waiting("a9", 9, "a"), 150.0, 150.0)
    assert line.holder("w1", 150.0, 120.0) == "b0"  # a0's own hold lapsed at 120
    assert line.first("w1", 150.0) == "b0" and line.first("w2", 150.0) == "a0"
    assert line.held_before(a_rank, 150.0, 120.0, 150.0) == {"w1": ("b0", hold_lapses_at(100.0, 150.0, 120.0))}
    rank.shares = {"a": 0.0, "b": 0.5}  # a ran dry: a0 is first for w1 again, but no longer holds it
    assert line.first("w1", 150.0) == "a0" and line.holder("w1", 150.0, 120.0) == "b0"
    assert heads(line, ["w1", "w2"], 150.0, 120.0) == ["a0", "b0"]
    a_rank = rank(waiting("a9", 9, "a"), 150.0, 150.0)
    assert line.held_before(a_rank, 150.0, 120.0, 150.0) == {}  # a9 is ahead of b0 now
    unbounded = WaitingLine(dict(line.items()), 0.0, rank)
    assert unbounded.held_before(a_rank, 150.0, math.inf, 150.0) == {"w1": ("a0", math.inf), "w2": ("a0", math.inf)}


def test_a_job_whose_wait_began_after_a_later_one_of_its_tenant_still_goes_ahead_once_aged() -> None:
    """Tenant a's older Job first waited for a's quota and joined the line at 500; a's newer Job has
    waited since 0. At 650 the newer one has waited past the starvation age and goes ahead of tenant
    b's Job, which is ahead of a's older one on fair share."""
    rank = Ranker()
    rank.shares = {"a": 0.5, "b": 0.0}
    line = WaitingLine(rank=rank)
    line.add("a-new", waiting("a-new", 10, "a"), 0.0)
    line.add("b0", waiting("b0", 20, "b"), 0.0)
    line.add("a-old", waiting("a-old", 0, "a"), 500.0)
    assert line.first("w1", 599.0) == "b0"
    assert line.first("w1", 650.0) == "a-new"
    assert line.holder("w1", 650.0, 1000.0) == "a-new"
    assert line.first("w1", 1100.0) == "a-new"  # both aged: the one that waited longest


def test_a_job_whose_tenant_changed_does_not_hide_its_old_tenants_jobs() -> None:
    """A namespace's labels seen (or changed) after its Job began waiting move the Job to another
    tenant: the entry in its old tenant's heap no longer stands for it there."""
    rank = Ranker()
    rank.shares = {"ns-a": 0.0, "team": 0.9, "b": 0.5}
    line = WaitingLine(rank=rank)
    line.add("x", waiting("x", 0, "ns-a"), 0.0)
    line.add("y", waiting("y", 1, "ns-a"), 0.0)
    line.add("b0", waiting("b0", 2, "b"), 0.0)
    line.add("x", waiting("x", 0, "team"), 1.0)  # ns-a's labels are known now: tenant team
    assert line.first("w1", 2.0) == "y"  # ns-a (share 0) still has y, ahead of b0
    assert line.holder("w1", 2.0, 120.0) == "y"


def scan_first(line: WaitingLine, jobs: dict[str, Waiting], worker: str, now: float) -> list[str]:
    """The best-ranked Jobs waiting for ``worker`` by scanning them all (ties: any of them)."""
    could = [u for u, w in jobs.items() if worker in w.could]
    if not could:
        return [None]  # type: ignore[list-item]
    best = min(line.rank(u, now) for u in could)
    return [u for u in could if line.rank(u, now) == best]


@pytest.mark.parametrize("since_follows_creation", [True, False], ids=["since-in-creation-order", "since-any-order"])
@pytest.mark.parametrize("seed", [3, 11])
def test_the_ranked_line_answers_as_a_scan_of_every_waiting_job_would(seed: int, since_follows_creation: bool) -> None:
    """Seeded random adds, re-adds, removals, share changes and clock steps over several tenants and
    priorities: first() and holder() equal a scan by rank after every step. A Job's wait may begin
    out of its creation order (it waited for its tenant's quota first, or was placed, lost its worker
    and waits again)."""
    rng = random.Random(seed)
    rank = Ranker()
    line = WaitingLine(rank=rank)
    jobs: dict[str, Waiting] = {}
    since: dict[str, float] = {}
    tenants, workers = ["a", "b", "c", "d"], ["w1", "w2", "w3"]
    now, hold = 0.0, 900.0
    for step in range(2500):
        now += rng.choice([0.0, 1.0, 10.0, 60.0])
        if rng.random() < 0.1:
            rank.shares = {t: rng.choice([0.0, 0.1, 0.25, 0.5]) for t in tenants}
        n = rng.randrange(80)
        uid = f"u{n:02d}"
        if rng.random() < 0.3:
            line.pop(uid)
            jobs.pop(uid, None)
            since.pop(uid, None)
        else:
            second = int(now) if since_follows_creation else rng.randrange(40_000)
            w = jobs[uid] if uid in jobs and rng.random() < 0.5 else Waiting(
                created(second, uid) if uid not in jobs or not since_follows_creation else jobs[uid].order,
                frozenset(rng.sample(workers, rng.randint(1, 3))), f"ns/{uid}",
                rng.choice(tenants), rng.choice([0, 0, 0, 100]))
            line.add(uid, w, now)
            jobs[uid] = w
            since.setdefault(uid, now)
        for worker in workers:
            assert line.first(worker, now) in scan_first(line, jobs, worker, now), (step, worker)
            holding = {u: w for u, w in jobs.items() if since[u] + hold > now}
            assert line.holder(worker, now, hold) in scan_first(line, holding, worker, now), (step, worker)
            for_worker = [] if step % 5 else sorted((u for u, w in jobs.items() if worker in w.could),
                                                    key=lambda u: line.rank(u, now))
            assert step % 5 or line.best(worker, now, 5) == for_worker[:5], (step, worker)  # first, then next
        assert dict(line) == jobs
