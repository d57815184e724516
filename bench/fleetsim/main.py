"""``python -m bench.fleetsim``: a simulated fleet, one manager and N workers, served over HTTPS.

Starts every cluster's API server in this one process (each on its own 127.0.0.1 port), seeds the
workers' nodes and background pods, writes ``DIR/manager.kubeconfig``, ``DIR/worker-<i>.kubeconfig``
and then ``DIR/ready.json``; serves until SIGTERM or SIGINT, then exits 0. A simulation: the
figures of a controller run against it are the controller's own, not a real API server's.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import logging
import math
import os
import signal
import ssl
import sys
import time
from pathlib import Path

import yaml

from bench.fleetsim.jobsim import JobSim
from bench.fleetsim.kinds import NAMESPACES, NODES, PRIORITY_CLASSES
from bench.fleetsim.server import VERSION, Cluster, FleetServer
from bench.fleetsim.store import Store
from kruntime.resources import Obj
from mirror.inspect.tls import self_signed

BACKGROUND_NAMESPACE = "fleet-background"
SYSTEM_NAMESPACES = ("kube-system", "default", "kube-public", "kube-node-lease")
#: where a deployed controller lives on the manager (its leader-election Lease goes there)
CONTROLLER_NAMESPACE = "jobmirror-system"
#: background pods per node when --nodes-per-worker is not given (leaves room for the Jobs' pods)
PODS_PER_NODE = 150



def say(msg: str) -> None:
    print(f"[fleetsim {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.fleetsim", description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2, help="worker clusters (default 2)")
    p.add_argument("--pods-per-worker", type=int, default=200, help="background pods on each worker (default 200)")
    p.add_argument("--nodes-per-worker", type=int, default=0,
                   help=f"nodes of each worker (default: one per {PODS_PER_NODE} background pods, at least 3)")
    p.add_argument("--run-seconds", type=float, default=5.0,
                   help="how long a worker runs a Job unless its fleetsim.jobmirror.dev/run-seconds says (default 5)")
    p.add_argument("--dir", type=Path, required=True, help="where the kubeconfigs and ready.json are written")
    p.add_argument("--history", type=int, default=50_000,
                   help="watch events each cluster keeps; a watch from older is 410 Expired (default 50000)")
    p.add_argument("--bookmark-seconds", type=float, default=60.0, help="between two watch bookmarks (default 60)")
    args = p.parse_args(argv)
    if args.workers < 1 or args.pods_per_worker < 0:
        p.error("--workers must be at least 1 and --pods-per-worker not negative")
    if args.nodes_per_worker <= 0:
        args.nodes_per_worker = max(3, math.ceil(args.pods_per_worker / PODS_PER_NODE))
    return args


def node(name: str, pod_slots: int) -> Obj:
    """A Ready, untainted node; allocatable and capacity alike."""
    room = {"cpu": "64", "memory": "256Gi", "pods": str(pod_slots), "ephemeral-storage": "1Ti"}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64", "type": "fleetsim"}},
            "spec": {},
            "status": {"capacity": room, "allocatable": room, "phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "fleetsim node is ready"}],
                       "nodeInfo": {"kubeletVersion": VERSION, "operatingSystem": "linux", "architecture": "amd64"}}}


def seed_cluster(store: Store) -> None:
    """What every cluster has: the system namespaces (kube-system's uid is the cluster's identity) and
    the built-in PriorityClasses."""
    for ns in SYSTEM_NAMESPACES:
        store.create(NAMESPACES, None, {"metadata": {"name": ns}})
    for name, value in (("system-cluster-critical", 2_000_000_000), ("system-node-critical", 2_000_001_000)):
        store.create(PRIORITY_CLASSES, None, {"metadata": {"name": name}, "value": value,
                                              "description": "built in", "preemptionPolicy": "PreemptLowerPriority"})


def seed_worker(store: Store, nodes: int, pods: int) -> list[str]:
    """A worker's nodes and background pods; the node names."""
    names = [f"fleet-node-{i:04d}" for i in range(1, nodes + 1)]
    slots = max(250, math.ceil(pods / max(1, nodes)) + 100)
    for name in names:
        store.create(NODES, None, node(name, slots), keep_status=True)
    store.create(NAMESPACES, None, {"metadata": {"name": BACKGROUND_NAMESPACE}})
    if pods:
        store.add_background(BACKGROUND_NAMESPACE, pods, names)
    return names


