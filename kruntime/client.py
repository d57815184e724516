"""One async client per cluster, speaking raw JSON.

Objects are plain dicts straight from the API server and are sent back as such, never
round-tripped through generated models, so a field this client library does not know
(a newer server's) survives a copy or an update. kubernetes_asyncio provides the
kubeconfig loading (certs, tokens, exec plugins) and the TLS-configured connection pool;
this module sends on that pool itself (its generated ``call_api`` walks every body
recursively and costs more CPU than the request: issue 13's profile), with orjson, and
adds QPS/burst limiting, a timeout on every call and typed errors.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.request import getproxies, proxy_bypass

import aiohttp
import orjson
import yaml
from aiohttp.helpers import strip_auth_from_url
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.kube_config import KubeConfigLoader
from yarl import URL

from kruntime import exec_credentials, metrics
from kruntime.ratelimit import TokenBucket, current_wait
from kruntime.reachability import Reachability
from kruntime.resources import Obj, Resource

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
#: one watch event can carry an object of etcd's 1.5 MiB request limit (aiohttp's default is 64 KiB)
WATCH_READ_BUFFER = 2**21


class KubeconfigError(ValueError):
    """A kubeconfig file is missing or unusable; the message names the file and why."""


class ApiError(Exception):
    """A non-2xx answer from the API server (or a transport failure, status 0)."""

    def __init__(self, status: int, reason: str, message: str, body: Obj | None = None, cluster: str = "") -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}
        self.cluster = cluster
        super().__init__(f"[{cluster}] {status} {reason}: {message}")

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def invalid(self) -> bool:
        return self.status == 422

    @property
    def namespace_terminating(self) -> bool:
        """A create refused because its namespace is being deleted (403, not an RBAC gap)."""
        causes = ((self.body or {}).get("details") or {}).get("causes") or []
        return self.status == 403 and (any(c.get("reason") == "NamespaceTerminating" for c in causes)
                                       or "because it is being terminated" in self.message)

    @property
    def transient(self) -> bool:
        """Worth retrying as is: transport errors, throttling, server-side trouble."""
        return self.status == 0 or self.status == 429 or self.status >= 500


def env_proxy(host: str) -> dict[str, Any]:
    """The proxy the environment names for ``host`` (``HTTPS_PROXY``, ``NO_PROXY``...), read once
    per client as client-go does, with the credentials in its URL; none when the environment names
    none. ~/.netrc is not read (client-go does not either)."""
    url = URL(host)
    named = getproxies().get(url.scheme)
    if not named or (url.host is not None and proxy_bypass(url.host)):
        return {}
    proxy, auth = strip_auth_from_url(URL(named))
    if proxy.scheme != "http":
        log.warning("%s: ignoring the proxy %s from the environment: only http:// proxies are supported", host, proxy)
        return {}
    return {"proxy": proxy, "proxy_auth": auth}


class ClusterClient:
    """API access to one cluster: raw JSON, rate limited, every call bounded in time."""

    def __init__(
        self,
        name: str,
        api_client: k8s_client.ApiClient,
        *,
        qps: float = 200.0,
        burst: int = 400,
        timeout: float = DEFAULT_TIMEOUT,
        field_manager: str | None = None,
    ) -> None:
        self.name = name
        self.api = api_client
        self.limiter = TokenBucket(qps, burst)
        #: requests this client sent, and the seconds they waited for tokens first (issue 38: calls per
        #: Job are counted from here, and slowness is judged without the wait)
        self.requests_sent = 0
        self.token_wait_seconds = 0.0
        self.timeout = timeout
        self.field_manager = field_manager
        #: When set and false, writes are refused before they are sent (a leader that lost its
        #: Lease must not write, even from a pass that started while it led).
        self.write_gate: Callable[[], bool] | None = None
        #: what this client's pool serves (``reconcile`` unless made by :meth:`sibling`)
        self.purpose = "reconcile"
        self._siblings: list[ClusterClient] = []
        #: shared with every sibling: a probe that sees the server back wakes all their watches
        self.reachability = Reachability()
        self._requests_counted: dict[tuple[str, int | str], Any] = {}
        rest = api_client.rest_client
        # The pool (TLS from the kubeconfig) is kubernetes_asyncio's; the session on it is ours, not
        # trusting the environment per request: that session reads ~/.netrc and the proxy variables
        # in a thread on every call, 15 % of the controller's CPU at 1000 Jobs (py-spy, issue 38).
        self._session = aiohttp.ClientSession(connector=rest.pool_manager.connector, connector_owner=False,
                                              read_bufsize=WATCH_READ_BUFFER)
        proxy = {"proxy": rest.proxy} if rest.proxy else env_proxy(str(api_client.configuration.host))
        self._transport_kw: dict[str, Any] = {k: v for k, v in (
            *proxy.items(), ("proxy_headers", rest.proxy_headers),
            ("server_hostname", rest.server_hostname)) if v}

    @classmethod
    async def from_kubeconfig(
        cls,
        name: str,
        path: str | Path,
        *,
        context: str | None = None,
        qps: float = 200.0,
        burst: int = 400,
        timeout: float = DEFAULT_TIMEOUT,
        field_manager: str | None = None,
    ) -> ClusterClient:
        cfg = await load_kubeconfig(path, context)
        return cls.from_configuration(name, cfg, qps=qps, burst=burst, timeout=timeout, field_manager=field_manager)

    @classmethod
    def from_configuration(
        cls, name: str, cfg: k8s_client.Configuration, *, qps: float = 200.0, burst: int = 400,
        timeout: float = DEFAULT_TIMEOUT, field_manager: str | None = None,
    ) -> ClusterClient:
        cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, 64)
        return cls(name, k8s_client.ApiClient(configuration=cfg), qps=qps, burst=burst, timeout=timeout,
                   field_manager=field_manager)

    def sibling(self, purpose: str, *, pool_size: int, qps: float | None = None, burst: int | None = None,
                timeout: float | None = None) -> ClusterClient:
        """Another client to the same cluster with the same credentials, but its own connection
        pool and rate limit: one use (watches, the Lease, user streams) cannot take the
        connections or tokens another depends on (issue 19 item 4).

        The Configuration is shared, so a credential refresh reaches every sibling.
        """
        cfg = self.api.configuration
        before = cfg.connection_pool_maxsize
        cfg.connection_pool_maxsize = pool_size
        try:
            api = k8s_client.ApiClient(configuration=cfg)
        finally:
            cfg.connection_pool_maxsize = before
        out = ClusterClient(self.name, api, qps=qps if qps is not None else self.limiter.qps,
                            burst=burst if burst is not None else self.limiter.burst,
                            timeout=timeout if timeout is not None else self.timeout,
                            field_manager=self.field_manager)
        out.purpose = purpose
        out.write_gate = self.write_gate
        out.reachability = self.reachability
        self._siblings.append(out)  # closed with this one
        return out

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    async def close(self) -> None:
        for s in self._siblings:
            await s.close()
        await self._session.close()
        await self.api.close()

    # -- raw HTTP ---------------------------------------------------------------------------

    def _check_gate(self, verb: str, path: str) -> None:
        if self.write_gate is not None and verb != "GET" and not self.write_gate():
            raise ApiError(0, "NotLeading", f"{verb} {path}: refused, this replica does not hold the leader Lease",
                           cluster=self.name)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | aiohttp.ClientTimeout | None = None,
        headers: dict[str, str] | None = None,
    ) -> aiohttp.ClientResponse:
        verb = method.upper()
        self._check_gate(verb, path)
        await self._take_token()
        self._check_gate(verb, path)  # the limiter may have waited past the deadline
        headers = {**self.api.default_headers, "Accept": "application/json", "Content-Type": content_type,
                   **(headers or {})}
        if self.field_manager and verb in ("POST", "PUT", "PATCH"):
            query = {**(query or {}), "fieldManager": self.field_manager}
        q = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items() if v is not None]
        cfg = self.api.configuration
        data = body if body is None or isinstance(body, (bytes, str)) else orjson.dumps(body)
        tmo = timeout if isinstance(timeout, aiohttp.ClientTimeout) else aiohttp.ClientTimeout(
            total=timeout if timeout is not None else self.timeout)
        for attempt in (1, 2):
            try:
                token = (await cfg.auth_settings()).get("BearerToken")  # runs the refresh hook (token file, exec)
                if token:
                    headers["Authorization"] = token["value"]
                resp: aiohttp.ClientResponse = await self._session.request(
                    verb, f"{cfg.host}{path}", params=q, headers=headers, data=data, timeout=tmo,
                    **self._transport_kw)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                self._count_request(verb, "transport")
                raise ApiError(0, "Transport", f"{verb} {path}: {type(exc).__name__}: {exc}",
                               cluster=self.name) from exc
            self._count_request(verb, resp.status)
            if resp.status != 401 or attempt == 2 or not await self._renew_credentials():
                return resp
            resp.release()  # refused: sent once more with the renewed token
        raise AssertionError("unreachable")

    def _count_request(self, verb: str, code: int | str) -> None:
        """jobmirror_api_requests_total, its labelled child looked up once per verb and code (every
        call counts: prometheus_client's lookup was 1.6 % of the controller's CPU at 1000 Jobs)."""
        child = self._requests_counted.get((verb, code))
        if child is None:
            child = self._requests_counted[verb, code] = metrics.API_REQUESTS.labels(
                cluster=self.name, verb=verb, code=str(code))
        child.inc()

    async def _take_token(self) -> float:
        """Wait for this client's next token; the wait is counted apart from the call (in the
        enclosing :func:`kruntime.ratelimit.measuring` block, and the rate-limiter histogram)."""
        wait = current_wait()
        if wait is not None:
            wait.queueing = True
        try:
            waited = await self.limiter.acquire()
        finally:
            if wait is not None:
                wait.queueing = False
        self.requests_sent += 1
        self.token_wait_seconds += waited
        metrics.RATE_LIMIT_WAIT.labels(self.name, self.purpose).observe(waited)
        if wait is not None:
            wait.took_token(waited)
        return waited

    async def _renew_credentials(self) -> bool:
        """After a 401: renew an exec plugin's token at once (whatever its stated expiry); whether
        there is a new one to retry with."""
        hook = self.api.configuration.refresh_api_key_hook
        if not isinstance(hook, exec_credentials.ExecCredentials):
            return False
        renewed = await hook.refresh(self.api.configuration, force=True)
        metrics.CREDENTIAL_RENEWALS.labels(cluster=self.name, result="renewed" if renewed else "unchanged").inc()
        log.info("%s: the API server refused our token (401); exec plugin %s %s", self.name, hook.command,
                 "gave a new one: retrying once" if renewed else "gave no new one")
        return renewed

    async def request(self, method: str, path: str, *, decode_slots: asyncio.Semaphore | None = None,
                      **kw: Any) -> Obj:
        """One call, its JSON body decoded. With ``decode_slots``, decoded while holding one: fifty
        relists' pages arriving together are decoded a few per turn of the loop, not all in one turn
        (bench fleet: 0.1-0.16 s lags at start and failover, found in the body decode)."""
        timeout = kw.get("timeout")
        resp = await self._send(method, path, **kw)
        try:
            async with asyncio.timeout(timeout if isinstance(timeout, (int, float)) else self.timeout):
                raw = await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ApiError(0, "Transport", f"{method} {path}: reading body: {exc}", cluster=self.name) from exc
        finally:
            resp.release()
        data: Obj = {}
        if raw:
            async with decode_slots or contextlib.nullcontext():
                try:
                    data = orjson.loads(raw)
                except ValueError:
                    data = {"message": raw.decode(errors="replace")[:500]}
        if not 200 <= resp.status < 300:
            raise ApiError(
                resp.status,
                str(data.get("reason") or resp.reason or ""),
                str(data.get("message") or raw[:300]),
                data,
                cluster=self.name,
            )
        return data

    # -- typed verbs over raw JSON ----------------------------------------------------------

    async def get(self, res: Resource, namespace: str | None, name: str, subresource: str | None = None) -> Obj:
        return await self.request("GET", res.path(namespace, name, subresource))

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
        decode_slots: asyncio.Semaphore | None = None,
    ) -> Obj:
        query = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": limit,
            "continue": continue_,
            "resourceVersion": resource_version,
        }
        return await self.request("GET", res.path(namespace), query=query, decode_slots=decode_slots)

    async def list_pages(self, res: Resource, namespace: str | None = None,
                         **kw: Any) -> AsyncIterator[tuple[builtins.list[Obj], str]]:
        """Paginated list, a page of 500 at a time with the list's resourceVersion, so a caller
        that keeps only part of each object never holds the whole list at once."""
        cont: str | None = None
        while True:
            page = await self.list(res, namespace, limit=500, continue_=cont, **kw)
            cont = page.get("metadata", {}).get("continue") or None
            yield page.get("items") or [], str(page.get("metadata", {}).get("resourceVersion", ""))
            if not cont:
                return

    async def list_all(self, res: Resource, namespace: str | None = None, **kw: Any) -> tuple[builtins.list[Obj], str]:
        """Paginated list; returns the items and the list's resourceVersion."""
        items: builtins.list[Obj] = []
        rv = ""
        async for page, page_rv in self.list_pages(res, namespace, **kw):
            items.extend(page)
            rv = page_rv
        return items, rv

    async def create(self, res: Resource, namespace: str | None, body: Obj, *, dry_run: bool = False) -> Obj:
        return await self.request("POST", res.path(namespace), body=body, query={"dryRun": "All" if dry_run else None})

    async def replace(
        self, res: Resource, namespace: str | None, name: str, body: Obj, *, subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        return await self.request(
            "PUT", res.path(namespace, name, subresource), body=body, query={"dryRun": "All" if dry_run else None}
        )

    async def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        ctype = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[patch_type]
        return await self.request(
            "PATCH",
            res.path(namespace, name, subresource),
            body=patch,
            content_type=ctype,
            query={"dryRun": "All" if dry_run else None},
        )

    async def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        propagation: str | None = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> Obj:
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation:
            body["propagationPolicy"] = propagation
        pre = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if pre:
            body["preconditions"] = pre
        return await self.request("DELETE", res.path(namespace, name), body=body)

    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[Obj]:
        """Stream watch events (dicts with ``type`` and ``object``) with bookmarks on.

        The server closes the stream after ``timeout_seconds``; a silent connection is
        cut after that plus a grace period so a black-holed server cannot hang us.
        """
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "timeoutSeconds": timeout_seconds,
        }
        tmo = aiohttp.ClientTimeout(total=None, connect=self.timeout, sock_connect=self.timeout,
                                    sock_read=timeout_seconds + 30)
        resp = await self._send("GET", res.path(namespace), query=query, timeout=tmo)
        try:
            if resp.status != 200:
                raw = await resp.read()
                try:
                    data = orjson.loads(raw)
                except ValueError:
                    data = {}
                raise ApiError(resp.status, str(data.get("reason", resp.reason)), str(data.get("message", raw[:300])),
                               data, cluster=self.name)
            if on_open is not None:
                on_open()
            while True:
                try:
                    line = await resp.content.readline()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    raise ApiError(0, "Transport", f"watch {res.plural}: {exc}", cluster=self.name) from exc
                if not line:
                    return
                if not line.strip():
                    continue
                yield orjson.loads(line)
        finally:
            resp.release()
            resp.close()


