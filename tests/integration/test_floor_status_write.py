"""The guarantees floor's combined status write is accepted by a REAL API server, on every manager release.

``bench.floor`` writes each deciding condition when the worker writes it (tests/unit/test_bench_floor.py);
a copy it first sees at its end gets one write with interim and terminal conditions together
(``SuccessCriteriaMet`` + ``Complete``, or ``FailureTarget`` + ``Failed``) onto a Job with no
status yet, built by :func:`mirror.jobs.status_translation.desired_manager_status` from the
worker's final status — from a current or an old Job controller. The strict Job status
validation judges that single write against an empty old status; this is where a release that
refused it would show. Same clusters as ``test_status_replay`` (one per release, per session).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from bench.floor import MANAGED_BY
from clusterbed import versions
from clusterbed.cluster import ClusterSpec, LocalCluster
from jobapi.times import utcnow
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, NAMESPACES
from mirror.jobs.status_translation import desired_manager_status
from testkit.jobs import make_job
from tests.conftest import apiserver_at
from tests.unit.test_bench_floor import FINAL_IDS, FINAL_WORKER_STATUSES

pytestmark = [pytest.mark.integration, pytest.mark.built_beside]

NS = f"floor-{uuid.uuid4().hex[:6]}"


async def _write_once(kubeconfig: str, worker_status: dict[str, Any]) -> dict[str, Any]:
    client = await ClusterClient.from_kubeconfig("manager", kubeconfig, qps=0)
    try:
        try:
            await client.create(NAMESPACES, None, {"metadata": {"name": NS}})
        except ApiError as exc:
            if not exc.already_exists:
                raise
        name = f"f-{uuid.uuid4().hex[:10]}"
        job = await client.create(JOBS, NS, make_job(name, managed_by=MANAGED_BY, kwok=False, container_name="c",
                                                     completions=None, parallelism=None, backoff_limit=None))
        copy = {"metadata": {"name": name, "namespace": NS}, "status": worker_status}
        desired = desired_manager_status(job, copy, utcnow())
        written = await client.patch(JOBS, NS, name, {"status": desired}, subresource="status")  # as the floor does
        await client.delete(JOBS, NS, name)
        return written
    finally:
        await client.close()


@pytest.mark.parametrize("version", [versions.KUBE_VERSION, *versions.CORNER_KUBE_VERSIONS])
@pytest.mark.parametrize("worker_status", FINAL_WORKER_STATUSES, ids=FINAL_IDS)
def test_the_floors_single_status_write_is_accepted(cluster: Callable[[ClusterSpec], LocalCluster], version: str,
                                                    worker_status: dict[str, Any]) -> None:
    written = asyncio.run(_write_once(str(cluster(apiserver_at(version)).kubeconfig), worker_status))
    types = {c["type"] for c in written["status"]["conditions"] if c["status"] == "True"}
    assert types in ({"SuccessCriteriaMet", "Complete"}, {"FailureTarget", "Failed"}), written["status"]
