"""The scheduling order through whole passes (issue 35 item 7): the Placer in the real reconciler,
on fake workers whose Nodes the room views watch (testkit/fakefleet.py). One worker with one 2-cpu
node; Jobs of 1 cpu, so two run at once (their room is reserved until their pods are bound, which
no kubelet does here) and a Job deleted by its user frees its room and its tenant's share.

The fake API server stamps creationTimestamp from the wall clock in whole seconds; the tables set
that clock (``stamps``) so the Jobs' creation order is theirs, not a sleep's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kruntime.resources import JOBS, PRIORITY_CLASSES, Obj
from mirror.naming import ANNOTATION_CLUSTER
from mirror.placer import BEHIND_WAKES, WAITING_RECHECK
from testkit import fakecluster
from testkit.fakefleet import FakeFleet, fake_fleet, job


def node(name: str, cpu: str) -> Obj:
    return {"metadata": {"name": name, "labels": {}}, "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


ONE_WORKER = {"worker-1": [node("n1", "2")]}


class Stamps:
    """The fake server's wall clock: each Job created one second after the one before."""

    def __init__(self) -> None:
        self.at = datetime(2026, 11, 26, 10, 0, 0, tzinfo=UTC)

    def now(self, tz: Any = None) -> datetime:
        self.at += timedelta(seconds=1)
        return self.at


@pytest.fixture
def stamps(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stamps]:
    s = Stamps()
    monkeypatch.setattr(fakecluster, "datetime", s)
    yield s


def one_cpu(name: str, ns: str, priority_class: str | None = None, **kw: Any) -> Obj:
    j = job(name, namespace=ns, requests={"cpu": "1"}, **kw)
    if priority_class:
        j["spec"]["template"]["spec"]["priorityClassName"] = priority_class
    return j


def worker_of(f: FakeFleet, name: str, ns: str) -> str | None:
    got = f.job(name, ns)
    assert got is not None
    return (got["metadata"].get("annotations") or {}).get(ANNOTATION_CLUSTER)


async def submit(f: FakeFleet, *jobs: Obj) -> None:
    """Create each Job and run its first pass."""
    for j in jobs:
        await f.create(j)
        await f.sync(j["metadata"]["name"], j["metadata"]["namespace"])


async def finish(f: FakeFleet, name: str, ns: str) -> None:
    """The user deletes a running Job: its copy goes, its room and its tenant's share free up."""
    await f.manager.client("user").delete(JOBS, ns, name)
    await f.settle()
    for _ in range(3):
        await f.sync(name, ns)
    assert f.job(name, ns) is None


async def priority_classes(f: FakeFleet, classes: dict[str, int]) -> None:
    """The manager serves ``classes`` (the Placer's priority_class, as the controller's informer
    answers it) and so does every worker (or its copies could never create pods)."""
    f.reconciler.places.priority_class = classes.get
    for server in f.workers.values():
        for name, value in classes.items():
            await server.client("admin").create(PRIORITY_CLASSES, None, {
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value})
    await f.settle()


def event_types(f: FakeFleet, name: str, ns: str, reason: str) -> list[str]:
    return [str(ev.get("type")) for (res, evns, _), ev in f.manager.objects.items()
            if res == "/v1/events" and evns == ns and (ev.get("involvedObject") or {}).get("name") == name
            and ev.get("reason") == reason]


@pytest.mark.parametrize(("order", "gets_the_room"), [
    ("FairShare", ("b0", "team-b")),  # team-a runs the whole worker, team-b nothing: b's Job goes first
    ("Arrival", ("a2", "team-a")),  # the old order: a's earlier Job
])
async def test_a_tenants_burst_does_not_keep_another_tenants_job_waiting_once_room_appears(
        stamps: Stamps, order: str, gets_the_room: tuple[str, str]) -> None:
    async with fake_fleet(("worker-1",), nodes=ONE_WORKER, scheduling={"order": order}) as f:
        await submit(f, *(one_cpu(f"a{i}", "team-a") for i in range(5)), one_cpu("b0", "team-b"))
        assert [worker_of(f, f"a{i}", "team-a") for i in range(5)] == ["worker-1", "worker-1", None, None, None]
        assert worker_of(f, "b0", "team-b") is None and len(f.reconciler.places.waiting) == 4
        await finish(f, "a0", "team-a")
        waits = [("a2", "team-a"), ("a3", "team-a"), ("a4", "team-a"), ("b0", "team-b")]
        for name, ns in waits:  # every one of them looks: only the first in line takes the room
            await f.sync(name, ns)
        placed = [(n, ns) for n, ns in waits if worker_of(f, n, ns) is not None]
        assert placed == [gets_the_room]


