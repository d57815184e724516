"""Shared fixtures: one cluster bed per test session, clients, fresh namespaces.

Cluster-backed tests carry a marker (integration, conformance, e2e, chaos). In CI
(``CI=true``) a cluster test that cannot get its clusters fails; it never skips.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from clusterbed import versions
from clusterbed.cluster import ClusterBed, ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from testkit.waiting import ensure_namespace, wait_for

CLUSTER_MARKERS = {"integration", "conformance", "e2e", "chaos", "security"}

# The shapes tests ask for. A name always means the same shape within a session.
MANAGER = ClusterSpec("manager", nodes=0)  # kcm on, no nodes: Jobs here are only ever mirrored
WORKER_1 = ClusterSpec("worker-1", nodes=2)  # kube-controller-manager's Job controller + kwok pods
WORKER_2 = ClusterSpec("worker-2", nodes=2)
APISERVER_ONLY = ClusterSpec("apiserver-only", controller_manager=False, nodes=0)
KCM_JOBS = ClusterSpec("kcm-jobs", nodes=0)  # upstream Job controller, pods driven as a kubelet
KCM_NO_JOBS = ClusterSpec("kcm-no-jobs", job_controller=False, nodes=0)  # our Job controller's shape


def apiserver_at(version: str) -> ClusterSpec:
    """The default manager, or an API server alone at ``version``: status validation lives there."""
    if version == versions.KUBE_VERSION:
        return MANAGER
    return ClusterSpec(f"apiserver-{version.replace('.', '-')}", kube_version=version, controller_manager=False,
                       nodes=0)


@pytest.fixture(scope="session")
def bed() -> Iterator[ClusterBed]:
    b = ClusterBed()
    try:
        yield b
    finally:
        b.down()


@pytest.fixture(autouse=True)
def _settled_bed(request: pytest.FixtureRequest) -> None:
    """A test starts on working clusters even if the one before stopped or froze parts of them."""
    if "bed" in request.fixturenames:
        request.getfixturevalue("bed").settle()


@pytest.fixture(scope="session")
def cluster(bed: ClusterBed) -> Callable[[ClusterSpec], LocalCluster]:
    """``cluster(SPEC)`` starts a cluster of that shape once per session."""
    return bed.ensure


@pytest.fixture(scope="session")
async def client_for(cluster: Callable[[ClusterSpec], LocalCluster]) -> AsyncIterator[
    Callable[[ClusterSpec], Awaitable[ClusterClient]]
]:
    clients: dict[str, ClusterClient] = {}

    async def get(spec: ClusterSpec) -> ClusterClient:
        if spec.name not in clients:
            c = await asyncio.to_thread(cluster, spec)
            clients[spec.name] = await ClusterClient.from_kubeconfig(spec.name, c.kubeconfig, qps=0)
        return clients[spec.name]

    yield get
    for c in clients.values():
        await c.close()


@pytest.fixture
def ns() -> str:
    """A unique namespace name for this test; create it where needed with ensure_namespace."""
    return f"t-{uuid.uuid4().hex[:10]}"


#: fixtures that build (or wait for) what make test builds beside the local tiers
BUILT_BESIDE_FIXTURES = {"helm", "monitoring_crds"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Cluster tests started from unit-only selections should not build Kubernetes by surprise.
    if os.environ.get("JOBMIRROR_SKIP_CLUSTERS") == "1" and os.environ.get("CI") != "true":
        skip = pytest.mark.skip(reason="JOBMIRROR_SKIP_CLUSTERS=1")
        for item in items:
            if CLUSTER_MARKERS & {m.name for m in item.iter_markers()}:
                item.add_marker(skip)
    # Tests on another release than the default run last: `make test` builds those releases'
    # API servers beside the tests that need the default one alone (scripts/test.sh), and a test
    # that gets there first waits for that build under its lock instead of building it twice.
    for item in items:  # the benchmark commands' small runs: a lane of their own in make test
        if item.path.name.startswith("test_bench_") and item.path.parent.name == "integration":
            item.add_marker(pytest.mark.bench_smoke)
    for item in items:  # helm and the Prometheus Operator CRDs are built beside the local tiers too
        if BUILT_BESIDE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.built_beside)
    items.sort(key=lambda item: item.get_closest_marker("built_beside") is not None)


__all__ = ["ensure_namespace", "wait_for"]
