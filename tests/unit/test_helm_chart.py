"""deploy/helm/jobmirror renders the objects of the kustomize tree, and its values do what they say.

``helm template`` against ``kubectl kustomize`` (both built from their Go modules and cached,
clusterbed.build). Differences that are the chart's convention rather than a change are
normalised explicitly, each in one place (:func:`normalise_helm`, :func:`normalise_kustomize`):

* the Namespace: only kustomize makes it; Helm stores its release in the namespace before it
  creates anything, so the namespace comes first (``kubectl apply -f deploy/manager/namespace.yaml``);
* Helm's standard labels (``helm.sh/chart``, ``app.kubernetes.io/managed-by``, ``.../instance``,
  ``.../version``) on the objects' metadata (never in selectors or Pod templates);
* the ConfigMap name: kustomize appends a content hash (``jobmirror-config-<hash>``) so a config
  change rolls the Pods; the chart keeps ``jobmirror-config`` and rolls them with ``checksum/*``
  Pod annotations, which are dropped;
* files inside ConfigMaps (config.yaml, in-cluster.kubeconfig) are compared as parsed YAML
  (comments and key order differ).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterbed import build, versions
from mirror.config import load_config

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "jobmirror"
MONITORING = ROOT / "deploy" / "monitoring"
NS = "jobmirror-system"

HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
               "app.kubernetes.io/version")
CHECKSUMS = ("checksum/config", "checksum/worker-kubeconfigs")
YAML_FILES = ("config.yaml", "in-cluster.kubeconfig")

Obj = dict[str, Any]
#: What a render passes unless its values say otherwise: the chart has no default Pod CIDR (it
#: fails without one); kind's is the one deploy/manager/networkpolicy.yaml ships.
POD_CIDRS = ("--set-json", 'networkPolicy.podCIDRs=["10.244.0.0/16"]')


@pytest.fixture(scope="module")
def helm() -> Path:
    return build.build_helm()  # cached: the bootstrap builds it


@pytest.fixture(scope="module")
def kubectl() -> Path:
    return build.build_kubernetes(versions.KUBE_VERSION) / "kubectl"


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)


def render(helm: Path, values: Obj | None = None, *, release: str = "jobmirror", namespace: str = NS,
           tmp: Path | None = None) -> list[Obj]:
    args: list[str | Path] = [helm, "template", release, CHART, "--namespace", namespace]
    if not (values and "networkPolicy" in values):
        args += POD_CIDRS
    if values:
        assert tmp is not None
        f = tmp / "values.yaml"
        f.write_text(yaml.safe_dump(values))
        args += ["--values", f]
    proc = run(*args)
    assert proc.returncode == 0, f"helm template failed:\n{proc.stderr}"
    assert not proc.stderr.strip(), f"helm template warned:\n{proc.stderr}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def render_error(helm: Path, values: Obj, tmp: Path) -> str:
    f = tmp / "bad-values.yaml"
    f.write_text(yaml.safe_dump(values))
    cidrs = () if "networkPolicy" in values else POD_CIDRS
    proc = run(helm, "template", "jobmirror", CHART, "--namespace", NS, *cidrs, "--values", f)
    assert proc.returncode != 0, f"helm template accepted {values}"
    return proc.stderr


def kustomize(kubectl: Path, path: str) -> list[Obj]:
    proc = run(kubectl, "kustomize", ROOT / path)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def key(o: Obj) -> tuple[str, str, str]:
    return o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]


def by_key(objs: list[Obj]) -> dict[tuple[str, str, str], Obj]:
    out = {key(o): o for o in objs}
    assert len(out) == len(objs), "two objects with one kind/namespace/name"
    return out


def _parse_files(o: Obj) -> None:
    if o["kind"] == "ConfigMap":
        for name in YAML_FILES:
            if name in o.get("data", {}):
                o["data"][name] = yaml.safe_load(o["data"][name])


def normalise_helm(objs: list[Obj]) -> dict[tuple[str, str, str], Obj]:
    for o in objs:
        labels = o["metadata"].get("labels") or {}
        for label in HELM_LABELS:
            assert label in labels, f"{key(o)} lacks Helm's standard label {label}"
            del labels[label]
        if o["kind"] == "Deployment":
            annotations = o["spec"]["template"]["metadata"]["annotations"]
            assert "checksum/config" in annotations, "a config change must roll the Pods"
            for a in CHECKSUMS:
                annotations.pop(a, None)
        _parse_files(o)
    return by_key(objs)


def normalise_kustomize(objs: list[Obj]) -> dict[tuple[str, str, str], Obj]:
    for o in objs:
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("jobmirror-config-"):
            o["metadata"]["name"] = "jobmirror-config"
        if o["kind"] == "Deployment":
            for v in o["spec"]["template"]["spec"]["volumes"]:
                if "configMap" in v:
                    v["configMap"]["name"] = re.sub(r"^jobmirror-config-\w+$", "jobmirror-config",
                                                    v["configMap"]["name"])
        _parse_files(o)
    objs = [o for o in objs if o["kind"] != "Namespace"]
    return by_key(objs)


def assert_same(chart: dict[tuple[str, str, str], Obj], kust: dict[tuple[str, str, str], Obj]) -> None:
    assert sorted(chart) == sorted(kust), (f"only in the chart: {sorted(set(chart) - set(kust))}\n"
                                           f"only in kustomize: {sorted(set(kust) - set(chart))}")
    for k in kust:
        assert chart[k] == kust[k], (f"{k} differs:\n--- chart\n{yaml.safe_dump(chart[k])}\n"
                                     f"--- kustomize\n{yaml.safe_dump(kust[k])}")


def test_default_values_render_deploy(helm: Path, kubectl: Path) -> None:
    """helm template with the default values == kubectl kustomize deploy/ (normalised as the module says)"""
    kust = kustomize(kubectl, "deploy")
    assert {key(o) for o in kust if o["kind"] == "Namespace"} == {("Namespace", "", NS)}
    assert_same(normalise_helm(render(helm)), normalise_kustomize(kust))


def test_manager_as_worker_renders_deploy_manager_as_worker(helm: Path, kubectl: Path, tmp_path: Path) -> None:
    """managerAsWorker.enabled + workers [worker-1] == kubectl kustomize deploy/manager-as-worker/"""
    chart = render(helm, {"managerAsWorker": {"enabled": True}, "workers": [{"name": "worker-1"}]}, tmp=tmp_path)
    assert_same(normalise_helm(chart), normalise_kustomize(kustomize(kubectl, "deploy/manager-as-worker")))


JOBSET_KINDS = {"config": {"kinds": ["Job", "JobSet"]}}


def with_jobsets(kust: dict[tuple[str, str, str], Obj]) -> dict[tuple[str, str, str], Obj]:
    """A kustomize render with the config's kinds switched to [Job, JobSet], as an operator edits it."""
    cm = kust[("ConfigMap", NS, "jobmirror-config")]
    assert cm["data"]["config.yaml"]["kinds"] == ["Job"], "deploy/'s config names its kinds"
    cm["data"]["config.yaml"]["kinds"] = ["Job", "JobSet"]
    return kust


