"""The one place that pins what the cluster bed builds.

Bump a version here and every cache key, build and test follows.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Kubernetes release the bed, the demo and the kind tier run by default: the newest served here.
KUBE_VERSION = "1.37.2"
#: The oldest release we support, for manager and workers alike. 1.33 is the first where every
#: Job field a newer manager's Job may carry and a worker must honour is served and on by default
#: (successPolicy and backoffLimitPerIndex GA; podReplacementPolicy beta, on), and where
#: JobManagedBy (beta, on since 1.32) lets a manager hand its Jobs to us. The patch is the newest whose
#: staging modules (k8s.io/*@v0.33.x) the module proxy here serves in full: 1.33.6-1.33.12 each miss
#: some (403), so they cannot be built.
OLDEST_SUPPORTED_KUBE_VERSION = "1.33.5"
#: Every release of the matrix (``python -m bench versions``), oldest first: one patch per minor.
#: 1.36 starts at 1.36.2: 1.36.0-1.36.1 refuse the scheduling-directive rewrite of a suspended,
#: never-started Job until JobSuspended=True (kubernetes#139281, fixed in 1.36.2).
SUPPORTED_KUBE_VERSIONS = ("1.33.5", "1.34.4", "1.35.4", "1.36.4", "1.37.2")
#: What ``make test`` runs besides the default (the matrix's corners): the oldest supported release,
#: as the manager of a default-release worker and as the worker of a default-release manager: both
#: directions of skew at its widest, from one more build (a corner on a release between them would
#: cost a build of its own on a fresh machine; ``python -m bench versions`` runs every pair).
CORNER_KUBE_VERSIONS = (OLDEST_SUPPORTED_KUBE_VERSION,)
#: What the corners' clusters in ``make test`` start (ClusterSpec.kube_commands; a unit test keeps
#: this true): the manager runs its API server and kcm (no nodes, so no scheduler), the worker also
#: the scheduler for its kwok nodes. Neither needs its own kubectl.
CORNER_KUBE_COMMANDS = {
    OLDEST_SUPPORTED_KUBE_VERSION: ("kube-apiserver", "kube-controller-manager", "kube-scheduler"),
}
#: A minor older than we support, for version-skew tests (1.30: JobManagedBy and JobSuccessPolicy
#: are alpha, off). Its Job controller writes Complete/Failed directly without
#: SuccessCriteriaMet/FailureTarget, and its API server prunes successPolicy: the mirror must still
#: land a valid status on the manager, and move a copy such a worker cannot run as written.
OLD_KUBE_VERSION = "1.30.14"
#: etcd for every Kubernetes version of the bed (kubeadm pairs 3.6 with 1.33-1.36 and 3.7.0 with
#: 1.37; 1.37.2's API server runs on 3.6.16 in every test here, so one etcd build serves all).
ETCD_VERSION = "3.6.16"
#: kwok / kwokctl (fake nodes, pod stages, binary-runtime cluster management).
KWOK_VERSION = "0.7.0"
#: Helm (v3), built from its Go module: renders and lints deploy/helm/jobmirror, installs it on kind.
HELM_VERSION = "3.20.0"
#: Prometheus Operator, for its CRDs only (PrometheusRule, ServiceMonitor): downloaded from its Go
#: module, nothing built; the monitoring test validates deploy/monitoring against them server-side.
#: (promtool is not built: cmd/promtool links every service-discovery SDK, >8 min cold here.)
PROMETHEUS_OPERATOR_VERSION = "0.85.0"
#: Kueue (MultiKueue) run beside jobmirror by ``bench compare``; the module proxy here serves
#: v0.19.2 only (newer tags answer 403). Built from its Go module, never committed.
KUEUE_VERSION = "0.19.2"
#: JobSet (``jobset.x-k8s.io/v1alpha2``), the second kind jobmirror mirrors: its controller runs in
#: the bed's manager and workers (clusterbed/jobset.py). v0.12.0 is the newest the module proxy here
#: serves; built from its Go module (about 14 min cold on 2 busy cores), never committed.
JOBSET_VERSION = "0.12.0"


def cache_root() -> Path:
    """Built binaries live outside the repository so a fresh clone reuses them."""
    base = os.environ.get("JOBMIRROR_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "jobmirror"
    )
    return Path(base)

# -- the kind tier (kindbed/): node image, kind itself and the node's tools ------------------
#: kind, built from its Go module (its images/base files are the node image's layout).
KIND_VERSION = "0.33.0"
#: crictl in the node image (v1.35.0 is not served by the module proxy; v1.36.0 is).
CRICTL_VERSION = "1.36.0"
#: CoreDNS image built from its Go module, tagged as kubeadm asks for it.
COREDNS_VERSION = "1.13.1"
#: Bump when the node/base image recipe (kindbed/images.py) changes in a way that needs a rebuild.
KIND_IMAGE_RECIPE = "1"
