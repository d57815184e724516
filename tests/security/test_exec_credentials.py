"""Exec-plugin credentials are renewed before they expire and after a 401, and a plugin that hangs
is cut off (issue 19 items 5 and 8), against a real API server.

The plugin is a real subprocess run from a kubeconfig. Each run asks this test for a token, which
the test mints with the API server's TokenRequest, bound to a Secret of its own: deleting that
Secret revokes the token for real, so "expired" is what the API server decides, not us.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ApiError, ClusterClient, KubeconfigError
from kruntime.resources import Obj, Resource
from testkit.local_http import serving
from tests.conftest import WORKER_1, ensure_namespace, wait_for
from tests.integration.inspect_env import service_account

pytestmark = [pytest.mark.integration, pytest.mark.security]

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]
SECRETS = Resource("", "v1", "secrets", "Secret")
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")


@dataclass
class Issuer:
    """Mints bound tokens for ``ns/plugin-user``; ``lifetime`` is what the plugin reports."""

    admin: ClusterClient
    ns: str
    lifetime: float = 3600.0
    delay: float = 0.0
    secrets: list[str] = field(default_factory=list)

    async def token(self, request: web.Request) -> web.Response:
        await asyncio.sleep(self.delay)
        name = f"tok-{len(self.secrets)}"
        secret = await self.admin.create(SECRETS, self.ns, {"metadata": {"name": name}})
        self.secrets.append(name)
        tr = await self.admin.request(
            "POST", f"/api/v1/namespaces/{self.ns}/serviceaccounts/plugin-user/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "spec": {"expirationSeconds": 3600, "boundObjectRef": {
                      "kind": "Secret", "apiVersion": "v1", "name": name, "uid": secret["metadata"]["uid"]}}})
        expires = (datetime.now(UTC) + timedelta(seconds=self.lifetime)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return web.json_response({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                                  "status": {"token": tr["status"]["token"], "expirationTimestamp": expires}})

    async def revoke(self, name: str) -> None:
        await self.admin.delete(SECRETS, self.ns, name)


@pytest.fixture
async def issuer(client_for: ClientFor, cluster: ClusterFn, ns: str,
                 tmp_path: Path) -> AsyncIterator[tuple[Issuer, Path]]:
    """The issuer and a kubeconfig whose user is an exec plugin asking it for tokens."""
    admin = await client_for(WORKER_1)
    await ensure_namespace(admin, ns)
    await service_account(admin, ns, "plugin-user", cluster(WORKER_1).kubeconfig, tmp_path / "unused",
                          {ns: [{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get"]}]})
    iss = Issuer(admin, ns)
    app = web.Application()
    app.router.add_get("/token", iss.token)
    async with serving(app, handler_cancellation=True) as port:  # a killed plugin ends its request
        base = yaml.safe_load(cluster(WORKER_1).kubeconfig.read_text())
        code = (f"import sys, urllib.request; "
                f"sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:{port}/token').read().decode())")
        kc = {"apiVersion": "v1", "kind": "Config", "clusters": [base["clusters"][0]],
              "users": [{"name": "plugin", "user": {"exec": {
                  "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": ["-c", code],
                  "interactiveMode": "Never"}}}],
              "contexts": [{"name": "plugin", "context": {"cluster": base["clusters"][0]["name"], "user": "plugin"}}],
              "current-context": "plugin"}
        path = tmp_path / "exec.kubeconfig"
        path.write_text(yaml.safe_dump(kc))
        yield iss, path


async def read(client: ClusterClient, ns: str) -> Obj:
    return await client.get(SERVICEACCOUNTS, ns, "plugin-user")


async def revoked(admin: ClusterClient, iss: Issuer, secret: str, token: str) -> None:
    """Delete the token's Secret and wait until the API server refuses the token."""
    await iss.revoke(secret)
    cfg = admin.api.configuration.__class__(host=admin.host)
    cfg.ssl_ca_cert = admin.api.configuration.ssl_ca_cert  # the bed's CA; no client certificate: the token alone
    cfg.api_key["BearerToken"] = f"Bearer {token}"
    probe = ClusterClient.from_configuration("probe", cfg)
    try:
        async def refused() -> bool:
            try:
                await probe.request("GET", "/api")
            except ApiError as exc:
                return exc.status == 401
            return False

        await wait_for(refused, timeout=30, what=f"the token bound to {secret} refused")
    finally:
        await probe.close()


async def test_tokens_are_renewed_before_expiry_and_after_a_401(issuer: tuple[Issuer, Path], ns: str) -> None:
    """a token reported to live 6 s is renewed before then (its revocation after expiry costs nothing);
    a token revoked while still "valid" gets a 401, one renewal and one retry that succeeds"""
    iss, kubeconfig = issuer
    iss.lifetime = 6.0
    client = await ClusterClient.from_kubeconfig("exec", kubeconfig)
    try:
        await read(client, ns)
        hook = client.api.configuration.refresh_api_key_hook
        first = hook.credential.token
        assert iss.secrets == ["tok-0"]
        await asyncio.sleep(5.2)  # within the last fifth of its life: the next request renews first
        await read(client, ns)
        assert iss.secrets == ["tok-0", "tok-1"], iss.secrets
        await revoked(client, iss, "tok-0", first)  # the old token is dead for real ...
        await read(client, ns)  # ... and nothing notices
        # A token the server refuses before its stated expiry: one 401, one renewal, one retry.
        iss.lifetime = 3600.0
        while hook.credential.expires - time.time() < 600:  # until a long-lived token is in use
            await asyncio.sleep(0.5)
            await read(client, ns)
        current, minted = hook.credential.token, len(iss.secrets)
        await revoked(client, iss, iss.secrets[-1], current)
        started = time.monotonic()
        await read(client, ns)
        assert len(iss.secrets) == minted + 1 and hook.credential.token != current
        assert time.monotonic() - started < 10
        assert hook.failures == 0
    finally:
        await client.close()


async def test_a_hanging_plugin_is_cut_off_at_load_with_a_clear_error(issuer: tuple[Issuer, Path]) -> None:
    """a plugin that does not answer: loading the kubeconfig fails within the timeout, naming the
    file and the plugin, instead of hanging the controller's start"""
    iss, kubeconfig = issuer
    iss.delay = 60.0
    from kruntime.client import load_kubeconfig
    started = time.monotonic()
    with pytest.raises(KubeconfigError) as exc:
        await load_kubeconfig(kubeconfig, exec_timeout=2.0)
    assert time.monotonic() - started < 10
    assert str(kubeconfig) in str(exc.value) and "no answer within 2s" in str(exc.value), exc.value
