"""What the process environment may change about a cluster client: the proxy, as client-go reads
it, once; never credentials from ~/.netrc, and nothing read again per request (issue 38: that
reading was 15 % of the controller's CPU at 1000 Jobs)."""

from __future__ import annotations

import netrc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s_client
from yarl import URL

from kruntime.client import ClusterClient, env_proxy
from kruntime.resources import NAMESPACES
from testkit.local_http import serving


@pytest.fixture
def clean_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
                 "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(("env", "host", "want"), [
    ({}, "https://api.example:6443", {}),
    ({"HTTPS_PROXY": "http://proxy.example:3128"}, "https://api.example:6443",
     {"proxy": URL("http://proxy.example:3128"), "proxy_auth": None}),
    ({"HTTPS_PROXY": "http://u:p@proxy.example:3128"}, "https://api.example:6443",
     {"proxy": URL("http://proxy.example:3128"), "proxy_auth": ("u", "p", "latin1")}),  # a BasicAuth
    ({"HTTPS_PROXY": "http://proxy.example:3128", "NO_PROXY": "api.example"}, "https://api.example:6443", {}),
    ({"HTTP_PROXY": "http://proxy.example:3128"}, "https://api.example:6443", {}),  # wrong scheme
    ({"HTTPS_PROXY": "https://proxy.example:3128"}, "https://api.example:6443", {}),  # aiohttp: not supported
])
def test_the_proxy_the_environment_names(clean_proxy_env: pytest.MonkeyPatch, env: dict[str, str], host: str,
                                         want: dict[str, object]) -> None:
    for k, v in env.items():
        clean_proxy_env.setenv(k, v)
    assert env_proxy(host) == want


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    async def namespaces(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response({"kind": "NamespaceList", "items": [], "metadata": {}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces", namespaces)
    async with serving(app) as port:
        yield f"http://127.0.0.1:{port}", seen


@pytest.mark.parametrize("token", [None, "Bearer t0k"])
async def test_a_request_sends_no_netrc_credentials_and_reads_no_netrc(
        server: tuple[str, list[dict[str, str]]], tmp_path: Path, clean_proxy_env: pytest.MonkeyPatch,
        token: str | None) -> None:
    """With a token, aiohttp refused to send both (every call failed); without one the netrc entry
    went to the API server as Basic auth."""
    host, seen = server
    rc = tmp_path / "netrc"
    rc.write_text("machine 127.0.0.1 login someone password secret\n")
    clean_proxy_env.setenv("NETRC", str(rc))
    reads = 0
    real = netrc.netrc.__init__

    def counting(self: netrc.netrc, file: str | None = None) -> None:
        nonlocal reads
        reads += 1
        real(self, file)

    clean_proxy_env.setattr(netrc.netrc, "__init__", counting)
    cfg = k8s_client.Configuration(host=host)
    if token:
        cfg.api_key = {"BearerToken": token}
    client = ClusterClient("c", k8s_client.ApiClient(configuration=cfg))
    try:
        for _ in range(3):
            await client.list(NAMESPACES, None)
    finally:
        await client.close()
    assert len(seen) == 3
    assert [h.get("Authorization") for h in seen] == [token] * 3
    assert reads == 0
