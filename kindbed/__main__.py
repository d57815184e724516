"""``python -m kindbed``: the kind tier's engine, images and clusters, one step or all of them.

    python -m kindbed engine up|down     # use/start a Docker engine; stop only the one we started
    python -m kindbed images             # build (or find) node, controller and workload images
    python -m kindbed up [--workers 2] [--no-jobs-cluster]  # engine + images + clusters + deploy/
    python -m kindbed env                # shell lines to use it: eval "$(python -m kindbed env)"
    python -m kindbed down [--stop-engine]
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from kindbed import clusters, engine, images


def _options(args: argparse.Namespace) -> clusters.KindOptions:
    kw = {"prefix": args.prefix, "workers": args.workers, "image": args.image, "node_image": args.node_image,
          "python_image": args.python_image, "no_jobs_cluster": getattr(args, "no_jobs_cluster", False),
          "jobsets": not getattr(args, "no_jobsets", False), "await_jobset": True}
    if args.workdir:
        kw["workdir"] = args.workdir
    return clusters.KindOptions(**kw)


def env_lines(dep: clusters.KindDeployment) -> str:
    """What a shell needs to use the deployment as the README's quick start does: the manager as
    the current cluster, the kubectl kind used and our plugin on PATH, and an image every cluster
    already holds (nothing has to be pulled)."""
    path = os.pathsep.join(dict.fromkeys([str(Path(dep.kubectl).parent), str(Path(sys.executable).parent)]))
    return "\n".join([f"export KUBECONFIG={shlex.quote(dep.manager_kubeconfig)}",
                      f"export PATH={shlex.quote(path)}:\"$PATH\"",
                      f"export IMAGE={shlex.quote(dep.workload_image)}"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kindbed", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prefix", default="jobmirror", help="kind cluster name prefix (default jobmirror)")
    p.add_argument("--workers", type=int, default=1, choices=(1, 2),
                   help="1: manager (also a worker, KEP-4368 Story 1) + worker-1; 2: manager + worker-1 + worker-2")
    p.add_argument("--image", default="jobmirror:e2e", help="controller image reference, with a tag")
    p.add_argument("--node-image", default=os.environ.get("JOBMIRROR_KIND_NODE_IMAGE") or None,
                   help="use this kind node image (e.g. kindest/node:v1.37.0) instead of building one "
                        "(env JOBMIRROR_KIND_NODE_IMAGE)")
    p.add_argument("--python-image", default=os.environ.get("JOBMIRROR_KIND_PYTHON_IMAGE") or None,
                   help="base for the controller image instead of the locally built Debian python3 "
                        "(env JOBMIRROR_KIND_PYTHON_IMAGE, e.g. python:3.11-slim-bookworm)")
    p.add_argument("--workdir", type=Path,
                   help="kubeconfigs, overlay, deployment.json (default ~/.cache/jobmirror/kind)")
    sub = p.add_subparsers(dest="cmd", required=True)
    eng = sub.add_parser("engine", help="ensure (up) or stop (down) the Docker engine")
    eng.add_argument("action", choices=("up", "down"))
    sub.add_parser("images", help="build or find every image")
    up = sub.add_parser("up", help="everything up, controller deployed; clusters are kept until `down`")
    up.add_argument("--no-jobs-cluster", action="store_true",
                    help="also <prefix>-no-jobs: kube-controller-manager without its Job controller, for the "
                         "kind differential of the builtin controller (e2e/test_kind_differential.py)")
    up.add_argument("--no-jobsets", action="store_true",
                    help="do not install JobSet in the clusters nor mirror it (by default JobSet's controller, "
                         "built from its Go module, runs in every cluster and the config has kinds [Job, JobSet])")
    sub.add_parser("env", help="print export lines for a shell: KUBECONFIG (the manager), PATH (kubectl, "
                               "kubectl-jobmirror) and IMAGE (the busybox loaded into every cluster)")
    down = sub.add_parser("down", help="delete the clusters of --prefix")
    down.add_argument("--stop-engine", action="store_true", help="also stop dockerd if we started it")
    args = p.parse_args(argv)
    try:
        if args.cmd == "engine":
            if args.action == "up":
                print(engine.describe(engine.ensure_engine()))
                engine.ensure_host_packages()
            else:
                print("stopped the dockerd we started" if engine.stop_engine() else "no dockerd of ours is running")
        elif args.cmd == "images":
            engine.ensure_engine()
            engine.ensure_host_packages()
            print(images.ensure_images(args.image, node=args.node_image, python_image=args.python_image))
        elif args.cmd == "up":
            dep = clusters.up(_options(args))
            print(f"manager kubeconfig: {dep.manager_kubeconfig}")
            for name, kc in dep.worker_kubeconfigs.items():
                print(f"worker {name}: {kc}")
            print(f"run the e2e suite against it: JOBMIRROR_E2E_PROVIDER=kind JOBMIRROR_E2E_KIND_WORKDIR={dep.workdir} "
                  f".venv/bin/pytest -m e2e e2e")
        elif args.cmd == "env":
            workdir = _options(args).workdir
            if not (workdir / "deployment.json").is_file():
                print(f"error: no kind deployment in {workdir}: run `python -m kindbed up` first", file=sys.stderr)
                return 1
            print(env_lines(clusters.KindDeployment.load(workdir)))
        elif args.cmd == "down":
            clusters.down(_options(args), stop_engine=args.stop_engine)
    except (engine.EngineError, images.ImageError, clusters.KindError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
