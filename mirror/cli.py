"""``jobmirror``: run the controller, show what it manages, validate a config."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

from jobapi.times import parse_time
from kruntime.client import ApiError, ClusterClient, KubeconfigError, load_incluster, load_kubeconfig
from kruntime.identity import IdentityUnavailable, read_identity
from kruntime.lifecycle import add_logging_args, cancel_and_wait, run_until_signalled, setup_logging_from
from kruntime.resources import Obj
from mirror.config import Config, ConfigError, cluster_conflicts, load_config
from mirror.job_kind import JOB_KIND
from mirror.kinds import MirroredKind
from mirror.naming import ANNOTATION_CLUSTER, FIELD_MANAGER

DEFAULT_CONFIG = Path("/etc/jobmirror/config.yaml")


async def _run(cfg: Config) -> int:
    from mirror.controller import MirrorController

    ctrl = MirrorController(cfg)

    async def on_signal(task: asyncio.Task[None]) -> None:
        await cancel_and_wait(task)  # run() stops the controller in its own finally
        await ctrl.stop()

    ended = await run_until_signalled(ctrl.run(), on_signal)
    if ended is not None:
        ended.result()  # an exception from the controller propagates, as before
    return 0


async def _check(cfg: Config) -> list[str]:
    """Load every kubeconfig, ask each cluster for /version and its identity; return the problems.

    The identities catch what the file alone cannot: two worker entries for one cluster.
    """
    problems: list[str] = []
    manager: str | None = None
    identities: dict[str, str | None] = {}
    targets: list[tuple[str, Path | None, str | None]] = [("manager", cfg.manager_kubeconfig, cfg.manager_context)]
    targets += [(w.name, w.kubeconfig, w.context) for w in cfg.workers]
    for i, (name, path, ctx) in enumerate(targets):
        try:
            kc = await load_kubeconfig(path, ctx) if path else await load_incluster()
        except KubeconfigError as exc:
            problems.append(f"{name}: {exc}")
            continue
        client = ClusterClient.from_configuration(name, kc, timeout=cfg.request_timeout)
        try:
            v = await client.request("GET", "/version")
            print(f"  {name:12s} ok  {v.get('gitVersion')}  {client.host}")
            ident = await read_identity(client, attempts=1)
        except ApiError as exc:
            problems.append(f"{name}: kubeconfig {path} loads but the cluster does not answer: {exc}")
            continue
        except IdentityUnavailable as exc:  # run needs it too: say so now
            problems.append(f"{name}: {exc}")
            continue
        finally:
            await client.close()
        if i == 0:
            manager = ident
        else:
            identities[name] = ident
    if manager:
        problems += cluster_conflicts(manager, identities, origin=cfg.origin)
    return problems


def _state(kind: MirroredKind, obj: Obj) -> str:
    held = kind.state(obj)
    if held is not None:
        return held
    ann = obj["metadata"].get("annotations") or {}
    if ANNOTATION_CLUSTER not in ann:
        return "Pending"
    return "Running"


def _last_sync(job: Obj, now: datetime) -> str:
    """Age of our last status write, from managedFields (no extra bookkeeping writes)."""
    times = [m.get("time") for m in job["metadata"].get("managedFields") or []
             if m.get("manager") == FIELD_MANAGER and m.get("subresource") == "status" and m.get("time")]
    if not times:
        return "-"
    t = parse_time(max(times))
    if t is None:
        return "-"
    return f"{(now - t).total_seconds():.0f}s"


async def _status(cfg: Config, kind: MirroredKind = JOB_KIND) -> int:
    mkc = await load_kubeconfig(cfg.manager_kubeconfig, cfg.manager_context) if cfg.manager_kubeconfig \
        else await load_incluster()
    manager = ClusterClient.from_configuration("manager", mkc, timeout=cfg.request_timeout)
    now = datetime.now(UTC)
    try:
        items, _ = await manager.list_all(kind.resource, None)
        claimed = [j for j in items if kind.claims(j, cfg)]
        print(f"{kind.name.upper():40s} {'WORKER':12s} {'STATE':10s} {'SUCCEEDED':>9s} {'FAILED':>6s} {'ACTIVE':>6s} "
              "LAST SYNC")
        for j in sorted(claimed, key=lambda x: (x["metadata"]["namespace"], x["metadata"]["name"])):
            st = j.get("status") or {}
            worker = (j["metadata"].get("annotations") or {}).get(ANNOTATION_CLUSTER, "-")
            name = f"{j['metadata']['namespace']}/{j['metadata']['name']}"
            print(f"{name:40s} {worker:12s} {_state(kind, j):10s} {st.get('succeeded', 0):>9} {st.get('failed', 0):>6} "
                  f"{st.get('active', 0):>6} {_last_sync(j, now)}")
        unfinished = sum(1 for j in claimed if not kind.is_finished(j))
        print(f"\n{len(claimed)} claimed {kind.name}s, {unfinished} unfinished\n")
    finally:
        await manager.close()
    print(f"{'WORKER':12s} {'HEALTH':10s} {'VERSION':10s} DETAIL")
    for w in cfg.workers:
        try:
            client = await ClusterClient.from_kubeconfig(w.name, w.kubeconfig, context=w.context,
                                                         timeout=min(cfg.request_timeout, 5))
        except KubeconfigError as exc:
            print(f"{w.name:12s} {'BROKEN':10s} {'-':10s} {exc}")
            continue
        try:
            await client.request("GET", "/readyz")
            v = await client.request("GET", "/version")
            print(f"{w.name:12s} {'healthy':10s} {v.get('gitVersion', '?'):10s} {client.host}")
        except ApiError as exc:
            print(f"{w.name:12s} {'UNHEALTHY':10s} {'-':10s} {exc}")
        finally:
            await client.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="jobmirror", description="Mirror managedBy Jobs into worker clusters.")
    add_logging_args(p)
    sub = p.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run the controller")
    run.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    st = sub.add_parser("status", help="claimed Jobs with their worker and state, and each worker's health")
    st.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    chk = sub.add_parser("check-config", help="validate the config file and every kubeconfig in it")
    chk.add_argument("config", type=Path)
    args = p.parse_args(argv)
    setup_logging_from(args)
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.cmd == "check-config":
            print(f"{args.config}: configuration valid ({len(cfg.workers)} workers); checking clusters:")
            problems = asyncio.run(_check(cfg))
            for prob in problems:
                print(f"error: {prob}", file=sys.stderr)
            return 1 if problems else 0
        if args.cmd == "status":
            return asyncio.run(_status(cfg))
        return asyncio.run(_run(cfg))
    except (KubeconfigError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