async def test_a_high_priority_job_goes_before_its_own_tenants_earlier_jobs(stamps: Stamps) -> None:
    async with fake_fleet(("worker-1",), nodes=ONE_WORKER) as f:
        await priority_classes(f, {"urgent": 1000, "batch": 0})
        await submit(f, one_cpu("a0", "team-a"), one_cpu("a1", "team-a"), one_cpu("a2", "team-a", "batch"),
                     one_cpu("a3", "team-a"), one_cpu("urgent", "team-a", "urgent"))
        assert worker_of(f, "urgent", "team-a") is None
        assert [e.key for e in f.reconciler.places.queue()] == ["team-a/urgent", "team-a/a2", "team-a/a3"]
        await finish(f, "a0", "team-a")
        for name in ("a2", "a3", "urgent"):
            await f.sync(name, "team-a")
        assert [worker_of(f, n, "team-a") for n in ("a2", "a3", "urgent")] == [None, None, "worker-1"]
        assert not event_types(f, "urgent", "team-a", "UnknownPriorityClass")


@pytest.mark.parametrize(("order", "warned"), [("FairShare", ["Warning"]), ("Arrival", [])])
async def test_an_unknown_priority_class_is_a_warning_once_per_wait(stamps: Stamps, order: str,
                                                                    warned: list[str]) -> None:
    async with fake_fleet(("worker-1",), nodes=ONE_WORKER, scheduling={"order": order}) as f:
        await priority_classes(f, {"urgent": 1000, "urgnet": 0})
        f.reconciler.places.priority_class = {"urgent": 1000}.get  # the worker has it, the manager not
        await submit(f, one_cpu("a0", "team-a"), one_cpu("a1", "team-a"), one_cpu("typo", "team-a", "urgnet"))
        for _ in range(3):
            await f.sync("typo", "team-a")
        assert worker_of(f, "typo", "team-a") is None
        assert event_types(f, "typo", "team-a", "UnknownPriorityClass") == warned
        if warned:
            said = [m for r, m in f.events("typo", "team-a") if r == "UnknownPriorityClass"]
            assert "priorityClassName 'urgnet' is not a PriorityClass of the manager cluster" in said[0]
            assert "default priority (0)" in said[0]


QUOTA = {"tenants": [{"name": "team-a", "namespaces": ["team-a", "team-a-*"], "quota": {"cpu": "2", "jobs": 2}}]}


async def test_a_job_over_its_tenants_quota_waits_and_is_placed_when_a_job_of_its_tenant_ends(
        stamps: Stamps) -> None:
    nodes = {"worker-1": [node("n1", "8")]}  # room for all: only the quota keeps them waiting
    async with fake_fleet(("worker-1",), nodes=nodes, scheduling=QUOTA) as f:
        woken: list[str] = []
        f.reconciler.places.wake = lambda keys, urgent=True: woken.extend(k.key for k in keys)
        await submit(f, one_cpu("a0", "team-a"), one_cpu("a1", "team-a-dev"), one_cpu("a2", "team-a"),
                     one_cpu("b0", "team-b"))
        assert worker_of(f, "a0", "team-a") == worker_of(f, "a1", "team-a-dev") == "worker-1"
        assert worker_of(f, "b0", "team-b") == "worker-1"  # another tenant: no quota
        assert worker_of(f, "a2", "team-a") is None
        await f.sync("a2", "team-a")
        waited = [m for r, m in f.events("a2", "team-a") if r == "WaitingForQuota"]
        assert len(waited) == 1 and "tenant team-a is at its quota: Jobs 2+1 > quota 2; cpu 2+1 > quota 2" in waited[0]
        assert event_types(f, "a2", "team-a", "WaitingForQuota") == ["Normal"]
        assert [(e.key, e.tenant) for e in f.reconciler.places.queue()] == [("team-a/a2", "team-a")]
        await finish(f, "b0", "team-b")
        assert "team-a/a2" not in woken  # another tenant's Job ending frees nothing of team-a's quota
        await finish(f, "a1", "team-a-dev")
        assert "team-a/a2" in woken  # looked at again at once
        await f.sync("a2", "team-a")
        assert worker_of(f, "a2", "team-a") == "worker-1"
        assert f.reconciler.places.queue() == []


