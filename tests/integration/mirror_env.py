"""Harness for mirror integration tests: real manager + two kwok workers, controller in-process.

Each test gets its own namespace allow-list and origin id, so tests sharing the
session's clusters never see each other's Jobs or copies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import EVENTS, JOBS, Obj
from mirror import metrics
from mirror.config import Config, Worker
from mirror.controller import MirrorController
from mirror.jobs.kind import JOB_KIND
from mirror.kinds import QueueKey
from mirror.naming import LABEL_ORIGIN_UID
from testkit.copies import CopyRecorder
from testkit.jobs import cond
from testkit.jobs import make_job as make_job  # re-exported: the tests import it from here
from testkit.tcpproxy import FreezableProxy, route_kubeconfig, server_of
from tests.conftest import MANAGER, WORKER_1, WORKER_2, ensure_namespace, wait_for


def reconcile_errors() -> dict[str, float]:
    """``jobmirror_reconcile_errors_total`` by reason, as this process counts them now."""
    return {s.labels["reason"]: s.value for m in metrics.RECONCILE_ERRORS.collect() for s in m.samples
            if s.name.endswith("_total")}


def syncs() -> float:
    """Reconcile passes run so far in this process (``jobmirror_sync_duration_seconds`` count)."""
    return next(s.value for m in metrics.SYNC_LATENCY.collect() for s in m.samples if s.name.endswith("_count"))


async def wait_syncs(more: int, timeout: float = 60) -> None:
    """Wait for ``more`` reconcile passes from now: a positive signal that the controller looked again."""
    target = syncs() + more
    await wait_for(lambda: asyncio.sleep(0, syncs() >= target), timeout=timeout, what=f"{more} more reconciles")


def gc_rounds() -> float:
    return next(s.value for m in metrics.GC_ROUNDS.collect() for s in m.samples if s.name.endswith("_total"))


async def wait_gc_rounds(more: int, timeout: float = 60) -> None:
    """Wait for ``more`` completed GC rounds from now (the positive signal "GC looked and kept it")."""
    target = gc_rounds() + more
    await wait_for(lambda: asyncio.sleep(0, gc_rounds() >= target), timeout=timeout, what=f"{more} more GC rounds")


class LogTrap(logging.Handler):
    """Keeps the controller's records that signal trouble: an exception logged, or ERROR and above."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.split(".")[0] in ("mirror", "kruntime") and (record.exc_info or record.levelno >= logging.ERROR):
            self.records.append(record)


