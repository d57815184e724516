"""The one place that pins what the cluster bed builds.

Bump a version here and every cache key, build and test follows.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Kubernetes release the bed runs by default (JobManagedBy is GA and locked on since 1.35).
KUBE_VERSION = "1.35.4"
#: An older minor for version-skew tests (1.30: JobManagedBy and JobSuccessPolicy are alpha,
#: off). Its Job controller writes Complete/Failed directly
#: without SuccessCriteriaMet/FailureTarget when JobManagedBy is off there.
OLD_KUBE_VERSION = "1.30.14"
#: etcd paired with Kubernetes 1.35 by kubeadm.
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
