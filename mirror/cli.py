"""``jobmirror``: run the controller, validate a config; and the ``kubectl jobmirror`` verbs (mirror/inspect/)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from kruntime.client import ApiError, ClusterClient, KubeconfigError, load_incluster, load_kubeconfig
from kruntime.helpformat import use_defaults_help
from kruntime.identity import IdentityUnavailable, read_identity
from kruntime.lifecycle import (
    add_logging_args,
    cancel_and_wait,
    run_controller,
    run_until_signalled,
    setup_logging_from,
)
from kruntime.resources import JOBS
from mirror import __version__, metrics
from mirror.config import Config, ConfigError, cluster_conflicts, load_config
from mirror.identity import selector
from mirror.inspect import plugin
from mirror.inspect.reads import NotPlaced
from mirror.naming import LABEL_ORIGIN, LEGACY_DEFAULT_ORIGIN, default_origin

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
        ident: str | None = None
        try:
            v = await client.request("GET", "/version")
            try:
                ident = await read_identity(client, attempts=1)
            except IdentityUnavailable as exc:  # run needs it too: say so now
                problems.append(f"{name}: {exc}")
            print(f"  {name:12s} ok  {v.get('gitVersion')}  {client.host}  identity {ident or 'unreadable'}")
            if ident is not None and cfg.origin is None:
                await _warn_legacy_copies(client, name)
        except ApiError as exc:
            problems.append(f"{name}: kubeconfig {path} loads but the cluster does not answer: {exc}")
            continue
        finally:
            await client.close()
        if ident is None:
            continue
        if i == 0:
            manager = ident
        else:
            identities[name] = ident
    print(f"  {'origin':12s} {origin_line(cfg.origin, manager)}")
    if manager:
        problems += cluster_conflicts(manager, identities, origin=cfg.origin)
    return problems


def origin_line(configured: str | None, manager: str | None) -> str:
    """The origin the controller would stamp on its copies, and where it comes from."""
    if configured:
        return f"{configured} (set in the config)"
    if manager:
        return f"{default_origin(manager)} (the default: jobmirror-<manager cluster identity>)"
    return "unknown: the default is derived from the manager cluster's identity, which could not be read"


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (a server's reply may span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


async def _warn_legacy_copies(client: ClusterClient, name: str) -> None:
    """Copies made under the old default origin, which an unset ``origin`` no longer claims: the
    controller would report their Jobs as NameCollision. Said before it happens."""
    try:
        found = await client.list(JOBS, None, label_selector=selector(LEGACY_DEFAULT_ORIGIN), limit=1)
    except ApiError as exc:
        print(f"warning: {name}: could not look for copies with the old default origin: {exc}", file=sys.stderr)
        return
    items = found.get("items") or []
    if items:
        md = items[0]["metadata"]
        print(f"warning: {name} holds copies with {LABEL_ORIGIN}={LEGACY_DEFAULT_ORIGIN} (e.g. {md['namespace']}/"
              f"{md['name']}), the default origin before jobmirror-<manager cluster>; this config leaves origin "
              f"unset, so the controller would not recognise them and report their Jobs as NameCollision: set "
              f"`origin: {LEGACY_DEFAULT_ORIGIN}` to keep managing them", file=sys.stderr)


def _plugin_parser(sub: Any) -> None:
    """The verbs ``kubectl jobmirror`` has: status, describe, logs, queue (kubectl's flags)."""
    st = sub.add_parser("status", help="mirrored Jobs (and JobSets, a table of their own) with their worker and "
                                       "state (and, with --config, each worker's health)")
    plugin.add_kube_flags(st)
    st.add_argument("--kind", choices=["job", "jobset"], help="only this kind (default: every kind the manager "
                                                               "serves; JobSets shown when there are any)")
    st.add_argument("-A", "--all-namespaces", action="store_true", help="Jobs of every namespace")
    st.add_argument("--worker", help="only Jobs placed on this worker")
    st.add_argument("--state", help="only Jobs in this state (Pending, Running, Suspended, Complete, Failed)")
    st.add_argument("-o", "--output", choices=["json", "yaml", "wide"], help="output format (default: a table)")
    de = sub.add_parser("describe", help="placement and why, the copy, its pods and events, side by side with "
                                         "the manager Job")
    plugin.add_kube_flags(de)
    de.add_argument("job", metavar="[TYPE/]NAME", help="the manager Job's name, or jobset/NAME for a JobSet")
    de.add_argument("-o", "--output", choices=["json", "yaml"], help="output format (default: text)")
    de.set_defaults(all_namespaces=False)
    lo = sub.add_parser("logs", help="logs of a pod of the Job's copy, fetched from its worker")
    plugin.add_kube_flags(lo)
    lo.add_argument("job", metavar="[TYPE/]NAME", help="the manager Job's name, or jobset/NAME for a JobSet")
    lo.add_argument("-c", "--container", help="the container (needed when the pod has several)")
    lo.add_argument("--replicated-job", metavar="NAME", help="a JobSet's replicatedJob: a pod of its Jobs (with "
                                                             "--index, of its Job of that index)")
    lo.add_argument("--index", type=int, help="the pod of this completion index (Indexed Jobs); with "
                                              "--replicated-job, the index of that replicatedJob's Job")
    lo.add_argument("-f", "--follow", action="store_true", help="stream the logs")
    lo.add_argument("--previous", action="store_true", help="the previous container instance's logs")
    lo.add_argument("--tail", type=int, help="only the last N lines")
    lo.set_defaults(all_namespaces=False)
    qu = sub.add_parser("queue", help="Jobs waiting in the manager, in the order they will be placed, with "
                                      "their tenant, priority, share and why they wait")
    plugin.add_kube_flags(qu)
    qu.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace's waiting Jobs (needs list "
                                                                        "jobs in every namespace)")
    qu.add_argument("--tenant", help="only this tenant's Jobs")
    qu.add_argument("-o", "--output", choices=["json", "yaml"], help="output format (default: a table)")


