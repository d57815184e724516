"""The shipped admission policy keeps ``jobmirror.dev/`` keys on Jobs jobmirror's own (issue 19 item
2), on a real API server: a tenant with every Job right in their namespace cannot set, change or
remove them (except the two meant for users), the controller's ServiceAccount can.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, Obj, Resource
from mirror.naming import (
    ANNOTATION_CLUSTER,
    ANNOTATION_DELETE_PROPAGATION,
    ANNOTATION_PIN,
    ANNOTATION_WORKER_SELECTOR,
    LABEL_ORIGIN_UID,
)
from tests.conftest import MANAGER, ensure_namespace, wait_for
from tests.integration.inspect_env import REPO, service_account
from tests.integration.mirror_env import make_job

pytestmark = [pytest.mark.integration, pytest.mark.security]

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]
POLICIES = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy",
                    namespaced=False)
BINDINGS = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
                    "ValidatingAdmissionPolicyBinding", namespaced=False)
SHIPPED_USER = "system:serviceaccount:jobmirror-system:jobmirror"
#: every Job right in the namespace, jobs/status included (as a role written with ``batch/*`` grants it)
JOB_RIGHTS = [{"apiGroups": ["batch"], "resources": ["jobs", "jobs/status"],
               "verbs": ["create", "get", "update", "patch"]}]


@pytest.fixture
async def policy(client_for: ClientFor, ns: str) -> AsyncIterator[str]:
    """The shipped reserved-keys policy and its binding, for this test's controller ServiceAccount
    (``<ns>:jobmirror``, as an install in another namespace edits it); the policy's name."""
    admin = await client_for(MANAGER)
    docs = list(yaml.safe_load_all((REPO / "deploy/manager/admission-policy.yaml").read_text()))
    policy = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"
                  and d["metadata"]["name"] == "jobmirror-reserved-keys")
    binding = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"
                   and d["spec"]["policyName"] == "jobmirror-reserved-keys")
    name = f"jobmirror-reserved-keys-{ns}"
    text = yaml.safe_dump(policy).replace(SHIPPED_USER, f"system:serviceaccount:{ns}:jobmirror")
    policy = yaml.safe_load(text)
    policy["metadata"]["name"] = name
    # Only this test's namespace: other tests on the shared bed are left alone.
    policy["spec"]["matchConstraints"]["namespaceSelector"] = {
        "matchLabels": {"kubernetes.io/metadata.name": ns}}
    binding["metadata"]["name"] = name
    binding["spec"]["policyName"] = name
    await admin.create(POLICIES, None, policy)
    await admin.create(BINDINGS, None, binding)

    async def checked() -> Obj | None:
        p = await admin.get(POLICIES, None, name)
        st = p.get("status") or {}
        return p if st.get("observedGeneration") == p["metadata"]["generation"] and "typeChecking" in st else None

    compiled = await wait_for(checked, timeout=30, what=f"type checking of {name}")
    assert compiled is not None
    assert not compiled["status"]["typeChecking"].get("expressionWarnings"), compiled["status"]
    try:
        yield name
    finally:
        await admin.delete(BINDINGS, None, name)
        await admin.delete(POLICIES, None, name)


async def as_account(client_for: ClientFor, cluster: ClusterFn, ns: str, name: str, tmp_path: Path) -> ClusterClient:
    admin = await client_for(MANAGER)
    _, kubeconfig = await service_account(admin, ns, name, cluster(MANAGER).kubeconfig, tmp_path / name,
                                          {ns: JOB_RIGHTS})
    return await ClusterClient.from_kubeconfig(name, kubeconfig)


async def refused(call: Awaitable[Any], *keys: str) -> None:
    with pytest.raises(ApiError) as exc:
        await call
    assert exc.value.status in (403, 422), exc.value
    for key in keys:
        assert key in exc.value.message, (key, exc.value.message)


async def _until_enforced(tenant: ClusterClient, ns: str, forged: Obj, policy: str) -> None:
    """The API server starts enforcing a new binding within a second or so: wait until ``forged``
    (a dry run) is refused."""
    async def in_force() -> bool:
        try:
            await tenant.create(JOBS, ns, forged, dry_run=True)
        except ApiError as exc:
            return exc.status == 403
        return False

    await wait_for(in_force, timeout=30, what=f"{policy} enforced")


