"""Credentials from a kubeconfig ``exec`` plugin, refreshed before they expire and after a 401.

Cloud clusters hand out short-lived tokens through exec plugins (EKS ~15 min, GKE and AKS
~1 h). kubernetes_asyncio runs the plugin once, at load, with no time limit; a controller that
runs for days would then send an expired token, its worker would turn unhealthy and its Jobs be
dispatched again while their copies still run. Here the plugin is run with a timeout, again
when the token nears its ``expirationTimestamp`` (or has none and the server says 401), never
more than one run at a time per kubeconfig, and a failed run keeps the current token and is
retried no sooner than ``retry_after`` seconds later (each failure logged and counted).

Only plugins that return a token are supported; one returning a client certificate is refused
at load with that reason.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client as k8s_client

log = logging.getLogger(__name__)

#: How long a plugin may take; a cloud CLI that hangs on a prompt must not hang a worker forever.
DEFAULT_TIMEOUT = 30.0


class ExecCredentialError(Exception):
    """The plugin could not give a token; the message names the command and why."""


@dataclass(frozen=True)
class Credential:
    token: str
    #: when the plugin says the token stops working (None: it did not say)
    expires: float | None
    issued: float


def parse_exec_credential(stdout: bytes, *, api_version: str, command: str) -> tuple[str, float | None]:
    """The token and its expiry (epoch seconds) from a plugin's ExecCredential output."""
    try:
        doc = json.loads(stdout)
    except ValueError as exc:
        raise ExecCredentialError(f"exec plugin {command}: output is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
        raise ExecCredentialError(f"exec plugin {command}: output is not an ExecCredential")
    if doc.get("apiVersion") != api_version:
        raise ExecCredentialError(f"exec plugin {command}: answered apiVersion {doc.get('apiVersion')!r}, "
                                  f"the kubeconfig asks for {api_version!r}")
    status = doc.get("status") or {}
    token = status.get("token")
    if not token:
        what = "a client certificate, which jobmirror does not support" if status.get("clientCertificateData") \
            else "no status.token"
        raise ExecCredentialError(f"exec plugin {command}: returned {what}")
    expiry = status.get("expirationTimestamp")
    if not expiry:
        return str(token), None
    try:
        at = datetime.fromisoformat(str(expiry).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ExecCredentialError(f"exec plugin {command}: expirationTimestamp {expiry!r} is not RFC 3339") from None
    return str(token), at


def needs_refresh(cred: Credential | None, now: float) -> bool:
    """Refresh when a fifth of the token's life is left (at least a second): well before a
    15-minute token expires, never on every request."""
    if cred is None:
        return True
    if cred.expires is None:
        return False  # valid until the server says otherwise (401)
    margin = max(1.0, 0.2 * (cred.expires - cred.issued))
    return now >= cred.expires - margin


class ExecCredentials:
    """A kubeconfig user's ``exec`` plugin as a Configuration refresh hook (see module doc)."""

    def __init__(self, exec_config: Mapping[str, Any], *, base_dir: Path, timeout: float = DEFAULT_TIMEOUT,
                 retry_after: float = 5.0, clock: Callable[[], float] = time.time) -> None:
        command = str(exec_config.get("command") or "")
        if not command:
            raise ExecCredentialError("exec: no command")
        # A relative path with a separator is relative to the kubeconfig (as client-go does).
        if os.sep in command and not os.path.isabs(command):
            command = str(base_dir / command)
        self.command = command
        self.args = [str(a) for a in exec_config.get("args") or []]
        self.env = {str(e["name"]): str(e["value"]) for e in exec_config.get("env") or []}
        self.api_version = str(exec_config.get("apiVersion") or "client.authentication.k8s.io/v1")
        self.timeout, self.retry_after, self.clock = timeout, retry_after, clock
        self.credential: Credential | None = None
        self.runs = 0
        self.failures = 0
        self._failed_at = float("-inf")
        self._lock = asyncio.Lock()

    async def run(self) -> Credential:
        """Run the plugin once (within ``timeout``) and return what it gave."""
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        self.runs += 1
        try:
            proc = await asyncio.create_subprocess_exec(self.command, *self.args, env=env,
                                                        stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            raise ExecCredentialError(f"exec plugin {self.command}: cannot start: {exc}") from None
        try:
            async with asyncio.timeout(self.timeout):
                out, err = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise ExecCredentialError(f"exec plugin {self.command}: no answer within {self.timeout:g}s "
                                      "(killed)") from None
        if proc.returncode != 0:
            raise ExecCredentialError(f"exec plugin {self.command}: exited {proc.returncode}: "
                                      f"{err.decode(errors='replace').strip()[:300]}")
        token, expires = parse_exec_credential(out, api_version=self.api_version, command=self.command)
        return Credential(token, expires, self.clock())

    async def refresh(self, cfg: k8s_client.Configuration, *, force: bool = False) -> bool:
        """Bring ``cfg``'s token up to date; whether it changed. ``force``: the server refused it."""
        async with self._lock:
            now = self.clock()
            if not force and not needs_refresh(self.credential, now):
                return False
            if self.credential is not None and now - self._failed_at < self.retry_after:
                return False  # bounded: a failing plugin is not run on every request
            try:
                cred = await self.run()
            except ExecCredentialError as exc:
                self.failures += 1
                self._failed_at = now
                if self.credential is None:
                    raise
                log.warning("%s; keeping the current token, next try in %.0fs or later", exc, self.retry_after)
                return False
            changed = self.credential is None or cred.token != self.credential.token
            self.credential = cred
            cfg.api_key["BearerToken"] = cred.token
            cfg.api_key_prefix["BearerToken"] = "Bearer"
            return changed

    async def __call__(self, cfg: k8s_client.Configuration, *args: Any) -> None:
        await self.refresh(cfg)

