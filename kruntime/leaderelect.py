"""Lease-based leader election that cannot yield two active leaders.

kubernetes_asyncio's elector checks its renew deadline only between attempts, and its
Lease calls have no timeout of their own: a leader whose API connection hangs keeps
leading (and writing) long after another replica has taken the expired Lease. Here:

* every Lease call is bounded by the time left until the renew deadline (and by
  ``request_timeout``), so a hung call cannot outlive the deadline;
* leadership is a clock fact, not a flag: :meth:`LeaderElector.is_leader` turns false
  ``renew_deadline`` after the start of the last successful renewal, even before the
  renew loop notices (writers gate on it);
* a follower takes an unreleased Lease only ``leaseDurationSeconds`` after it last saw
  the record change, measured on its own monotonic clock (no cross-node clock skew).

The holder's last successful renewal was sent at ``t0``; the follower saw that record
no earlier than ``t0`` and waits ``lease_duration`` from then; the holder stops at
``t0 + renew_deadline`` < ``t0 + lease_duration``. The difference is the margin for
the leader's work to be cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from kruntime.client import ApiError, ClusterClient
from kruntime.resources import LEASES, Obj

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Timing:
    lease_duration: float
    renew_deadline: float
    retry_period: float
    request_timeout: float = 10.0


@dataclass(frozen=True)
class Observation:
    """A Lease record as last seen, and when (our monotonic clock) it was first seen like this."""

    holder: str
    renew_time: str
    duration: float
    since: float


class Act(StrEnum):
    CREATE = "create"  # no Lease yet
    TAKE = "take"  # free, expired, or ours: write our identity and a fresh renewTime
    WAIT = "wait"  # another holder's Lease is still valid


def observe(prev: Observation | None, lease: Obj | None, now: float) -> Observation | None:
    """The observation after reading ``lease`` (None: no Lease). A changed record restarts the clock."""
    if lease is None:
        return None
    spec = lease.get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    renew = str(spec.get("renewTime") or "")
    duration = float(spec.get("leaseDurationSeconds") or 0)
    if prev is not None and (prev.holder, prev.renew_time, prev.duration) == (holder, renew, duration):
        return prev
    return Observation(holder, renew, duration, now)


def decide(obs: Observation | None, me: str, now: float) -> Act:
    """Whether to write the Lease: never while another holder's record is younger than its duration."""
    if obs is None:
        return Act.CREATE
    if not obs.holder or obs.holder == me or now - obs.since >= obs.duration:
        return Act.TAKE
    return Act.WAIT


def call_timeout(now: float, renewed_at: float | None, timing: Timing) -> float:
    """Bound for one Lease call: within the renew deadline while leading, ``request_timeout`` otherwise."""
    if renewed_at is None:
        return timing.request_timeout
    return max(0.0, min(timing.request_timeout, renewed_at + timing.renew_deadline - now))