async def test_a_tenant_cannot_write_our_keys_on_a_job(client_for: ClientFor, cluster: ClusterFn, ns: str,
                                                       tmp_path: Path, policy: str) -> None:
    """create with, add, change and remove jobmirror.dev/ labels and annotations: refused for a tenant
    (naming each key), allowed for pin-cluster, worker-selector and delete-propagation and for the controller"""
    await ensure_namespace(await client_for(MANAGER), ns)
    tenant = await as_account(client_for, cluster, ns, "tenant", tmp_path)
    controller = await as_account(client_for, cluster, ns, "jobmirror", tmp_path)
    try:
        forged = make_job("forged", suspend=True)
        forged["metadata"]["labels"] = {LABEL_ORIGIN_UID: "someone-elses-uid"}
        forged["metadata"]["annotations"] = {ANNOTATION_CLUSTER: "worker-1"}

        await _until_enforced(tenant, ns, forged, policy)
        await refused(tenant.create(JOBS, ns, forged), f"label {LABEL_ORIGIN_UID}", f"annotation {ANNOTATION_CLUSTER}")

        # The keys meant for users pass; so does everything else a tenant writes.
        job = make_job("mine", suspend=True, annotations={ANNOTATION_PIN: "worker-1",
                                                           ANNOTATION_WORKER_SELECTOR: "tier=batch",
                                                           ANNOTATION_DELETE_PROPAGATION: "Orphan"})
        job["metadata"]["labels"] = {"team": "a"}
        await tenant.create(JOBS, ns, job)
        await tenant.patch(JOBS, ns, "mine", {"metadata": {"labels": {"team": "b"},
                                                            "annotations": {ANNOTATION_PIN: "worker-2"}}})
        await refused(tenant.patch(JOBS, ns, "mine", {"metadata": {"annotations": {ANNOTATION_CLUSTER: "worker-2"}}}),
                      ANNOTATION_CLUSTER)
        await refused(tenant.patch(JOBS, ns, "mine", {"metadata": {"labels": {"jobmirror.dev/new": "x"}}}),
                      "jobmirror.dev/new")

        # The controller places it; the tenant can neither move nor unplace it.
        await controller.patch(JOBS, ns, "mine", {"metadata": {"annotations": {ANNOTATION_CLUSTER: "worker-1"}}})
        await refused(tenant.patch(JOBS, ns, "mine", {"metadata": {"annotations": {ANNOTATION_CLUSTER: "worker-2"}}}),
                      ANNOTATION_CLUSTER)
        await refused(tenant.patch(JOBS, ns, "mine", {"metadata": {"annotations": {ANNOTATION_CLUSTER: None}}}),
                      ANNOTATION_CLUSTER)
        # A replace that carries the controller's keys unchanged is fine (kubectl edit, apply).
        current = await tenant.get(JOBS, ns, "mine")
        current["metadata"]["labels"]["team"] = "c"
        await tenant.replace(JOBS, ns, "mine", current)
        await tenant.patch(JOBS, ns, "mine", {"metadata": {"annotations": {ANNOTATION_PIN: None}}})
    finally:
        await tenant.close()
        await controller.close()


async def test_a_tenant_cannot_write_our_keys_through_the_status_subresource(
        client_for: ClientFor, cluster: ClusterFn, ns: str, tmp_path: Path, policy: str) -> None:
    """a jobs/status write carries metadata (the status strategy resets only spec): a tenant's status
    patch or replace that sets, changes or removes a jobmirror.dev/ key is refused (issue 32 item 6),
    while one changing only their own label still lands"""
    await ensure_namespace(await client_for(MANAGER), ns)
    tenant = await as_account(client_for, cluster, ns, "tenant", tmp_path)
    controller = await as_account(client_for, cluster, ns, "jobmirror", tmp_path)
    try:
        forged = make_job("probe", suspend=True)
        forged["metadata"]["labels"] = {LABEL_ORIGIN_UID: "x"}

        await _until_enforced(tenant, ns, forged, policy)
        job = make_job("mine", suspend=True)
        job["metadata"]["labels"] = {"team": "a"}
        await tenant.create(JOBS, ns, job)
        await controller.patch(JOBS, ns, "mine", {"metadata": {"labels": {LABEL_ORIGIN_UID: "mine-uid"},
                                                                "annotations": {ANNOTATION_CLUSTER: "worker-1"}}})
        # The status path reaches metadata: the tenant's own label changes through it.
        await tenant.patch(JOBS, ns, "mine", {"metadata": {"labels": {"team": "b"}}}, subresource="status")
        assert (await tenant.get(JOBS, ns, "mine"))["metadata"]["labels"]["team"] == "b"

        await refused(tenant.patch(JOBS, ns, "mine", {"metadata": {"annotations": {ANNOTATION_CLUSTER: "worker-2"}}},
                                   subresource="status"), f"annotation {ANNOTATION_CLUSTER}")
        await refused(tenant.patch(JOBS, ns, "mine", {"metadata": {"labels": {LABEL_ORIGIN_UID: None}}},
                                   subresource="status"), f"label {LABEL_ORIGIN_UID}")
        await refused(tenant.patch(JOBS, ns, "mine", {"metadata": {"labels": {"jobmirror.dev/new": "x"}}},
                                   subresource="status"), "label jobmirror.dev/new")
        current = await tenant.get(JOBS, ns, "mine")
        current["metadata"]["annotations"][ANNOTATION_CLUSTER] = "worker-2"
        await refused(tenant.replace(JOBS, ns, "mine", current, subresource="status"),
                      f"annotation {ANNOTATION_CLUSTER}")
        after = await tenant.get(JOBS, ns, "mine")
        assert after["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-1", after["metadata"]
        assert after["metadata"]["labels"][LABEL_ORIGIN_UID] == "mine-uid", after["metadata"]
    finally:
        await tenant.close()
        await controller.close()