async def load_incluster() -> k8s_client.Configuration:
    """The pod's ServiceAccount identity (the Deployment's normal case)."""
    cfg = k8s_client.Configuration()
    try:
        k8s_config.load_incluster_config(client_configuration=cfg)
    except ConfigException as exc:
        raise KubeconfigError(f"in-cluster config: {exc} (set managerKubeconfig when running outside a pod)") from exc
    return cfg


async def load_kubeconfig(path: str | Path, context: str | None = None, *,
                          exec_timeout: float = exec_credentials.DEFAULT_TIMEOUT) -> k8s_client.Configuration:
    """Load one kubeconfig into a fresh Configuration, with errors that name the file.

    An ``exec`` user is run by :class:`~kruntime.exec_credentials.ExecCredentials` (with a
    timeout, refreshed before expiry and after a 401), never by the library's loader.
    """
    p = Path(path)
    if not p.is_file():
        raise KubeconfigError(f"kubeconfig {p}: file not found")
    where = f"kubeconfig {p}{f' (context {context})' if context else ''}"
    cfg = k8s_client.Configuration()
    try:
        doc = yaml.safe_load(p.read_text()) or {}
        user = _active_user(doc, context)
        plugin = user.pop("exec", None) if isinstance(user, dict) else None  # doc is ours: the loader never runs it
        loader = KubeConfigLoader(config_dict=doc, config_base_path=str(p.parent), active_context=context)
        await loader.load_and_set(cfg)
    except (ConfigException, KeyError, ValueError, TypeError, OSError, AttributeError) as exc:
        raise KubeconfigError(f"{where}: {exc}") from exc
    except Exception as exc:  # yaml errors and the like: still name the file
        raise KubeconfigError(f"kubeconfig {p}: unreadable: {type(exc).__name__}: {exc}") from exc
    if plugin:
        try:
            creds = exec_credentials.ExecCredentials(plugin, base_dir=p.parent, timeout=exec_timeout)
            await creds.refresh(cfg)
        except exec_credentials.ExecCredentialError as exc:
            raise KubeconfigError(f"{where}: {exc}") from exc
        cfg.refresh_api_key_hook = creds
    token_file = token_file_of(p, context)
    if token_file is not None:
        cfg.refresh_api_key_hook = TokenFileRefresher(token_file)
    return cfg


