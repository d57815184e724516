"""JobSet's controller on a bed cluster: its CRD, its webhooks and its manager as a local process.

The bed's API servers are processes on this machine, so JobSet's webhooks are served the simple
way a binary runtime allows: the controller serves them on 127.0.0.1 with a self-signed
certificate (its internal cert management, which writes a Secret for an in-cluster Service, is
off), and the webhook configurations the module ships are registered with a URL on that port and
the certificate as their CA instead of a Service. Its defaulting webhook matters (success and
startup policies, Indexed child Jobs, restart policy); its pod webhooks are limited to JobSet's
pods so a stopped controller never blocks other pods of a shared bed cluster.

The pure parts (configuration, webhook registrations) are table-tested; :class:`JobSetController`
does the I/O and stops only the process it started.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from clusterbed import versions
from clusterbed.build import build_jobset, jobset_source
from clusterbed.cluster import LocalCluster

Obj = dict[str, Any]
#: the label JobSet puts on every pod of its child Jobs: its pod webhooks see only those
POD_LABEL = "jobset.sigs.k8s.io/jobset-name"
NAME_PREFIX = "jobset-bed-"


class JobSetBedError(RuntimeError):
    """JobSet could not be installed or started on a bed cluster."""


def crd_path(src: Path) -> Path:
    """The JobSet CRD as generated (the module's kustomize patches add a conversion webhook and CA
    injection for an in-cluster Service; v1alpha2 is its one version, so neither is needed)."""
    return src / "config" / "components" / "crd" / "bases" / "jobset.x-k8s.io_jobsets.yaml"


def controller_config(*, webhook_port: int, health_port: int, cert_dir: Path) -> Obj:
    """JobSet's Configuration for one bed cluster: webhooks on 127.0.0.1 with our certificate, no
    internal cert management, no leader election (one process per cluster)."""
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "internalCertManagement": {"enable": False},
        "leaderElection": {"leaderElect": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
    }


def webhook_registrations(shipped: list[Obj], *, port: int, ca_pem: bytes) -> list[Obj]:
    """The module's webhook configurations, re-pointed at ``https://127.0.0.1:<port><path>``.

    Renamed with a ``jobset-bed-`` prefix (the shipped names are kustomize placeholders), each
    webhook's Service reference replaced by the URL and ``ca_pem``, and the pod webhooks given an
    objectSelector on JobSet's pod label.
    """
    out = []
    for doc in shipped:
        if not isinstance(doc, dict) or doc.get("kind") not in ("MutatingWebhookConfiguration",
                                                                  "ValidatingWebhookConfiguration"):
            continue
        reg = copy.deepcopy(doc)
        reg["metadata"] = {"name": NAME_PREFIX + doc["metadata"]["name"]}
        for hook in reg.get("webhooks") or []:
            path = ((hook.get("clientConfig") or {}).get("service") or {}).get("path", "")
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                    "caBundle": base64.b64encode(ca_pem).decode()}
            if any("pods" in (r.get("resources") or []) for r in hook.get("rules") or []):
                hook["objectSelector"] = {"matchExpressions": [{"key": POD_LABEL, "operator": "Exists"}]}
        out.append(reg)
    return out


def self_signed(cert_dir: Path) -> bytes:
    """A certificate for 127.0.0.1 in ``cert_dir`` (tls.crt/tls.key, made once); returns its PEM."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    crt, key = cert_dir / "tls.crt", cert_dir / "tls.key"
    if not (crt.is_file() and key.is_file()):
        proc = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(crt)],
            capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise JobSetBedError(f"openssl could not make a certificate in {cert_dir}: {proc.stderr[-500:]}")
    return crt.read_bytes()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _apply(cluster: LocalCluster, *args: str, text: str | None = None) -> None:
    proc = cluster.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", "jobmirror-bed",
                           *args, check=False, input=text)
    if proc.returncode != 0:
        raise JobSetBedError(f"{cluster.name}: kubectl apply failed: {proc.stderr[-2000:]}")


