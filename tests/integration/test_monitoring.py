"""Every metric the dashboard and the alerts use is one a running controller exports.

``jobmirror run`` as a subprocess (its own metrics registry, as deployed) against the bed's
real API servers, with leader election; one Job is mirrored to Complete so the core series
carry samples; then /metrics is scraped and compared with the PromQL of
deploy/monitoring/jobmirror-dashboard.json and jobmirror-alerts.yaml. A metric that is only
declared (``# TYPE``, no sample yet: re-dispatches, GC deletions on a quiet run) counts as
exported, with the series its type implies (``_total``; ``_bucket``/``_sum``/``_count``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from clusterbed import build, versions
from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import JOBS
from testkit.promql import exported_names, metric_names
from tests.conftest import MANAGER, WORKER_1, WORKER_2, ensure_namespace, wait_for
from tests.integration.mirror_env import cond, make_job

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
ClusterFor = Callable[[ClusterSpec], LocalCluster]
ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]


def used_metrics() -> dict[str, set[str]]:
    """Metric name → where it is used (panel titles, alert names)."""
    used: dict[str, set[str]] = {}
    dash = json.loads((MONITORING / "jobmirror-dashboard.json").read_text())
    for p in dash["panels"]:
        for t in p.get("targets", []):
            for n in metric_names(t["expr"]):
                used.setdefault(n, set()).add(f"panel {p['title']!r}")
    rule = yaml.safe_load((MONITORING / "jobmirror-alerts.yaml").read_text())
    for g in rule["spec"]["groups"]:
        for r in g["rules"]:
            for n in metric_names(r["expr"]):
                used.setdefault(n, set()).add(f"alert {r['alert']}")
    return used


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Scrape:
    text: str
    log: str


@pytest.fixture(scope="module")
async def scrape(cluster: ClusterFor, client_for: ClientFor, tmp_path_factory: pytest.TempPathFactory
                 ) -> AsyncIterator[Scrape]:
    """A controller process that mirrored one Job to Complete, scraped afterwards."""
    ns = f"t-mon-{os.urandom(4).hex()}"
    manager = await client_for(MANAGER)
    for spec in (MANAGER, WORKER_1, WORKER_2):
        await ensure_namespace(await client_for(spec), ns)
    kc = {s.name: (await asyncio.to_thread(cluster, s)).kubeconfig for s in (MANAGER, WORKER_1, WORKER_2)}
    port = free_port()
    tmp = tmp_path_factory.mktemp("monitoring")
    cfg = {
        "managerKubeconfig": str(kc["manager"]),
        "workers": [{"name": w, "kubeconfig": str(kc[w])} for w in ("worker-1", "worker-2")],
        "namespaces": [ns], "origin": f"o-{ns}", "metricsAddress": f"127.0.0.1:{port}",
        "resyncPeriod": 5, "gcInterval": 5, "healthProbeInterval": 1,
        "placement": "RoomAware",  # its capacity panel's series too
        "leaderElection": {"enabled": True, "namespace": ns, "leaseName": "jobmirror-monitoring"},
    }
    (tmp / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBMIRROR_")} | {"PYTHONUNBUFFERED": "1"}
    log_path = tmp / "controller.log"
    with log_path.open("wb") as logf:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "mirror.cli", "--log-format", "text", "run",
                                                    "--config", str(tmp / "config.yaml"), cwd=ROOT, env=env,
                                                    stdout=logf, stderr=asyncio.subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/metrics"

    async def get() -> str:
        async with aiohttp.ClientSession() as s, s.get(url, timeout=aiohttp.ClientTimeout(total=5)) as r:
            return await r.text() if r.status == 200 else ""

    def leading(text: str) -> bool:
        return any(s.name == "jobmirror_leader" and s.value == 1
                   for f in text_string_to_metric_families(text) for s in f.samples)

    async def ready() -> str | None:
        if proc.returncode is not None:
            raise AssertionError(f"jobmirror run exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            text = await get()
        except (aiohttp.ClientError, TimeoutError):
            return None
        return text if leading(text) else None

    try:
        await wait_for(ready, timeout=60, interval=0.5, what="the controller serving /metrics as leader")
        await manager.create(JOBS, ns, make_job("scraped", duration_ms=300))

        async def complete() -> bool:
            return cond(await manager.get(JOBS, ns, "scraped"), "Complete") == "True"

        await wait_for(complete, timeout=90, what=f"{ns}/scraped Complete")
        yield Scrape(await get(), log_path.read_text())
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        for spec in (MANAGER, WORKER_1, WORKER_2):
            c = await client_for(spec)
            await c.request("DELETE", f"/api/v1/namespaces/{ns}")


def test_every_metric_of_the_dashboard_and_alerts_is_exported(scrape: Scrape) -> None:
    used = used_metrics()
    assert len(used) >= 10, sorted(used)
    exported = exported_names(scrape.text)
    missing = {n: sorted(where) for n, where in used.items() if n not in exported}
    assert not missing, f"used but not exported by the controller: {missing}"


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == name}


def test_the_core_series_carry_samples_after_one_job(scrape: Scrape) -> None:
    """dispatch, status propagation (the histogram this dashboard needed), worker health, leader"""
    text = scrape.text
    dispatched = samples(text, "jobmirror_dispatches_total")
    assert sum(dispatched.values()) == 1, dispatched
    ((labels, _),) = dispatched.items()
    worker = dict(labels)["worker"]
    propagated = samples(text, "jobmirror_status_propagation_seconds_count")
    assert propagated.get((("worker", worker),), 0) >= 1, f"no status propagation observed on {worker}: {propagated}"
    assert samples(text, "jobmirror_worker_up") == {(("worker", "worker-1"),): 1.0, (("worker", "worker-2"),): 1.0}
    assert samples(text, "jobmirror_leader") == {(): 1.0}
    assert samples(text, "jobmirror_status_writes_total").get((("result", "ok"),), 0) >= 1


# -- the Prometheus Operator objects, validated by a real API server against their CRDs ---------

CRDS = ("monitoring.coreos.com_prometheusrules.yaml", "monitoring.coreos.com_servicemonitors.yaml")


def _run(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, input=stdin, timeout=180)


@pytest.fixture(scope="module")
def monitoring_crds(cluster: ClusterFor) -> Iterator[Path]:
    """The bed manager with the Prometheus Operator's PrometheusRule and ServiceMonitor CRDs
    (pinned in clusterbed/versions.py); removed afterwards. Yields the admin kubeconfig."""
    kubectl = build.build_kubernetes(versions.KUBE_VERSION) / "kubectl"
    kc = cluster(MANAGER).kubeconfig
    files = [build.prometheus_operator_crds() / f for f in CRDS]
    for f in files:
        proc = _run(kubectl, "--kubeconfig", kc, "apply", "--server-side", "-f", f)
        assert proc.returncode == 0, proc.stderr
    proc = _run(kubectl, "--kubeconfig", kc, "wait", "--for=condition=Established", "--timeout=60s",
                *[f"crd/{f.name.split('_', 1)[1].removesuffix('.yaml')}.monitoring.coreos.com" for f in files])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    yield kc
    for f in files:
        _run(kubectl, "--kubeconfig", kc, "delete", "--wait=false", "-f", f)


def _server_dry_run(kubeconfig: Path, manifests: str) -> subprocess.CompletedProcess[str]:
    kubectl = build.build_kubernetes(versions.KUBE_VERSION) / "kubectl"
    return _run(kubectl, "--kubeconfig", kubeconfig, "create", "--dry-run=server", "--validate=strict", "-f", "-",
                stdin=manifests)


async def test_deploy_monitoring_passes_server_side_validation(monitoring_crds: Path, client_for: ClientFor) -> None:
    """`kubectl kustomize deploy/monitoring` creates (server dry run, strict fields) against the operator's CRDs"""
    kubectl = build.build_kubernetes(versions.KUBE_VERSION) / "kubectl"
    rendered = _run(kubectl, "kustomize", MONITORING)
    assert rendered.returncode == 0, rendered.stderr
    await ensure_namespace(await client_for(MANAGER), "jobmirror-system")
    proc = _server_dry_run(monitoring_crds, rendered.stdout)
    assert proc.returncode == 0, proc.stderr
    assert "prometheusrule.monitoring.coreos.com/jobmirror-alerts created (server dry run)" in proc.stdout, proc.stdout
    assert "configmap/jobmirror-dashboard created (server dry run)" in proc.stdout, proc.stdout


