"""``jobmirror-builtin``: run the builtin Job controller against one cluster.

Meant for clusters where kube-controller-manager's Job controller is absent or disabled
(``--controllers=*,-job-controller``); running both would make two controllers fight over
every Job.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from builtin_controller import metrics
from builtin_controller.controller import JobController
from kruntime.client import ClusterClient, KubeconfigError
from kruntime.helpformat import DefaultsHelpFormatter
from kruntime.httpserver import HealthServer
from kruntime.lifecycle import add_logging_args, run_controller, run_until_signalled, setup_logging_from
from mirror import __version__

log = logging.getLogger("builtin_controller")


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``jobmirror-builtin``."""
    p = argparse.ArgumentParser(prog="jobmirror-builtin", description=__doc__.splitlines()[0],
                                formatter_class=DefaultsHelpFormatter)
    p.add_argument("--version", action="version", version=f"jobmirror-builtin {__version__}")
    p.add_argument("--kubeconfig", required=True, help="kubeconfig of the cluster to run Jobs in")
    p.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    p.add_argument("--metrics-address", default="0.0.0.0:8080",
                   help="host:port for /metrics, /healthz and /readyz (port 0 picks one)")
    p.add_argument("--workers", type=int, default=5, help="concurrent Job syncs (kube-controller-manager: 5)")
    p.add_argument("--qps", type=float, default=50.0, help="client QPS limit (<=0: unlimited)")
    p.add_argument("--burst", type=int, default=100, help="client burst")
    p.add_argument("--namespace", default=None, help="only manage Jobs in this namespace (default: all)")
    p.add_argument("--component", default="job-controller", help="event source component name")
    p.add_argument("--shutdown-grace", type=float, default=10.0, help="seconds to finish in-flight syncs on SIGTERM")
    add_logging_args(p)
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = build_parser()
    args = p.parse_args(argv)
    if args.workers < 1:
        p.error("--workers must be at least 1")
    return args


async def run(args: argparse.Namespace) -> int:
    try:
        client = await ClusterClient.from_kubeconfig("cluster", args.kubeconfig, context=args.context, qps=args.qps,
                                                     burst=args.burst)
    except KubeconfigError as exc:
        log.error("%s", exc)
        return 2
    controller = JobController(client, workers=args.workers, component=args.component, namespace=args.namespace)
    server = HealthServer(args.metrics_address, liveness=controller.liveness, readiness=controller.readiness)

    async def on_signal(task: asyncio.Task[None]) -> None:
        log.info("shutting down (grace %.0fs)", args.shutdown_grace)
        await controller.stop(args.shutdown_grace)

    try:
        await server.start()
        ended = await run_until_signalled(controller.start(), on_signal)
        if ended is not None:
            log.error("controller exited unexpectedly: %s", ended.exception())
            return 1
        return 0
    finally:
        await server.stop()
        await client.close()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    setup_logging_from(args)
    try:
        code = run_controller(run(args), loop_lag=metrics.EVENT_LOOP_LAG,
                              report_stalls_over=args.report_stalls_over)
    except OSError as exc:  # a metrics port in use, an unreadable file: one line, no traceback
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