def test_jobset_kind_renders_deploy_plus_deploy_jobset(helm: Path, kubectl: Path, tmp_path: Path) -> None:
    """config.kinds [Job, JobSet] == deploy/ + deploy/jobset/manager/ (and the manager-as-worker pair)"""
    kust = kustomize(kubectl, "deploy") + kustomize(kubectl, "deploy/jobset/manager")
    assert_same(normalise_helm(render(helm, JOBSET_KINDS, tmp=tmp_path)), with_jobsets(normalise_kustomize(kust)))
    story1 = {**JOBSET_KINDS, "managerAsWorker": {"enabled": True}, "workers": [{"name": "worker-1"}]}
    kust = kustomize(kubectl, "deploy/manager-as-worker") + kustomize(kubectl, "deploy/jobset/manager-as-worker")
    assert_same(normalise_helm(render(helm, story1, tmp=tmp_path)), with_jobsets(normalise_kustomize(kust)))


def test_jobsets_are_granted_only_when_mirrored(helm: Path, tmp_path: Path) -> None:
    """no jobset.x-k8s.io rule unless config.kinds names JobSet; then only jobsets and jobsets/status"""
    def jobset_rules(objs: list[Obj]) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
        return [(o["metadata"]["name"], tuple(r["resources"]), tuple(r["verbs"])) for o in objs
                if o["kind"] == "ClusterRole" for r in o["rules"] if "jobset.x-k8s.io" in r["apiGroups"]]

    assert jobset_rules(render(helm)) == []
    assert jobset_rules(render(helm, {"config": {"kinds": ["JobSet"]}}, tmp=tmp_path)) != []
    got = jobset_rules(render(helm, JOBSET_KINDS, release="prod", namespace="ops", tmp=tmp_path))
    assert got == [("prod-jobmirror-controller-jobsets", ("jobsets",), ("get", "list", "watch", "patch")),
                   ("prod-jobmirror-controller-jobsets", ("jobsets/status",), ("update",))]
    binding = next(o for o in render(helm, JOBSET_KINDS, release="prod", namespace="ops", tmp=tmp_path)
                   if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"].endswith("-jobsets"))
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prod-jobmirror", "namespace": "ops"}]


def config_of(objs: list[Obj], tmp: Path) -> Any:
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-config"))
    for name, text in cm["data"].items():
        (tmp / name).write_text(text)
    return load_config(tmp / "config.yaml")


def test_rendered_config_loads_with_the_controllers_parser(helm: Path, tmp_path: Path) -> None:
    """the config.yaml the chart renders passes mirror.config (both layouts, and every documented knob)"""
    cfg = config_of(render(helm), tmp_path)
    assert [w.name for w in cfg.workers] == ["worker-1", "worker-2"]
    assert str(cfg.workers[0].kubeconfig) == "/etc/jobmirror/workers/worker-1.kubeconfig"
    assert cfg.leader_election.enabled and cfg.leader_election.namespace == NS
    values = {"managerAsWorker": {"enabled": True},
              "workers": [{"name": "gpu", "context": "gpu-ctx", "labels": {"pool": "gpu"}, "qps": 50}],
              "workerKubeconfigs": {"kubeconfigs": {"gpu.kubeconfig": "apiVersion: v1\nkind: Config\n",
                                                    "worker-1.kubeconfig": None, "worker-2.kubeconfig": None}},
              "leaderElection": {"leaseName": "jm", "leaseDuration": 30, "renewDeadline": 20, "retryPeriod": 4},
              "metricsPort": 9090,
              "config": {"controllerName": "example.com/mirror", "namespaces": ["team-a"], "workerLostTimeout": 600,
                         "placement": "RoundRobin"}}
    objs = render(helm, values, tmp=tmp_path)
    cfg = config_of(objs, tmp_path)
    assert [w.name for w in cfg.workers] == ["manager", "gpu"]
    secret = next(o for o in objs if o["kind"] == "Secret")
    assert set(secret["stringData"]) == {"gpu.kubeconfig"}, "null drops an example kubeconfig"
    gpu = cfg.workers[1]
    assert (gpu.context, gpu.labels, gpu.qps) == ("gpu-ctx", {"pool": "gpu"}, 50)
    assert (cfg.leader_election.lease_name, cfg.leader_election.lease_duration) == ("jm", 30)
    assert (cfg.metrics_address, cfg.namespaces, cfg.worker_lost_timeout) == (":9090", ["team-a"], 600)
    role = next(o for o in objs if o["kind"] == "Role" and o["metadata"]["name"].endswith("leader-election"))
    assert role["rules"][1]["resourceNames"] == ["jm"], "the Role must name the configured Lease"
    vap = next(o for o in objs if o["kind"] == "ValidatingAdmissionPolicy")
    assert "'example.com/mirror'" in json.dumps(vap["spec"]["variables"]), "the policy must allow our controllerName"
    deploy = next(o for o in objs if o["kind"] == "Deployment")
    assert deploy["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == 9090


def test_release_name_and_namespace_flow_into_identities(helm: Path, tmp_path: Path) -> None:
    """another release/namespace: prefixed names, and the policy, Role and config name the right ServiceAccount"""
    objs = render(helm, release="prod", namespace="ops")
    names = {key(o) for o in objs}
    assert {("ServiceAccount", "ops", "prod-jobmirror"), ("Deployment", "ops", "prod-jobmirror-controller")} <= names
    vap = next(o for o in objs if o["kind"] == "ValidatingAdmissionPolicy")
    assert vap["spec"]["matchConditions"][0]["expression"] == (
        "request.userInfo.username == 'system:serviceaccount:ops:prod-jobmirror'")
    binding = next(o for o in objs if o["kind"] == "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prod-jobmirror", "namespace": "ops"}]
    assert config_of(objs, tmp_path).leader_election.namespace == "ops"
    schemas = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "FlowSchema"}
    assert set(schemas) == {"prod-jobmirror", "prod-jobmirror-leader-election"}
    for spec in schemas.values():
        assert spec["rules"][0]["subjects"] == [
            {"kind": "ServiceAccount", "serviceAccount": {"name": "prod-jobmirror", "namespace": "ops"}}]
    assert schemas["prod-jobmirror"]["priorityLevelConfiguration"] == {"name": "prod-jobmirror"}
    assert schemas["prod-jobmirror-leader-election"]["rules"][0]["resourceRules"][0]["namespaces"] == ["ops"]


