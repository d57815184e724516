"""One cluster under two worker entries never runs as two workers (issue 19 item 6), on real API
servers: the second entry's credentials cannot read the cluster's identity at start, so it is held
(unhealthy, with the reason, retried); once they can, the conflict is found and it stays out.
Meanwhile the first entry's copies run undisturbed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import JOBS, Resource
from mirror import metrics
from mirror.config import Worker
from mirror.naming import ANNOTATION_PIN
from tests.conftest import WORKER_1, ensure_namespace, wait_for
from tests.integration.inspect_env import service_account
from tests.integration.mirror_env import make_job, mirror_env, wait_gc_rounds

pytestmark = [pytest.mark.integration, pytest.mark.security]

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]
CLUSTERROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTERROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
                               namespaced=False)
#: what a worker entry needs, minus reading namespaces (so not its cluster's identity)
WITHOUT_IDENTITY = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch", "create", "delete", "patch"]},
    {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create"]},
]


async def test_an_entry_whose_identity_is_unreadable_is_held_then_kept_out(client_for: ClientFor, cluster: ClusterFn,
                                                                           ns: str, tmp_path: Path) -> None:
    """worker-1 listed twice, the second entry unable to read kube-system at start: it is held, never
    touches the copies of the first; once readable, it is found to be the same cluster and kept out"""
    admin = await client_for(WORKER_1)
    await ensure_namespace(admin, ns)
    role = f"{ns}-no-identity"
    await admin.create(CLUSTERROLES, None, {"metadata": {"name": role}, "rules": WITHOUT_IDENTITY})
    await admin.create(CLUSTERROLEBINDINGS, None, {
        "metadata": {"name": role}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "twin", "namespace": ns}]})
    _, twin_kubeconfig = await service_account(admin, ns, "twin", cluster(WORKER_1).kubeconfig,
                                               tmp_path / "twin", {})
    try:
        async with mirror_env(client_for, cluster, ns, workers=(WORKER_1,), keep_finished_remote=True) as env:
            cfg = env.config_with(workers=[*env.config.workers, Worker(name="twin", kubeconfig=twin_kubeconfig)])
            ctrl = await env.start(cfg)

            async def held() -> bool:
                return "twin" in ctrl.workers and ctrl.workers["twin"].held is not None

            await wait_for(held, timeout=30, what="the twin entry held")
            twin = ctrl.workers["twin"]
            assert "identity not verified" in (twin.held or ""), twin.held
            assert not twin.healthy
            job = await env.create(make_job("runs", duration_ms=4000, annotations={ANNOTATION_PIN: "worker-1"}))
            copies = await wait_for(lambda: env.copies(job["metadata"]["uid"]), timeout=30, what="the copy")
            first_uid = copies["worker-1"]["metadata"]["uid"]
            await wait_gc_rounds(2)
            assert not twin.healthy and twin.describe()["lastError"] == twin.held
            failures = metrics.WORKER_IDENTITY_FAILURES.labels("twin")._value.get()
            assert failures >= 1, failures

            # Now its credentials can read the identity: the conflict is found, and it stays out.
            await admin.patch(CLUSTERROLES, None, role, {"rules": [
                *WITHOUT_IDENTITY, {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]})

            async def kept_out() -> bool:
                return twin.config_error is not None

            await wait_for(kept_out, timeout=90, what="the twin entry checked and kept out")
            assert "same cluster" in (twin.config_error or ""), twin.config_error
            assert not twin.healthy
            await env.wait_condition("runs", "Complete", timeout=60)
            done = await env.workers["worker-1"].get(JOBS, ns, copies["worker-1"]["metadata"]["name"])
            assert done["metadata"]["uid"] == first_uid, "the copy was deleted and made again"
            env.expect_errors(logs=[r"worker twin is kept out"])
    finally:
        await admin.delete(CLUSTERROLEBINDINGS, None, role)
        await admin.delete(CLUSTERROLES, None, role)