async def test_chart_monitoring_objects_pass_server_side_validation(monitoring_crds: Path,
                                                                   client_for: ClientFor) -> None:
    """the chart's ServiceMonitor, PrometheusRule and dashboard ConfigMap create (server dry run, strict fields)"""
    ns = f"t-mon-chart-{os.urandom(3).hex()}"
    await ensure_namespace(await client_for(MANAGER), ns)
    rendered = _run(build.build_helm(), "template", "jobmirror", ROOT / "deploy" / "helm" / "jobmirror", "-n", ns,
                    "--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true,grafanaDashboard.enabled=true",
                    "--set", "networkPolicy.enabled=false",
                    "--show-only", "templates/servicemonitor.yaml", "--show-only", "templates/prometheusrule.yaml",
                    "--show-only", "templates/grafana-dashboard.yaml")
    assert rendered.returncode == 0, rendered.stderr
    proc = _server_dry_run(monitoring_crds, rendered.stdout)
    assert proc.returncode == 0, proc.stderr
    for what in ("servicemonitor.monitoring.coreos.com/jobmirror-controller", "prometheusrule.monitoring.coreos.com/"
                 "jobmirror-alerts", "configmap/jobmirror-dashboard"):
        assert f"{what} created (server dry run)" in proc.stdout, proc.stdout
    await (await client_for(MANAGER)).request("DELETE", f"/api/v1/namespaces/{ns}")