async def test_a_job_that_alone_exceeds_its_tenants_quota_is_a_warning_once(stamps: Stamps) -> None:
    async with fake_fleet(("worker-1",), nodes={"worker-1": [node("n1", "8")]}, scheduling=QUOTA) as f:
        big = job("big", namespace="team-a", requests={"cpu": "1"}, parallelism=3, completions=3)
        await submit(f, big)
        for _ in range(3):
            await f.sync("big", "team-a")
        assert worker_of(f, "big", "team-a") is None
        assert event_types(f, "big", "team-a", "ExceedsQuota") == ["Warning"]
        said = next(m for r, m in f.events("big", "team-a") if r == "ExceedsQuota")
        assert "tenant team-a: it alone asks more than its tenant's quota: cpu 3 > quota 2" in said
        assert f.reconciler.places.queue() == [] and f.reconciler.places.waiting == {}


SELECTED = {"tenants": [{"name": "t", "namespaceSelector": {"matchLabels": {"team": "t"}}, "quota": {"jobs": 1}}]}


async def test_a_job_counted_before_its_namespaces_labels_were_known_counts_for_its_tenant_once_they_are(
        stamps: Stamps) -> None:
    async with fake_fleet(("worker-1",), nodes={"worker-1": [node("n1", "8")]}, scheduling=SELECTED) as f:
        labels: dict[str, dict[str, str]] = {}
        f.reconciler.places.namespace_labels = labels.get  # the namespace cache has not synced yet
        await submit(f, one_cpu("a0", "team-t"))
        assert worker_of(f, "a0", "team-t") == "worker-1"
        labels["team-t"] = {"team": "t"}  # synced: team-t belongs to tenant t
        await f.sync("a0", "team-t")  # a0 looked at again (a resync)
        await submit(f, one_cpu("a1", "team-t"))
        assert worker_of(f, "a1", "team-t") is None, "tenant t runs 2 Jobs under a quota of 1"
        assert "WaitingForQuota" in f.reasons("a1", "team-t")