def taken_spec(spec: Obj, me: str, stamp: str, duration: float) -> Obj:
    """The Lease spec with us as holder; acquireTime and leaseTransitions move only on a change of holder."""
    out = dict(spec)
    changed = spec.get("holderIdentity") != me
    out.update(holderIdentity=me, leaseDurationSeconds=max(1, round(duration)), renewTime=stamp)
    if changed:
        out["acquireTime"] = stamp
        if spec.get("holderIdentity"):
            out["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
    out.setdefault("leaseTransitions", 0)
    return out


def micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate for one Lease. :meth:`run` leads while it holds the Lease, then returns."""

    def __init__(self, client: ClusterClient, namespace: str, name: str, identity: str, timing: Timing, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client, self.namespace, self.name, self.identity = client, namespace, name, identity
        self.timing = timing
        self.clock = clock
        self._obs: Observation | None = None
        #: monotonic start of the last successful acquire/renew request (None: not leading)
        self._renewed_at: float | None = None
        self.led = False  # held the Lease at some point
        self.acquired_at: float | None = None  # when we last became leader (monotonic)
        self.lost_at: float | None = None  # when leadership ended (monotonic)

    def is_leader(self) -> bool:
        """True only while the last renewal is younger than the renew deadline."""
        return (self._renewed_at is not None and self.lost_at is None
                and self.clock() - self._renewed_at < self.timing.renew_deadline)

    async def _try_once(self) -> bool:
        """One read (and, when allowed, one write) of the Lease, each bounded; True when we hold it after."""
        started = self.clock()
        ns, name = self.namespace, self.name
        timeout = call_timeout(started, self._renewed_at, self.timing)
        if timeout <= 0:
            return False
        try:
            async with asyncio.timeout(timeout):
                try:
                    lease: Obj | None = await self.client.request("GET", LEASES.path(ns, name), timeout=timeout)
                except ApiError as exc:
                    if not exc.not_found:
                        raise
                    lease = None
                self._obs = observe(self._obs, lease, self.clock())
                act = decide(self._obs, self.identity, self.clock())
                if act is Act.WAIT:
                    return False
                stamp = micro_time(datetime.now(UTC))
                remaining = max(0.01, timeout - (self.clock() - started))
                if act is Act.CREATE or lease is None:
                    body: Obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                 "metadata": {"name": name, "namespace": ns},
                                 "spec": taken_spec({}, self.identity, stamp, self.timing.lease_duration)}
                    await self.client.request("POST", LEASES.path(ns), body=body, timeout=remaining)
                else:
                    spec = taken_spec(lease.get("spec") or {}, self.identity, stamp, self.timing.lease_duration)
                    await self.client.request("PUT", LEASES.path(ns, name), body={**lease, "spec": spec},
                                              timeout=remaining)
        except (TimeoutError, ApiError) as exc:
            log.info("lease %s/%s: attempt failed (%s)", ns, name, exc or "timed out")
            return False
        self._renewed_at = started
        return True

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Acquire, run ``lead()`` while renewing; cancel it and return at the renew deadline.

        Returns normally when leadership was lost; re-raises what ``lead()`` raised.
        """
        while not await self._try_once():
            await asyncio.sleep(self.timing.retry_period)
        self.led = True
        self.acquired_at = self.clock()
        log.info("lease %s/%s acquired by %s", self.namespace, self.name, self.identity)
        task = asyncio.create_task(lead())
        try:
            await self._renew_until_lost(task)
        finally:
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self.lost_at is None and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]

    async def _renew_until_lost(self, task: asyncio.Task[None]) -> None:
        assert self._renewed_at is not None
        while True:
            deadline = self._renewed_at + self.timing.renew_deadline
            wait = max(0.0, min(self.timing.retry_period, deadline - self.clock()))
            await asyncio.wait({task}, timeout=wait)
            if task.done():
                return
            if self.clock() < deadline:
                await self._try_once()  # a failure is retried until the deadline
            if self.clock() >= self._renewed_at + self.timing.renew_deadline:
                self.lost_at = self.clock()
                log.warning("lease %s/%s: not renewed within %.1fs; stopped leading", self.namespace,
                            self.name, self.timing.renew_deadline)
                return

    async def release(self) -> None:
        """Hand the Lease back (only if we still hold it; resourceVersion precondition), so the
        standby leads after its next retry instead of waiting out the lease duration."""
        ns, name = self.namespace, self.name
        try:
            async with asyncio.timeout(self.timing.request_timeout):
                lease = await self.client.request("GET", LEASES.path(ns, name))
                spec = dict(lease.get("spec") or {})
                if spec.get("holderIdentity") != self.identity:
                    return
                spec.pop("holderIdentity", None)
                spec["leaseDurationSeconds"] = 1
                await self.client.request("PUT", LEASES.path(ns, name), body={**lease, "spec": spec})
            log.info("released the leader Lease %s/%s", ns, name)
        except (TimeoutError, ApiError, OSError) as exc:
            log.warning("could not release the leader Lease (the standby takes over after leaseDuration): %s", exc)
