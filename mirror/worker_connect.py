"""Connecting the configured workers at start: one :class:`WorkerCluster` per entry, and each
admitted by its cluster identity (or held until it can be read)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from kubernetes_asyncio.client import Configuration

from kruntime.client import ClusterClient, KubeconfigError
from kruntime.identity import IdentityUnavailable, read_identity
from mirror.config import Config, ConfigError, Worker, cluster_conflicts
from mirror.kinds import MirroredKind
from mirror.naming import FIELD_MANAGER
from mirror.workers import WorkerCluster

log = logging.getLogger(__name__)


async def worker_identity(client: ClusterClient) -> str | IdentityUnavailable:
    """A worker's identity, or why it could not be read (one quick attempt: an unreachable
    worker must not hold up the start; it is held and asked again, see MirrorController._admit)."""
    try:
        return await read_identity(client, attempts=1)
    except IdentityUnavailable as exc:
        return exc


async def connect_worker(cfg: Config, wcfg: Worker, kinds: Sequence[MirroredKind], *, origin: str,
                         manager_cluster: str, slow_slots: asyncio.Semaphore) -> WorkerCluster:
    """The worker of entry ``wcfg``; an unusable kubeconfig leaves it unhealthy with the reason."""
    broken: str | None = None
    try:
        client = await ClusterClient.from_kubeconfig(wcfg.name, wcfg.kubeconfig, context=wcfg.context,
                                                     qps=wcfg.qps, burst=wcfg.burst,
                                                     timeout=cfg.request_timeout, field_manager=FIELD_MANAGER)
    except KubeconfigError as exc:
        # One bad kubeconfig (a broken Secret) must not stop the mirroring to the other
        # workers: this one stays unhealthy with the reason, and is never contacted.
        broken = f"unusable kubeconfig: {exc}"
        log.error("worker %s: %s; it stays unhealthy until restarted with a fixed kubeconfig", wcfg.name, broken)
        client = ClusterClient.from_configuration(wcfg.name, Configuration(host="https://unusable.invalid"))
    # Each worker may hold at most 3/4 of the reconcile slots: a hung one cannot stall the rest;
    # slow ones together hold at most a quarter.
    return WorkerCluster(wcfg, client, kinds=list(kinds), origin=origin, probe_interval=cfg.health_probe_interval,
                         max_in_flight=max(2, cfg.workers_concurrency * 3 // 4), config_error=broken,
                         slow_after=cfg.slow_call_seconds, slow_slots=slow_slots, manager_cluster=manager_cluster,
                         watch_client=client.sibling("watch", pool_size=len(kinds) + 5, qps=50, burst=100))


async def admit_workers(cfg: Config, workers: dict[str, WorkerCluster], manager_cluster: str) -> None:
    """Read every worker's identity once: two entries of one cluster (or of the manager, unless
    intended) are a configuration error; a worker whose identity cannot be read yet is held."""
    read = {w.name: None if w.config_error else await worker_identity(w.client) for w in workers.values()}
    identities = {name: ident if isinstance(ident, str) else None for name, ident in read.items()}
    problems = cluster_conflicts(manager_cluster, identities, origin=cfg.origin)
    if problems:
        raise ConfigError("invalid worker list:\n  " + "\n  ".join(problems))
    for w in workers.values():
        ident = read[w.name]
        if isinstance(ident, str):
            w.admit(ident, is_manager=ident == manager_cluster)
        elif ident is not None:
            # Unknown: it may be the cluster of another entry (or the manager). Used only once
            # its identity is read and checked, so two entries never delete each other's copies.
            w.hold(f"cluster identity not verified yet: {ident}")
            log.warning("worker %s held until its cluster identity can be read: %s", w.name, ident)
