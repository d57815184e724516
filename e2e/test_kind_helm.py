"""The Helm chart installs and runs on kind: the kustomize deployment is replaced by the chart.

Last in the kind tier (after e2e/test_kind.py, by file order): the controller deployed from
``deploy/`` (kindbed's overlay) is removed, and ``deploy/helm/jobmirror`` is installed into the
same manager with values equivalent to that overlay (same image, workers, worker kubeconfigs
and config). Then the rollout, a Lease holder among the chart's Pods and one Job mirrored to
Complete. The session deletes the clusters afterwards, as always.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterbed import build
from e2e.harness import (
    DEPLOYMENT,
    DEPLOYMENTS,
    POD_RES,
    SECRETS,
    SYSTEM_NS,
    E2EEnv,
    condition_true,
    job_manifest,
    log,
)
from e2e.kindops import CONTROLLER_SELECTOR, holder_pod, lease_holder
from e2e.steps import cleanup, namespace, placed, wait_condition
from kruntime.resources import JOBS, Obj, Resource
from testkit.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.kind]

CHART = Path(__file__).resolve().parent.parent / "deploy" / "helm" / "jobmirror"
KIND_POD_CIDR = "10.244.0.0/16"  # as the overlay's NetworkPolicy (deploy/manager/networkpolicy.yaml)
#: What the kustomize deployment is made of on the manager (deploy/manager[-as-worker]); its
#: Namespace stays: the chart installs into it.
KUSTOMIZE_NAMESPACED = ("deployment,service,poddisruptionbudget,configmap,secret,serviceaccount,role,rolebinding,"
                        "networkpolicy")
KUSTOMIZE_CLUSTER = ("clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding,"
                     "flowschema,prioritylevelconfiguration")
PART_OF = "app.kubernetes.io/part-of=jobmirror"
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
#: Keys the chart sets from its own values, not from `config`.
CHART_OWNED = ("workers", "metricsAddress", "leaderElection", "managerKubeconfig", "inspectAddress")


def equivalent_values(env: E2EEnv) -> dict[str, Any]:
    """The chart values that say what kindbed's kustomize overlay says (image, workers, kubeconfigs, config)."""
    overlay = env.kustomization
    cfg = yaml.safe_load((overlay / "config.yaml").read_text())
    repo, _, tag = env.kind.controller_image.rpartition(":")
    workers = [w for w in cfg["workers"] if w["name"] != env.manager_worker]
    for w in workers:
        assert w["kubeconfig"] == f"/etc/jobmirror/workers/{w['name']}.kubeconfig", w
    kubeconfigs: dict[str, str | None] = {f"{w['name']}.kubeconfig": (overlay / f"{w['name']}.kubeconfig").read_text()
                                          for w in workers}
    # Helm merges maps: the chart's example kubeconfigs the overlay does not have are dropped (null).
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())["workerKubeconfigs"]["kubeconfigs"]
    kubeconfigs |= {k: None for k in defaults if k not in kubeconfigs}
    election = dict(cfg["leaderElection"])
    assert election.pop("namespace") == SYSTEM_NS, "the chart puts the Lease in the release namespace"
    inspect_port = str(cfg.get("inspectAddress") or "").rpartition(":")[2]
    return {
        "image": {"repository": repo, "tag": tag},
        "inspect": {"enabled": bool(inspect_port), "port": int(inspect_port or 8081)},
        "managerAsWorker": {"enabled": bool(env.manager_worker), "name": env.manager_worker or "manager"},
        "workers": [{"name": w["name"]} for w in workers],
        "workerKubeconfigs": {"kubeconfigs": kubeconfigs},
        "leaderElection": election,
        "config": {k: v for k, v in cfg.items() if k not in CHART_OWNED},
        # kind's default Pod subnet (kindbed sets no podSubnet); the chart has no default for it.
        "networkPolicy": {"enabled": True, "podCIDRs": [KIND_POD_CIDR]},
    }


def helm(env: E2EEnv, *args: str, timeout: float = 300) -> str:
    """helm against the manager as its admin, with its caches and config in the session's workdir."""
    home = env.workdir / "helm"
    henv = {**os.environ, "HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"), "KUBECONFIG": str(env.manager_kubeconfig)}
    cmd = [str(build.build_helm()), *args]
    log(f"+ helm {' '.join(args)}")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=henv, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"`helm {' '.join(args)}` failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