@dataclass
class MirrorEnv:
    ns: str
    origin: str
    manager: ClusterClient
    workers: dict[str, ClusterClient]
    clusters: dict[str, LocalCluster]
    config: Config
    controllers: list[tuple[MirrorController, asyncio.Task[None]]] = field(default_factory=list)
    #: reconcile error reasons (``jobmirror_reconcile_errors_total``) this test provokes on purpose
    expected_errors: set[str] = field(default_factory=set)
    #: regexes of logged exceptions/errors this test provokes on purpose
    expected_logs: list[str] = field(default_factory=list)
    errors_before: dict[str, float] = field(default_factory=reconcile_errors)
    trap: LogTrap = field(default_factory=LogTrap)
    #: a watch on every worker's copies in ``ns`` from the env's start (see :meth:`copies_made`)
    copy_watch: CopyRecorder | None = None

    def expect_errors(self, *reasons: str, logs: Iterable[str] = ()) -> None:
        """Declare what this test provokes: reconcile error reasons and log-message regexes."""
        self.expected_errors.update(reasons)
        self.expected_logs.extend(logs)

    def check_clean(self) -> None:
        """The end of every mirror test: no unexpected exception logged, only provoked error kinds."""
        after = reconcile_errors()
        new = {r: after[r] - self.errors_before.get(r, 0) for r in after if after[r] > self.errors_before.get(r, 0)}
        unexpected = {r: n for r, n in new.items() if r not in self.expected_errors}
        assert not unexpected, f"reconcile_errors_total grew for reasons this test did not provoke: {unexpected}"
        bad = [r for r in self.trap.records
               if not any(re.search(p, r.getMessage()) for p in self.expected_logs)]
        assert not bad, "the controller logged unexpected errors/exceptions:\n" + "\n".join(
            f"{r.levelname} {r.name}: {r.getMessage()}"
            + (f"\n{logging.Formatter().formatException(r.exc_info)}" if r.exc_info else "") for r in bad[:10])

    def config_with(self, **over: Any) -> Config:
        return self.config.model_copy(update=over)

    async def worker_via_proxy(self, worker: str, scratch: Path) -> tuple[FreezableProxy, Config]:
        """A proxy the test can freeze in front of ``worker``'s API server (started; close it), and the
        env's config with the controller's connection to that worker routed through it. The test's
        own clients (``workers``) still reach the worker directly."""
        kubeconfig = self.clusters[worker].kubeconfig
        proxy = FreezableProxy(*server_of(kubeconfig))
        routed = route_kubeconfig(kubeconfig, scratch / f"{worker}-via-proxy.yaml", await proxy.start())
        workers = [w.model_copy(update={"kubeconfig": routed}) if w.name == worker else w for w in self.config.workers]
        return proxy, self.config_with(workers=workers)

    async def look_again(self, *keys: str, timeout: float = 60) -> None:
        """Have the running controllers look at these Jobs (namespace/name) again, and wait for those
        passes: a Job in sync keeps no timer (mirror.in_sync), so "it looked again and did nothing
        wrong" needs a pass the test asks for, as the resync once gave one."""
        target = syncs() + len(keys) * len(self.controllers)
        for ctrl, _ in self.controllers:
            for key in keys:
                ctrl.queue.add(QueueKey(JOB_KIND.name, key), why="test")
        await wait_for(lambda: asyncio.sleep(0, syncs() >= target), timeout=timeout,
                       what=f"the passes of {', '.join(keys)} asked for")

    async def start(self, cfg: Config | None = None) -> MirrorController:
        ctrl = MirrorController(cfg or self.config)
        task = asyncio.create_task(ctrl.run(health=False))
        self.controllers.append((ctrl, task))
        await asyncio.sleep(0.05)
        if task.done():  # a controller that dies at start must fail the test, not hide
            task.result()
        return ctrl

    async def stop(self, ctrl: MirrorController | None = None) -> None:
        """Kill a controller (the last started by default) as abruptly as cancellation allows."""
        pair = next(p for p in reversed(self.controllers) if ctrl is None or p[0] is ctrl)
        self.controllers.remove(pair)
        task = pair[1]
        task.cancel()
        ended: BaseException | None = None
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # it crashed (before or while we cancelled it): that fails the test
            ended = exc
        finally:
            await pair[0].stop()
        if ended is not None:
            raise AssertionError(f"the controller task ended with an exception: {ended!r}") from ended

    async def create(self, job: Obj, client: ClusterClient | None = None) -> Obj:
        return await (client or self.manager).create(JOBS, self.ns, job)

    async def get(self, name: str, client: ClusterClient | None = None) -> Obj | None:
        try:
            return await (client or self.manager).get(JOBS, self.ns, name)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def copies(self, manager_uid: str) -> dict[str, Obj]:
        """Every remote copy of one manager Job, by worker, read from the servers."""
        out = {}
        for wname, c in self.workers.items():
            items, _ = await c.list_all(JOBS, self.ns, label_selector=f"{LABEL_ORIGIN_UID}={manager_uid}")
            for it in items:
                out[wname] = it
        return out

    async def copies_made(self, manager_uid: str, timeout: float = 60) -> dict[str, str]:
        """Every copy the workers ever held of one manager Job, copy uid -> worker, as watched from the
        env's start (caught up with the servers first). "Created exactly once" is a single entry."""
        assert self.copy_watch is not None, "the env's copy watch runs only inside mirror_env"
        return await self.copy_watch.made(manager_uid, timeout=timeout)

    async def wait_copy(self, name: str, timeout: float = 30) -> tuple[str, Obj]:
        """(worker, copy) once a worker holds a copy of manager Job ``name``."""
        async def probe() -> tuple[str, Obj] | None:
            job = await self.get(name)
            if job is None:
                return None
            copies = await self.copies(job["metadata"]["uid"])
            return next(iter(copies.items()), None)

        return await wait_for(probe, timeout=timeout, what=f"a copy of {name} on a worker")  # type: ignore[no-any-return]

    async def wait_condition(self, name: str, ctype: str, timeout: float = 60) -> Obj:
        async def probe() -> Obj | None:
            j = await self.get(name)
            return j if cond(j, ctype) == "True" else None

        try:
            return await wait_for(probe, timeout=timeout, what=f"{name} {ctype}=True")  # type: ignore[no-any-return]
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{await self.story(name)}") from None

    async def story(self, name: str) -> str:
        """Where manager Job ``name`` stands, for a failed wait: its placement, conditions, events and
        copies (a flake under load then says which step it stopped at)."""
        job = await self.get(name)
        if job is None:
            return f"{name}: not on the manager"
        md, st = job["metadata"], job.get("status") or {}
        conditions = [(c.get("type"), c.get("status"), c.get("reason")) for c in st.get("conditions") or []]
        lines = [f"{name}: annotations {md.get('annotations') or {}}", f"  conditions {conditions}",
                 f"  counters active={st.get('active')} ready={st.get('ready')} succeeded={st.get('succeeded')} "
                 f"failed={st.get('failed')}"]
        lines += [f"  event {e.get('reason')}: {e.get('message')}" for e in await self.events(name)]
        for worker, copy in (await self.copies(md["uid"])).items():
            cst = copy.get("status") or {}
            lines.append(f"  copy on {worker}: active={cst.get('active')} succeeded={cst.get('succeeded')} "
                         f"conditions {[c.get('type') for c in cst.get('conditions') or []]}")
        return "\n".join(lines)

    async def wait_gone(self, name: str, client: ClusterClient | None = None, timeout: float = 30) -> None:
        async def probe() -> bool:
            return await self.get(name, client) is None

        await wait_for(probe, timeout=timeout, what=f"{name} deleted on {(client or self.manager).name}")

    async def events(self, name: str) -> list[Obj]:
        items, _ = await self.manager.list_all(EVENTS, self.ns, field_selector=f"involvedObject.name={name}")
        return items

    async def wait_event(self, name: str, reason: str, timeout: float = 30) -> Obj:
        async def probe() -> Obj | None:
            return next((e for e in await self.events(name) if e["reason"] == reason), None)

        return await wait_for(probe, timeout=timeout, what=f"event {reason} on {name}")  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def mirror_env(
    client_for: Callable[[ClusterSpec], Awaitable[ClusterClient]],
    cluster: Callable[[ClusterSpec], LocalCluster],
    ns: str,
    *,
    workers: tuple[ClusterSpec, ...] = (WORKER_1, WORKER_2),
    manager_spec: ClusterSpec = MANAGER,
    **config: Any,
) -> AsyncIterator[MirrorEnv]:
    manager = await client_for(manager_spec)
    wclients = {s.name: await client_for(s) for s in workers}
    for c in (manager, *wclients.values()):
        await ensure_namespace(c, ns)
    clusters = {s.name: cluster(s) for s in (manager_spec, *workers)}
    settings: dict[str, Any] = {
        "workers": [Worker(name=s.name, kubeconfig=clusters[s.name].kubeconfig) for s in workers],
        "manager_kubeconfig": clusters[manager_spec.name].kubeconfig,
        "namespaces": [ns],
        "origin": f"o-{ns}",
        "resync_period": 2.0,
        "gc_interval": 2.0,
        "worker_lost_timeout": 600.0,
        "health_probe_interval": 0.5,
        "metrics_address": "",
        **config,
    }
    env = MirrorEnv(ns, settings["origin"], manager, wclients, clusters, Config(**settings))
    root = logging.getLogger()
    root.addHandler(env.trap)
    try:
        async with CopyRecorder(wclients, ns) as env.copy_watch:
            yield env
            while env.controllers:
                await env.stop()
        env.check_clean()
    finally:
        root.removeHandler(env.trap)
        while env.controllers:
            with contextlib.suppress(Exception):  # already failing: stop the rest, keep the first error
                await env.stop()