@pytest.mark.parametrize(("deadline", "annotation", "backfills"), [
    (60, None, True),  # ends (60 s + 5 s margin) before the head could start (600 s)
    (None, "1m", True),
    (None, None, False),  # length not known: it waits behind the head
    (596, None, False),  # 596 + 5 > 600
    (3600, None, False),
])
async def test_a_later_job_of_known_length_backfills_past_the_head_only_when_it_ends_before_the_heads_start(
        stamps: Stamps, deadline: int | None, annotation: str | None, backfills: bool) -> None:
    async with fake_fleet(("worker-1",), nodes={"worker-1": [node("n1", "4")]}) as f:
        now = [1000.0]
        f.reconciler.places.clock = lambda: now[0]
        long = one_cpu("long", "team-a")
        long["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
        long["spec"]["activeDeadlineSeconds"] = 600
        head = one_cpu("head", "team-a")
        head["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
        later = one_cpu("later", "team-a", annotations={"jobmirror.dev/expected-duration": annotation}
                        if annotation else None)
        if deadline is not None:
            later["spec"]["activeDeadlineSeconds"] = deadline
        await submit(f, long)
        assert worker_of(f, "long", "team-a") == "worker-1"
        now[0] += 1.0
        await submit(f, head)  # needs long's room: it could start at 1600
        [entry] = f.reconciler.places.queue()
        assert entry.key == "team-a/head" and entry.starts_in == pytest.approx(599.0)
        now[0] += 1.0
        await submit(f, later)  # 1 cpu is free now, but the head holds worker-1
        assert (worker_of(f, "later", "team-a") is not None) is backfills  # (its tenant's: behind the head)


@pytest.mark.parametrize(("waited", "gets_the_room"), [
    (60.0, ("b-wait", "team-b")),  # fair share: team-a runs a Job, team-b none
    (150.0, ("a-wait", "team-a")),  # a-wait has waited past starvationAge (100 s): it goes first
])
async def test_a_job_waiting_past_the_starvation_age_goes_ahead_of_fair_share(
        stamps: Stamps, waited: float, gets_the_room: tuple[str, str]) -> None:
    async with fake_fleet(("worker-1",), nodes=ONE_WORKER, headOfLineHold=1000.0,
                          scheduling={"starvationAge": 100}) as f:
        now = [0.0]
        f.reconciler.places.clock = lambda: now[0]
        await submit(f, one_cpu("a-long", "team-a"), one_cpu("a-short", "team-a"), one_cpu("a-wait", "team-a"))
        now[0] = 50.0
        await submit(f, one_cpu("b-wait", "team-b"))
        await finish(f, "a-short", "team-a")
        now[0] = waited
        for name, ns in (("b-wait", "team-b"), ("a-wait", "team-a")):
            await f.sync(name, ns)
        assert [(n, ns) for n, ns in (("a-wait", "team-a"), ("b-wait", "team-b"))
                if worker_of(f, n, ns) is not None] == [gets_the_room]


async def test_no_waiting_job_has_a_timer_the_placer_wakes_the_first_and_those_behind_it(stamps: Stamps) -> None:
    """Issue 35 item 4: with Jobs of 3 tenants waiting for room and quota, no pass of a waiting Job asks
    to be looked at again. The placer's sweep wakes the first in line; room freed wakes the first; a
    first that cannot use the room there wakes the next BEHIND_WAKES (never itself); a quota waiter
    is woken when its tenant's work ends."""
    quota = {"tenants": [{"name": "team-q", "namespaces": ["team-q"], "quota": {"jobs": 1}}]}
    async with fake_fleet(("worker-1",), nodes=ONE_WORKER, scheduling=quota) as f:
        woken: list[str] = []
        f.reconciler.places.wake = lambda keys, urgent=True: woken.extend(k.key for k in keys)
        await submit(f, one_cpu("a0", "team-a"), one_cpu("q0", "team-q"))  # the worker's 2 cpu taken
        big = job("big", namespace="team-c", requests={"cpu": "2"})
        waiting = [big, *(one_cpu(f"{t}{i}", f"team-{t}") for i in range(1, 7) for t in "ab"), one_cpu("q1", "team-q")]
        afters = []
        for j in waiting:
            await f.create(j)
            afters.append(await f.sync(j["metadata"]["name"], j["metadata"]["namespace"]))
        assert afters == [None] * 14  # 13 waiting for room, 1 for its tenant's quota
        line = [e.key for e in f.reconciler.places.queue() if e.key != "team-q/q1"]
        assert line[0] == "team-c/big"  # team-c runs nothing: first
        f.reconciler.places.wake_waiting()
        assert woken == ["team-c/big"]  # the sweep that stands for the timers: the first in line only
        woken.clear()
        await finish(f, "q0", "team-q")  # 1 cpu free: not enough for big
        assert sorted(woken) == ["team-c/big", "team-q/q1"]  # the first in line; its tenant's quota waiter
        woken.clear()
        await f.sync("big", "team-c")  # it cannot use the room: the next ones behind it look
        assert woken == line[1:1 + BEHIND_WAKES]
        woken.clear()
        ns, name = line[1].split("/")
        after = await f.sync(name, ns)  # it looks: big holds worker-1 against it (headOfLineHold, 120 s)
        assert worker_of(f, name, ns) is None
        assert after is None  # held from room it has: no timer either (the sweep wakes it at the lapse)
        assert woken == []  # a Job behind that was not placed wakes no one
        await f.sync("big", "team-c")
        assert woken == []  # at most once per worker every WAITING_RECHECK seconds
        places = f.reconciler.places
        places.clock = lambda: time.monotonic() + WAITING_RECHECK
        await f.sync("big", "team-c")
        assert woken == line[1:1 + BEHIND_WAKES]  # then again
        woken.clear()
        places.wake_waiting()
        assert woken == ["team-c/big"]  # its hold has not lapsed: the sweep wakes the first alone
        woken.clear()
        places.clock = lambda: time.monotonic() + 121
        places.wake_waiting()
        assert f"{ns}/{name}" in woken  # the hold lapsed: the Job it held where it had room looks again
        woken.clear()
        places.wake_waiting()
        assert f"{ns}/{name}" not in woken  # once per lapse
