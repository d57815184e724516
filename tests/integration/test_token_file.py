"""A kubeconfig whose user has ``tokenFile`` follows the file when it is rotated (real API server)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import yaml

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient, TokenFileRefresher
from kruntime.resources import Resource
from tests.conftest import MANAGER, ensure_namespace

pytestmark = pytest.mark.integration

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")


async def token_for(admin: ClusterClient, ns: str, sa: str) -> str:
    await admin.create(SERVICEACCOUNTS, ns, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}})
    resp = await admin.request("POST", SERVICEACCOUNTS.path(ns, sa, "token"), body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})
    return str(resp["status"]["token"])


async def whoami(client: ClusterClient) -> str:
    review = await client.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    return str(review["status"]["userInfo"]["username"])


async def test_rotated_token_file_is_picked_up(client_for: ClientFor, cluster: Callable[[ClusterSpec], LocalCluster],
                                               ns: str, tmp_path: Path) -> None:
    admin = await client_for(MANAGER)
    await ensure_namespace(admin, ns)
    first, second = await token_for(admin, ns, "first"), await token_for(admin, ns, "second")

    admin_kubeconfig = Path(cluster(MANAGER).kubeconfig)
    server = yaml.safe_load(admin_kubeconfig.read_text())["clusters"][0]["cluster"]
    entry = {k: v for k, v in server.items() if k in ("server", "certificate-authority", "certificate-authority-data")}
    if "certificate-authority" in entry:
        entry["certificate-authority"] = str(admin_kubeconfig.parent / entry["certificate-authority"])  # abs stays abs
    token_path = tmp_path / "token"
    token_path.write_text(first)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": entry}],
        "users": [{"name": "u", "user": {"tokenFile": "token"}}],  # relative to the kubeconfig's folder
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))

    client = await ClusterClient.from_kubeconfig("rotating", kubeconfig)
    try:
        hook = client.api.configuration.refresh_api_key_hook
        assert isinstance(hook, TokenFileRefresher) and hook.path == token_path
        hook.interval = 0.0  # look at the file before every request in this test
        assert await whoami(client) == f"system:serviceaccount:{ns}:first"

        token_path.write_text(second)  # what the kubelet does when it rotates a projected token
        st = token_path.stat()
        os.utime(token_path, (st.st_atime, st.st_mtime + 5))
        assert await whoami(client) == f"system:serviceaccount:{ns}:second"
    finally:
        await client.close()