def kubeconfig(name: str, url: str, ca_pem: bytes) -> str:
    """A kubeconfig as a cluster's would be: an https server and its CA. Over plain HTTP the client
    library gives no CA to the SSL context it makes anyway, which then loads the system's CA bundle
    (23.9 ms against 0.3 ms): ~150 contexts stalled a 50-worker start 3 s, a cost no user pays."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": url,
                                                "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": "fleetsim", "user": {"token": "fleetsim"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "fleetsim"}}],
    }, sort_keys=False)


def server_tls(where: Path, cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """The servers' TLS context from a self-signed certificate (its files written beside the kubeconfigs)."""
    cert, key = where / "fleetsim.crt", where / "fleetsim.key"
    cert.write_bytes(cert_pem)
    key.touch(mode=0o600)
    key.write_bytes(key_pem)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def build(args: argparse.Namespace) -> tuple[list[Cluster], dict[str, JobSim]]:
    """Every cluster's store, seeded; a fake Job controller per worker."""
    clusters = [Cluster("manager", Store("manager", history=args.history))]
    seed_cluster(clusters[0].store)
    clusters[0].store.create(NAMESPACES, None, {"metadata": {"name": CONTROLLER_NAMESPACE}})
    sims: dict[str, JobSim] = {}
    t0 = time.monotonic()
    for i in range(1, args.workers + 1):
        name = f"worker-{i}"
        store = Store(name, history=args.history)
        seed_cluster(store)
        nodes = seed_worker(store, args.nodes_per_worker, args.pods_per_worker)
        sims[name] = JobSim(store, nodes, run_seconds=args.run_seconds)
        clusters.append(Cluster(name, store))
        if i == args.workers or i % 10 == 0 or args.workers <= 10:
            say(f"seeded {i}/{args.workers} workers: {i * args.pods_per_worker} background pods on "
                f"{args.nodes_per_worker} nodes each ({time.monotonic() - t0:.1f}s)")
    return clusters, sims


async def serve(args: argparse.Namespace) -> int:
    args.dir.mkdir(parents=True, exist_ok=True)
    clusters, sims = build(args)
    server = FleetServer(clusters, bookmark_interval=args.bookmark_seconds,
                         stats=lambda: {"jobsim": {n: s.describe() for n, s in sims.items()}})
    ca_pem, key_pem = self_signed("fleetsim", ["127.0.0.1"])
    await server.start(tls=server_tls(args.dir, ca_pem, key_pem))
    tasks = [asyncio.create_task(s.run(), name=f"jobsim-{n}") for n, s in sims.items()]
    for c in clusters:
        write_atomically(args.dir / f"{c.name}.kubeconfig", kubeconfig(c.name, c.url, ca_pem))
    ready = {"manager": clusters[0].url, "workers": {c.name: c.url for c in clusters[1:]}, "pid": os.getpid(),
             "pods": args.workers * args.pods_per_worker, "nodesPerWorker": args.nodes_per_worker,
             "simulation": True}
    write_atomically(args.dir / "ready.json", json.dumps(ready, indent=1))
    say(f"ready: manager {clusters[0].url}, {args.workers} workers, {ready['pods']} background pods; "
        f"stats at {clusters[0].url}/_fleetsim/stats")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    say("stopping")
    for t in tasks:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await t
    await server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[fleetsim %(asctime)s] %(message)s")
    try:
        import uvloop
    except ImportError:
        return asyncio.run(serve(args))
    return uvloop.run(serve(args))