async def test_kind_helm_install_replaces_kustomize_and_mirrors_a_job(controller: E2EEnv) -> None:
    """kustomize deployment removed, `helm install` of deploy/helm/jobmirror with equivalent values: rolled out,
    a chart Pod holds the Lease, the live config equals the overlay's, and a Job is mirrored to Complete"""
    env = controller
    if env.kind is None or not env.kind_owned:
        pytest.fail("needs a kind environment this session owns (the test replaces its deployment)")
    values = equivalent_values(env)
    values_file = env.workdir / "helm-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    values_file.chmod(0o600)  # worker credentials

    t0 = time.monotonic()
    await asyncio.to_thread(env.kubectl, "delete", KUSTOMIZE_NAMESPACED, "-n", SYSTEM_NS, "-l", PART_OF,
                            "--wait=true", "--timeout=120s", timeout=150)
    await asyncio.to_thread(env.kubectl, "delete", KUSTOMIZE_CLUSTER, "-l", PART_OF, "--wait=true", timeout=150)

    async def pods_gone() -> bool:
        items, _ = await env.manager.list_all(POD_RES, SYSTEM_NS, label_selector=CONTROLLER_SELECTOR)
        return not items

    await wait_for(pods_gone, timeout=120, interval=1, what="the kustomize deployment's Pods gone")
    left = await asyncio.to_thread(env.kubectl, "get", f"{KUSTOMIZE_NAMESPACED},{KUSTOMIZE_CLUSTER}", "-A", "-l",
                                   PART_OF, "-o", "name")
    assert not left.stdout.strip(), f"left from the kustomize deployment:\n{left.stdout}"
    t_removed = time.monotonic()
    env.notes.append(f"helm: kustomize deployment removed in {t_removed - t0:.0f}s")

    await asyncio.to_thread(helm, env, "install", "jobmirror", str(CHART), "--namespace", SYSTEM_NS,
                            "--values", str(values_file), "--wait", "--timeout", "240s")
    deployment = await env.manager.get(DEPLOYMENTS, SYSTEM_NS, DEPLOYMENT)
    assert deployment["metadata"]["labels"].get("app.kubernetes.io/managed-by") == "Helm", deployment["metadata"]
    st = deployment["status"]
    want = deployment["spec"]["replicas"]
    assert want == 2 and st.get("readyReplicas") == want and st.get("updatedReplicas") == want, st

    async def chart_pod_leads() -> str | None:
        holder = await lease_holder(env)
        items, _ = await env.manager.list_all(POD_RES, SYSTEM_NS, label_selector=CONTROLLER_SELECTOR)
        live = {p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")}
        return holder if holder and holder_pod(holder) in live else None

    holder = await wait_for(chart_pod_leads, timeout=90, interval=1, what="a Pod of the Helm release holding the Lease")
    env.notes.append(f"helm: install --wait + Lease held in {time.monotonic() - t_removed:.0f}s (leader {holder})")

    # The live config and worker Secret are the overlay's: the values are equivalent, not merely similar.
    live_cm = await env.manager.get(CONFIGMAPS, SYSTEM_NS, "jobmirror-config")
    assert yaml.safe_load(live_cm["data"]["config.yaml"]) == yaml.safe_load(
        (env.kustomization / "config.yaml").read_text())
    live_secret = await env.manager.get(SECRETS, SYSTEM_NS, "jobmirror-worker-kubeconfigs")
    overlay_files = {k: v for k, v in values["workerKubeconfigs"]["kubeconfigs"].items() if v is not None}
    assert {k: base64.b64decode(v).decode() for k, v in live_secret["data"].items()} == overlay_files

    t_job = time.monotonic()
    ns = await namespace(env, "helm")
    created = await env.manager.create(JOBS, ns, job_manifest("via-helm", image=env.pod_image, seconds=2))
    _, worker, _ = await placed(env, ns, "via-helm", created["metadata"]["uid"])
    done: Obj = await wait_condition(env, ns, "via-helm", "Complete", timeout=120)
    assert condition_true(done, "Complete") and done["status"].get("succeeded") == 1, done["status"]
    env.notes.append(f"helm: a Job mirrored to {worker} and Complete in {time.monotonic() - t_job:.0f}s")
    await cleanup(env, ns)
