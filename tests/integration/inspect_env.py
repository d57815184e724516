"""The inspect API on real API servers: a Service in front of the in-process controller, so the
manager's real service proxy reaches it, and ServiceAccount users with real tokens and roles."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp
import yaml
import yarl

from kruntime.client import ClusterClient
from kruntime.resources import PODS, Resource

REPO = Path(__file__).resolve().parents[2]
SERVICES = Resource("", "v1", "services", "Service")
ENDPOINTS = Resource("", "v1", "endpoints", "Endpoints")
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")


def host_address() -> str:
    """A non-loopback address of this machine: the API server refuses to proxy to loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent; this picks the outgoing interface
        addr = str(s.getsockname()[0])
    assert not addr.startswith("127."), f"no non-loopback IPv4 address on this machine ({addr})"
    return addr


async def expose_through_service_proxy(admin: ClusterClient, ns: str, ip: str, port: int) -> None:
    """A Service whose endpoint is the in-process controller, as deploy/ makes one for the Pods.

    The API server only proxies to an endpoint backed by a Pod with that IP, so a Pod object
    carries it (its status written as a kubelet would).
    """
    await admin.create(PODS, ns, {"metadata": {"name": "inspect-backend"},
                                  "spec": {"containers": [{"name": "c", "image": "none"}]}})
    pod = await admin.get(PODS, ns, "inspect-backend")
    pod["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}
    await admin.replace(PODS, ns, "inspect-backend", pod, subresource="status")
    await admin.create(SERVICES, ns, {"metadata": {"name": "jobmirror-inspect"},
                                      "spec": {"ports": [{"name": "inspect", "port": 8081, "targetPort": port}]}})
    await admin.create(ENDPOINTS, ns, {"metadata": {"name": "jobmirror-inspect"}, "subsets": [{
        "addresses": [{"ip": ip, "targetRef": {"kind": "Pod", "name": "inspect-backend", "namespace": ns}}],
        "ports": [{"name": "inspect", "port": port}]}]})
    # The shipped proxy grant, in this namespace.
    for doc in yaml.safe_load_all((REPO / "deploy/manager/inspect-proxy-rbac.yaml").read_text()):
        doc["metadata"]["namespace"] = ns
        await admin.create(ROLES if doc["kind"] == "Role" else ROLEBINDINGS, ns, doc)


async def service_account(admin: ClusterClient, ns: str, name: str, kubeconfig_of: Path, dest: Path,
                          grants: dict[str, list[dict[str, Any]]]) -> tuple[str, Path]:
    """A ServiceAccount ``ns/name`` with a real token and a Role of ``rules`` in each namespace of
    ``grants``; returns the token and a kubeconfig for it written to ``dest``."""
    await admin.create(SERVICEACCOUNTS, ns, {"metadata": {"name": name}})
    for where, rules in grants.items():
        role = f"{ns}-{name}"
        await admin.create(ROLES, where, {"metadata": {"name": role}, "rules": rules})
        await admin.create(ROLEBINDINGS, where, {
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]})
    tr = await admin.request(
        "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})
    token = str(tr["status"]["token"])
    base = yaml.safe_load(kubeconfig_of.read_text())
    cl = base["clusters"][0]
    kc = {"apiVersion": "v1", "kind": "Config", "clusters": [cl], "users": [{"name": name, "user": {"token": token}}],
          "contexts": [{"name": name, "context": {"cluster": cl["name"], "user": name, "namespace": ns}}],
          "current-context": name}
    dest.write_text(yaml.safe_dump(kc))
    return token, dest


async def user(admin: ClusterClient, ns: str, name: str, kubeconfig_of: Path, dest: Path,
               *, may_get_jobs_in: str | None, may_read_logs: bool = True,
               may_read_pods: bool | None = None) -> tuple[str, Path]:
    """A ServiceAccount user with a real token, optionally allowed to get/list Jobs in one namespace
    (and, unless ``may_read_logs`` is false, to read pod logs there; unless ``may_read_pods`` is
    false — by default as ``may_read_logs`` — to get and list the pods there)."""
    rules: list[dict[str, Any]] = [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]}]
    if may_read_logs:
        rules.append({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]})
    if may_read_logs if may_read_pods is None else may_read_pods:
        rules.append({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]})
    return await service_account(admin, ns, name, kubeconfig_of, dest,
                                 {may_get_jobs_in: rules} if may_get_jobs_in else {})


async def proxied(admin: ClusterClient, ns: str, path: str, headers: dict[str, str]) -> tuple[int, Any]:
    """A raw GET through the manager's service proxy, with only the given credentials."""
    server = admin.host
    ssl_ctx = False  # the bed's self-signed serving cert; the caller's identity is what is under test
    url = yarl.URL(f"{server}/api/v1/namespaces/{ns}/services/https:jobmirror-inspect:inspect/proxy{path}",
                   encoded=True)  # sent as written: %2F and %2E%2E must reach the server undecoded
    async with aiohttp.ClientSession() as s, s.get(url, headers=headers, ssl=ssl_ctx) as r:
        raw = await r.read()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, raw.decode(errors="replace")


async def direct(address: str, path: str, token: str) -> tuple[int, Any]:
    """A raw GET straight to the inspect API (as a port-forward or a Pod on the network would)."""
    url = yarl.URL(f"https://{address}{path}", encoded=True)
    async with aiohttp.ClientSession() as s, s.get(url, headers={"Authorization": f"Bearer {token}"},
                                                   ssl=False) as r:
        raw = await r.read()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, raw.decode(errors="replace")


async def plugin(*args: str, timeout: float = 60) -> tuple[int, str, str]:
    """``kubectl jobmirror ARGS`` as a user runs it: a subprocess with none of the test's JOBMIRROR_ or
    KUBECONFIG settings; its exit code, stdout and stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBMIRROR_", "KUBECONFIG"))}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import sys; from mirror.cli import plugin_main; sys.exit(plugin_main())", *args,
        cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
