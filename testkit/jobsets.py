"""JobSets on the bed, shared by the integration tests and the chaos scenarios: the one JobSet builder
(``make_jobset``: two replicatedJobs of kwok pods) and JobSet v0.12.0's controller started in a set of
bed clusters (``start_jobset_controllers``/``stop_jobset_controllers``, or the ``jobset_controllers``
context manager).

Starting a controller builds JobSet first when it is not cached (clusterbed.build.build_jobset): under
the build's lock, so a caller that gets there while ``make test``'s beside-build runs waits for that
build instead of starting a second one. A failed build raises (BuildError/JobSetBedError); nothing
here skips.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from clusterbed.build import build_jobset
from clusterbed.cluster import LocalCluster
from clusterbed.jobset import JobSetController
from kruntime.resources import Obj
from mirror.naming import DEFAULT_CONTROLLER_NAME
from testkit.jobs import make_job

#: the label (and annotation) JobSet's controller puts on each child Job and its pods: the JobSet's uid
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
#: replicatedJob name -> (replicas, parallelism = completions) of :func:`make_jobset`
SHAPE = {"leader": (1, 1), "workers": (2, 2)}
#: pods one :func:`make_jobset` JobSet runs at once
PODS = sum(r * p for r, p in SHAPE.values())


def make_jobset(name: str, *, managed_by: str | None = DEFAULT_CONTROLLER_NAME, outcome: str = "succeed",
                duration_ms: int = 500, namespace: str | None = None, labels: dict[str, str] | None = None,
                pod_labels: dict[str, str] | None = None, pod_annotations: dict[str, str] | None = None,
                **extra_spec: Any) -> Obj:
    """Two replicatedJobs, ``leader`` 1 x 1 and ``workers`` 2 x 2 pods (:data:`SHAPE`), each pod ending with
    ``outcome`` after ``duration_ms`` on kwok; ``extra_spec`` goes into the JobSet's spec (failurePolicy …)."""
    def rjob(rname: str, replicas: int, parallelism: int) -> Obj:
        spec = make_job(rname, managed_by=None, completions=parallelism, parallelism=parallelism, outcome=outcome,
                        duration_ms=duration_ms, backoff_limit=0, pod_labels=pod_labels,
                        pod_annotations=pod_annotations)["spec"]
        return {"name": rname, "replicas": replicas, "template": {"spec": spec}}

    spec: Obj = {"replicatedJobs": [rjob(n, r, p) for n, (r, p) in SHAPE.items()], **extra_spec}
    if managed_by:
        spec["managedBy"] = managed_by
    md: Obj = {"name": name}
    if namespace:
        md["namespace"] = namespace
    if labels:
        md["labels"] = dict(labels)
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": md, "spec": spec}


def start_jobset_controllers(clusters: Iterable[LocalCluster], workdir: Path) -> list[JobSetController]:
    """JobSet (CRD, controller, webhooks) in each cluster: built (or found built) once, then started in all
    clusters at once (each start mostly waits on its API server). On a failure the ones started are
    stopped again and the first error is raised."""
    build_jobset()
    ctls = [JobSetController(cl, workdir) for cl in clusters]
    if not ctls:
        return []
    with ThreadPoolExecutor(len(ctls)) as pool:
        errors = [e for e in pool.map(_start, ctls) if e is not None]
    if errors:
        stop_jobset_controllers(ctls)
        raise errors[0]
    return ctls


def _start(ctl: JobSetController) -> BaseException | None:
    try:
        ctl.start()
    except BaseException as exc:  # handed back to the caller, who raises the first
        return exc
    return None


def stop_jobset_controllers(controllers: Iterable[JobSetController]) -> None:
    """Each one's webhooks unregistered and its process stopped (only the processes we started), all at once."""
    ctls = list(controllers)
    if ctls:
        with ThreadPoolExecutor(len(ctls)) as pool:
            list(pool.map(lambda c: c.stop(), ctls))


@contextlib.contextmanager
def jobset_controllers(clusters: Iterable[LocalCluster], workdir: Path) -> Iterator[list[JobSetController]]:
    """JobSet in each cluster for the block; stopped (webhooks unregistered) after it, so the other users
    of a shared bed find the clusters as they were (the CRD stays)."""
    started = start_jobset_controllers(clusters, workdir)
    try:
        yield started
    finally:
        stop_jobset_controllers(started)