def test_inspect_toggles(helm: Path, tmp_path: Path) -> None:
    """inspect API: off removes its Service, port, reviews and address; proxy grant separately; release-named"""
    objs = render(helm, {"inspect": {"enabled": False}}, tmp=tmp_path)
    names = {key(o) for o in objs}
    assert not {k for k in names if "inspect" in k[2]}
    assert config_of(objs, tmp_path).inspect_address == ""
    rules = next(o for o in objs if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "jobmirror-controller")
    assert not [r for r in rules["rules"] if "tokenreviews" in r["resources"]]
    ports = next(o for o in objs if o["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert [p["name"] for p in ports] == ["metrics"]

    objs = render(helm, {"inspect": {"proxyForAuthenticatedUsers": False, "port": 9443}}, tmp=tmp_path)
    assert not [o for o in objs if "inspect-proxy" in o["metadata"]["name"]]
    assert config_of(objs, tmp_path).inspect_address == ":9443"

    role = next(o for o in render(helm, release="prod", namespace="ops") if o["metadata"]["name"].endswith(
        "inspect-proxy") and o["kind"] == "Role")
    assert role["rules"][0]["resourceNames"] == ["https:prod-jobmirror-inspect:inspect"]


def test_toggles(helm: Path, tmp_path: Path) -> None:
    """admission policy, flow control, leader election, existing Secret, image, replicas, resources"""
    kinds = {o["kind"] for o in render(helm, {"admissionPolicy": {"enabled": False}}, tmp=tmp_path)}
    assert not kinds & {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

    kinds = {o["kind"] for o in render(helm, {"flowControl": {"enabled": False}}, tmp=tmp_path)}
    assert not kinds & {"FlowSchema", "PriorityLevelConfiguration"}

    objs = render(helm, {"leaderElection": {"enabled": False}, "replicas": 1}, tmp=tmp_path)
    assert not [o for o in objs if o["kind"] in ("Role", "RoleBinding", "FlowSchema")
                and "leader" in o["metadata"]["name"]]
    assert next(o for o in objs if o["kind"] == "Deployment")["spec"]["replicas"] == 1
    assert config_of(objs, tmp_path).leader_election.enabled is False

    values = {"workerKubeconfigs": {"existingSecret": "my-kubeconfigs"}, "image": {"repository": "r.example/jm",
              "tag": "1.2.3"}, "resources": {"requests": {"cpu": "1"}, "limits": None}}
    objs = render(helm, values, tmp=tmp_path)
    assert "Secret" not in {o["kind"] for o in objs}
    pod = next(o for o in objs if o["kind"] == "Deployment")["spec"]["template"]
    assert "checksum/worker-kubeconfigs" not in pod["metadata"]["annotations"]
    assert {"name": "worker-kubeconfigs", "secret": {"secretName": "my-kubeconfigs", "defaultMode": 0o440}} in \
        pod["spec"]["volumes"]
    container = pod["spec"]["containers"][0]
    # Helm merges maps with the defaults: null removes a default key.
    assert (container["image"], container["resources"]) == ("r.example/jm:1.2.3",
                                                            {"requests": {"cpu": "1", "memory": "128Mi"}})


def test_a_one_worker_install_ships_only_its_workers_kubeconfig(helm: Path, tmp_path: Path) -> None:
    """the example worker-2 key the defaults merge in never reaches the Secret (issue 33)"""
    text = "apiVersion: v1\nkind: Config\n"
    values = {"workers": [{"name": "prod-1"}], "workerKubeconfigs": {"kubeconfigs": {"prod-1.kubeconfig": text}}}
    secret = next(o for o in render(helm, values, tmp=tmp_path) if o["kind"] == "Secret")
    assert secret["stringData"] == {"prod-1.kubeconfig": text}


def test_config_change_rolls_the_pods(helm: Path, tmp_path: Path) -> None:
    """a different config gives a different checksum/config Pod annotation"""
    def checksum(values: Obj | None) -> str:
        d = next(o for o in render(helm, values, tmp=tmp_path) if o["kind"] == "Deployment")
        return str(d["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum(None) != checksum({"config": {"placement": "RoundRobin"}})


@pytest.mark.parametrize(("values", "message"), [
    ({"config": {"workers": []}}, "config.workers: set it through the chart's own values"),
    ({"config": {"metricsAddress": ":1"}}, "config.metricsAddress"),
    ({"workers": [{"kubeconfig": "/x"}]}, r"workers\[0\].name: required"),
    ({"workers": []}, "workers: at least one worker is required"),
    ({"leaderElection": {"enabled": False}}, "replicas: more than 1 needs leaderElection.enabled"),
    ({"workerKubeconfigs": {"kubeconfigs": None}}, "workerKubeconfigs: set existingSecret, or kubeconfigs"),
    ({"workers": [{"name": "east"}]}, "workerKubeconfigs.kubeconfigs: no key east.kubeconfig for worker east"),
    ({"networkPolicy": {"enabled": True}}, r"networkPolicy.podCIDRs: set your cluster's Pod CIDR\(s\)"),
    ({"networkPolicy": {"podCIDRs": []}}, "or set networkPolicy.enabled=false: without them the inspect port"),
    ({"config": {"placment": "RoundRobin"}}, "placment"),
    ({"config": {"placement": "Nearest"}}, "placement"),
    ({"replica": 3}, "replica"),  # values.schema.json: no unknown top-level key either
])
def test_bad_values_fail_naming_the_value(helm: Path, tmp_path: Path, values: Obj, message: str) -> None:
    assert re.search(message, render_error(helm, values, tmp_path))


def test_monitoring_toggles(helm: Path, tmp_path: Path) -> None:
    """ServiceMonitor selects the metrics Service's port; PrometheusRule and dashboard are deploy/monitoring/'s"""
    objs = render(helm, {"serviceMonitor": {"enabled": True, "labels": {"release": "kps"}},
                         "prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}}, tmp=tmp_path)
    k = by_key(objs)
    svc = k[("Service", NS, "jobmirror-metrics")]
    sm = k[("ServiceMonitor", NS, "jobmirror-controller")]
    assert sm["metadata"]["labels"]["release"] == "kps"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] in {p["name"] for p in svc["spec"]["ports"]}
    shipped = yaml.safe_load((MONITORING / "jobmirror-alerts.yaml").read_text())
    assert k[("PrometheusRule", NS, "jobmirror-alerts")]["spec"] == shipped["spec"]
    dash = k[("ConfigMap", NS, "jobmirror-dashboard")]
    assert dash["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dash["data"]["jobmirror-dashboard.json"]) == \
        json.loads((MONITORING / "jobmirror-dashboard.json").read_text())
    defaults = {o["kind"] for o in render(helm)}
    assert not defaults & {"ServiceMonitor", "PrometheusRule"}, "monitoring objects need their toggles"


def test_network_policy_needs_pod_cidrs_or_is_off(helm: Path, tmp_path: Path) -> None:
    """the user's Pod CIDRs land in the policy's except list; disabled, no policy and no CIDRs needed"""
    objs = render(helm, {"networkPolicy": {"podCIDRs": ["10.0.0.0/14", "172.16.0.0/16"]}}, tmp=tmp_path)
    pol = next(o for o in objs if o["kind"] == "NetworkPolicy")
    assert pol["spec"]["ingress"][0]["from"][0]["ipBlock"]["except"] == ["10.0.0.0/14", "172.16.0.0/16"]
    objs = render(helm, {"networkPolicy": {"enabled": False}}, tmp=tmp_path)
    assert "NetworkPolicy" not in {o["kind"] for o in objs}


@pytest.mark.parametrize("name", ["jobmirror-alerts.yaml", "jobmirror-dashboard.json"])
def test_chart_copies_of_the_monitoring_files_are_identical(name: str) -> None:
    """Helm cannot read files outside the chart (symlinks warn on every command): it keeps copies"""
    assert (CHART / "files" / name).read_bytes() == (MONITORING / name).read_bytes(), (
        f"cp deploy/monitoring/{name} deploy/helm/jobmirror/files/")


ALL_TOGGLES = {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True},
               "grafanaDashboard": {"enabled": True}, "managerAsWorker": {"enabled": True}}


@pytest.mark.parametrize("values", [None, ALL_TOGGLES])
def test_helm_lint_strict_is_clean(helm: Path, tmp_path: Path, values: Obj | None) -> None:
    """helm lint --strict: no error and no warning (INFO lines only, e.g. "icon is recommended")"""
    args: list[str | Path] = [helm, "lint", "--strict", CHART, *POD_CIDRS]
    if values:
        (tmp_path / "v.yaml").write_text(yaml.safe_dump(values))
        args += ["--values", tmp_path / "v.yaml"]
    proc = run(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    findings = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert all(line.startswith("[INFO]") for line in findings), findings
    assert "0 chart(s) failed" in proc.stdout