class JobSetController:
    """JobSet's CRD, webhooks and controller in one bed cluster (``start``/``stop``)."""

    def __init__(self, cluster: LocalCluster, workdir: Path, version: str = versions.JOBSET_VERSION) -> None:
        self.cluster = cluster
        self.workdir = workdir / f"jobset-{cluster.name}"
        self.version = version
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / "jobset.log"
        #: (kind, name) of the webhook configurations registered, removed again by stop
        self.registered: list[tuple[str, str]] = []

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def install_crd(self) -> None:
        """The CRD alone, Established: enough for a cluster that must serve JobSets without running them."""
        _apply(self.cluster, "-f", str(crd_path(jobset_source(self.version))))
        for _ in range(20):  # a CRD just applied may have no status yet: kubectl wait then errors out at once
            proc = self.cluster.kubectl("wait", "--for=condition=Established", "crd/jobsets.jobset.x-k8s.io",
                                        "--timeout=60s", check=False)
            if proc.returncode == 0:
                break
            time.sleep(0.5)
        if proc.returncode != 0:
            raise JobSetBedError(f"{self.cluster.name}: the JobSet CRD is not Established: {proc.stderr[-500:]}")

    def start(self, timeout: float = 120) -> None:
        """CRD, controller (ready), then its webhooks (registered only once they are served)."""
        binary = build_jobset(self.version)
        src = jobset_source(self.version)
        self.install_crd()
        cert_dir = self.workdir / "certs"
        ca = self_signed(cert_dir)
        webhook_port, health_port = _free_port(), _free_port()
        cfg_path = self.workdir / "config.yaml"
        cfg_path.write_text(yaml.safe_dump(controller_config(webhook_port=webhook_port, health_port=health_port,
                                                             cert_dir=cert_dir)))
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [str(binary), "--config", str(cfg_path), "--kubeconfig", str(self.cluster.kubeconfig),
             "--metrics-bind-address=0", f"--zap-log-level={os.environ.get('JOBMIRROR_JOBSET_LOG_LEVEL', 'info')}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self._wait_ready(health_port, timeout)
        shipped = list(yaml.safe_load_all((src / "config" / "components" / "webhook" / "manifests.yaml").read_text()))
        regs = webhook_registrations(shipped, port=webhook_port, ca_pem=ca)
        self._wait_served([h["clientConfig"]["url"] for r in regs for h in r.get("webhooks") or []], timeout)
        self.registered = [(r["kind"], r["metadata"]["name"]) for r in regs]
        _apply(self.cluster, "-f", "-", text="\n---\n".join(yaml.safe_dump(r) for r in regs))

    def _wait_ready(self, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise JobSetBedError(f"jobset on {self.cluster.name} exited with {self.proc.returncode}:\n"
                                     f"{self.log_tail()}")
            with contextlib.suppress(urllib.error.URLError, OSError), \
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
            if time.monotonic() > deadline:
                raise JobSetBedError(f"jobset on {self.cluster.name} not ready after {timeout:.0f}s:\n"
                                     f"{self.log_tail()}")
            time.sleep(0.3)

    def _wait_served(self, urls: list[str], timeout: float) -> None:
        """Until each webhook path answers with other than 404: JobSet registers its webhook handlers
        after its manager (and readyz) started, and an API server calling a path not yet registered
        refuses the object ("the server could not find the requested resource"), as a CI run saw."""
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # our own server on 127.0.0.1: only its paths matter
        deadline = time.monotonic() + timeout
        for url in urls:
            while True:
                req = urllib.request.Request(url, data=b"{}", method="POST",
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=2, context=ctx):
                        break
                except urllib.error.HTTPError as exc:
                    if exc.code != 404:
                        break
                except (urllib.error.URLError, OSError):
                    pass
                if time.monotonic() > deadline:
                    raise JobSetBedError(f"jobset on {self.cluster.name}: webhook {url} not served after "
                                         f"{timeout:.0f}s:\n{self.log_tail()}")
                time.sleep(0.2)

    def stop(self, timeout: float = 20) -> None:
        """Unregister its webhooks (the cluster may live on), then SIGTERM (SIGKILL late) our process."""
        for kind, name in self.registered:
            self.cluster.kubectl("delete", kind.lower(), name, "--ignore-not-found", "--request-timeout=10s",
                                 check=False)
        self.registered = []
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
