"""Every translated status, for generated worker histories, is accepted by a REAL API server.

The hypothesis strategy is the one the unit property tests use (new- and old-style
worker Job controllers, suspend/resume, unreachable workers, re-dispatch). Here each
step is written for real, through the status subresource, so the API server judges
each write against the previous one exactly as it will in production — on the default
release and on every other manager release ``make test`` builds (the matrix corners down to
the oldest we support): the rules are meant to be the same from 1.33 to 1.37, and this is
where a release that differs would show.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings

from clusterbed import versions
from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, NAMESPACES
from mirror.jobs.status_translation import desired_manager_status
from testkit.status_sequences import WorkerSequence, step_time, worker_sequences
from tests.conftest import MANAGER

pytestmark = pytest.mark.integration

NS = f"replay-{uuid.uuid4().hex[:6]}"


async def _replay(kubeconfig: str, seq: WorkerSequence) -> None:
    client = await ClusterClient.from_kubeconfig("manager", kubeconfig, qps=0)
    try:
        try:
            await client.create(NAMESPACES, None, {"metadata": {"name": NS}})
        except ApiError as exc:
            if not exc.already_exists:
                raise
        body = copy.deepcopy(seq.manager_job)
        name = f"r-{uuid.uuid4().hex[:10]}"
        body["metadata"] = {"name": name}
        job = await client.create(JOBS, NS, body)
        for i, step in enumerate(seq.steps):
            if bool(job["spec"].get("suspend")) != step.manager_suspend:
                job = await client.patch(JOBS, NS, name, {"spec": {"suspend": step.manager_suspend}})
            desired = desired_manager_status(job, step.remote, step_time(seq.start_time, i))
            try:
                job = await client.replace(JOBS, NS, name, {**job, "status": desired}, subresource="status")
            except ApiError as exc:
                raise AssertionError(
                    f"step {i} ({step.action}, {seq.style} worker) rejected: {exc.message}\n"
                    f"old={job.get('status')}\nnew={desired}\nremote={(step.remote or {}).get('status')}"
                ) from exc
            # Accepted is not enough: the server must have stored what we meant (no field it
            # dropped or defaulted differently), else the next pass would see a difference forever.
            assert job.get("status", {}) == desired, (
                f"step {i} ({step.action}, {seq.style} worker) stored differently:\nwrote={desired}\n"
                f"stored={job.get('status')}")
        await client.delete(JOBS, NS, name)
    finally:
        await client.close()


def _manager_at(version: str) -> ClusterSpec:
    """The default manager, or an API server alone at ``version``: validation lives there."""
    if version == versions.KUBE_VERSION:
        return MANAGER
    return ClusterSpec(f"apiserver-{version.replace('.', '-')}", kube_version=version, controller_manager=False,
                       nodes=0)


@pytest.mark.parametrize("version", [versions.KUBE_VERSION, *versions.CORNER_KUBE_VERSIONS])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(seq=worker_sequences(max_steps=15))
def test_every_translated_status_is_accepted_by_the_real_api_server(
    cluster: Callable[[ClusterSpec], LocalCluster], version: str, seq: WorkerSequence
) -> None:
    kubeconfig = str(cluster(_manager_at(version)).kubeconfig)
    asyncio.run(_replay(kubeconfig, seq))