async def _plugin(args: argparse.Namespace) -> int:
    if args.verb == "status" and args.config is None and args.kubeconfig is None and DEFAULT_CONFIG.is_file():
        args.config = DEFAULT_CONFIG  # in the controller's Pod: as the controller sees it
    target = await plugin.connect(args)
    try:
        if args.verb == "status":
            return await plugin.status(target, args, print)
        if args.verb == "describe":
            return await plugin.describe(target, args, print)
        if args.verb == "queue":
            return await plugin.queue(target, args, print)

        def write(chunk: bytes) -> None:
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()

        return await plugin.logs(target, args, write)
    finally:
        await target.manager.close()


def config_schema_json() -> str:
    """The config file's JSON Schema, keyed as the YAML is written (camelCase)."""
    return json.dumps(Config.model_json_schema(by_alias=True), indent=2, sort_keys=True)


def package_version() -> str:
    """The package's version: ``mirror.__version__``, the one source (pyproject, image and chart carry it)."""
    return __version__


def build_parser(prog: str = "jobmirror") -> argparse.ArgumentParser:
    """The command line of ``jobmirror`` (or, with prog ``kubectl jobmirror``, of the plugin)."""
    p = argparse.ArgumentParser(prog=prog, description="Mirror batch/v1 Jobs claimed through spec.managedBy "
                                                       "into worker clusters.")
    p.add_argument("--version", action="version", version=f"{prog} {package_version()}")
    add_logging_args(p)
    sub = p.add_subparsers(dest="verb", required=True)
    if prog == "jobmirror":
        run = sub.add_parser("run", help="run the controller", description="Run the controller.")
        run.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="the config file")
        chk = sub.add_parser("check-config", help="validate the config file and every kubeconfig in it",
                             description="Validate the config file, then reach every cluster it names.")
        chk.add_argument("config", type=Path, help="the config file")
        sub.add_parser("config-schema", help="print the config file's JSON Schema (for editors and linters)",
                       description="Print the config file's JSON Schema (for editors and linters).")
    _plugin_parser(sub)
    return use_defaults_help(p)


def main(argv: list[str] | None = None, prog: str = "jobmirror") -> int:
    args = build_parser(prog).parse_args(argv)
    setup_logging_from(args)
    try:
        if args.verb in ("status", "describe", "logs", "queue"):
            return asyncio.run(_plugin(args))
        if args.verb == "config-schema":
            print(config_schema_json())
            return 0
        cfg = load_config(args.config)
        if args.verb == "check-config":
            print(f"{args.config}: configuration valid ({len(cfg.workers)} workers); checking clusters:")
            problems = asyncio.run(_check(cfg))
            for prob in problems:
                print(f"error: {prob}", file=sys.stderr)
            return 1 if problems else 0
        return run_controller(_run(cfg), loop_lag=metrics.EVENT_LOOP_LAG,
                              report_stalls_over=args.report_stalls_over)
    except (KubeconfigError, ConfigError, plugin.UsageError, NotPlaced) as exc:
        # A ConfigError has one line per problem; anything else (a kubeconfig's YAML error) is made one.
        for line in str(exc).splitlines() if isinstance(exc, ConfigError) else [one_line(exc)]:
            print(f"error: {line}", file=sys.stderr)
        return 2 if not isinstance(exc, NotPlaced) else 1
    except (ApiError, IdentityUnavailable, OSError) as exc:
        # What a user fixes outside the config (an unreachable cluster, an unreadable identity, a
        # missing certificate, a port in use): one line, no traceback.
        hint = f" (check every cluster with: jobmirror check-config {args.config})" if args.verb == "run" else ""
        print(f"error: {one_line(exc)}{hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def plugin_main() -> int:
    """``kubectl-jobmirror``: kubectl finds it on PATH and runs it as ``kubectl jobmirror``."""
    return main(prog="kubectl jobmirror")


if __name__ == "__main__":
    sys.exit(main())