def _active_user(doc: Any, context: str | None) -> Any:
    """The ``user`` mapping the chosen (or current) context names, or {}."""
    ctx_name = context or doc.get("current-context")
    ctx = next((c.get("context") or {} for c in doc.get("contexts") or [] if c.get("name") == ctx_name), {})
    return next((u.get("user") or {} for u in doc.get("users") or [] if u.get("name") == ctx.get("user")), {})


def token_file_of(path: Path, context: str | None) -> Path | None:
    """The ``tokenFile`` of the user the chosen context uses (relative to the kubeconfig's folder)."""
    try:
        user = _active_user(yaml.safe_load(path.read_text()) or {}, context)
    except (OSError, yaml.YAMLError, AttributeError):
        return None
    tf = user.get("tokenFile")
    if not tf or user.get("token"):
        return None
    return (path.parent / tf) if not Path(tf).is_absolute() else Path(tf)


class TokenFileRefresher:
    """Re-read a kubeconfig's ``tokenFile`` when it changes (projected ServiceAccount tokens rotate).

    kubernetes_asyncio reads ``tokenFile`` once, at load; a long-running controller would
    keep sending the first token after the kubelet replaced it. Called before each request
    with the Configuration; costs one ``stat`` at most every ``interval`` seconds.
    """

    def __init__(self, path: Path, interval: float = 10.0) -> None:
        self.path = path
        self.interval = interval
        self._checked = 0.0
        self._mtime: float | None = None

    def __call__(self, cfg: k8s_client.Configuration, *args: Any) -> None:
        now = time.monotonic()
        if now - self._checked < self.interval:
            return
        self._checked = now
        try:
            mtime = self.path.stat().st_mtime
            if mtime == self._mtime:
                return
            token = self.path.read_text().strip()
        except OSError as exc:
            log.warning("cannot re-read token file %s: %s (keeping the current token)", self.path, exc)
            return
        if token:
            if self._mtime is not None:
                log.info("token file %s changed: using the new token", self.path)
            self._mtime = mtime
            cfg.api_key["BearerToken"] = f"Bearer {token}"
