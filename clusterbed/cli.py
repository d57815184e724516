"""``python -m clusterbed.cli``: bring the local manager + workers up, show them, take them down."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from pathlib import Path

from clusterbed import versions
from clusterbed.cluster import DEFAULT_SPECS, BedError, ClusterBed, ClusterSpec, LocalCluster


def default_workdir() -> Path:
    return versions.cache_root() / "bed"


def _attach(workdir: Path) -> ClusterBed:
    """Re-open a bed created by an earlier ``up`` (clusters outlive the command)."""
    bed = ClusterBed(workdir)
    state = workdir / "bed.json"
    if state.exists():
        for raw in json.loads(state.read_text()):
            spec = ClusterSpec(**{**raw, "extra_args": tuple(raw.get("extra_args", ()))})
            bed.clusters[spec.name] = LocalCluster(spec, bed)
    return bed


def _save(bed: ClusterBed) -> None:
    from dataclasses import asdict

    (bed.workdir / "bed.json").write_text(json.dumps([asdict(c.spec) for c in bed.clusters.values()], indent=2))


def health(cluster: LocalCluster) -> str:
    try:
        proc = cluster.kubectl("get", "--raw", "/readyz", check=False)
        ready = proc.stdout.strip() == "ok"
        nodes = cluster.kubectl("get", "nodes", "-o", "name", check=False).stdout.split()
        ver = json.loads(cluster.kubectl("version", "-o", "json", check=False).stdout or "{}")
        sv = ver.get("serverVersion", {}).get("gitVersion", "?")
        return f"{'healthy' if ready else 'NOT READY'}  {sv}  nodes={len(nodes)}  {cluster.server_url()}"
    except (OSError, ValueError, urllib.error.URLError) as exc:
        return f"unreachable: {exc}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m clusterbed.cli", description="Local Kubernetes clusters for jobmirror.")
    p.add_argument("--workdir", type=Path, default=default_workdir())
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start manager, worker-1, worker-2 (idempotent)")
    up.add_argument("--builtin-worker", action="store_true",
                    help="run worker-2 with kube-controller-manager's Job controller disabled "
                         "(our builtin controller owns Jobs there)")
    sub.add_parser("down", help="stop and delete every cluster of the bed")
    sub.add_parser("status", help="print each cluster's health and kubeconfig")
    args = p.parse_args(argv)

    bed = _attach(args.workdir)
    try:
        if args.cmd == "up":
            specs = list(DEFAULT_SPECS)
            if args.builtin_worker:
                specs[2] = ClusterSpec("worker-2", job_controller=False, nodes=2)
            for s in specs:
                if s.name in bed.clusters:
                    print(f"{s.name}: already up")
                    continue
                bed.create(s)
                _save(bed)
        elif args.cmd == "down":
            bed.down()
            print("bed down")
            return 0
        for name, c in bed.clusters.items():
            print(f"{name:10s} {health(c)}\n           kubeconfig: {c.kubeconfig}")
    except BedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
