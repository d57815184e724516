"""deploy/ is valid, least-privilege and enforced — checked against the real API servers.

None of these needs the controller to run; they need the environment of conftest.py:
deploy/ applied to the manager and deploy/worker/ to each worker.
"""

from __future__ import annotations

import asyncio
import copy
import uuid

import pytest
import yaml

from e2e.harness import (
    CONTROLLER_NAME,
    CONTROLLER_USER,
    DEPLOYMENT,
    DEPLOYMENTS,
    JOBSET_KUSTOMIZATIONS,
    LEASE_NAME,
    MANAGER_BASE,
    POD_RES,
    POLICY,
    SAR,
    SECRETS,
    SSAR,
    SSRR,
    STORY1_KUSTOMIZATION,
    SYSTEM_NS,
    WORKER_USER,
    E2EEnv,
    job_manifest,
)
from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, NAMESPACES, Obj, Resource
from testkit.waiting import ensure_namespace, wait_for

pytestmark = pytest.mark.e2e

Rule = tuple[str, str, str, str]  # apiGroup, resource[/subresource], verb, resourceName ("" = any)

# The contract, reviewed by hand: the server-side effective rules must be EXACTLY these.
# Adding a rule to deploy/ means adding it here, with its reason in deploy/*/rbac.yaml.
CONTROLLER_RULES: set[Rule] = {
    *{("batch", "jobs", v, "") for v in ("get", "list", "watch", "patch")},
    ("batch", "jobs/status", "update", ""),
    ("batch", "jobs/finalizers", "update", ""),
    *{("", "events", v, "") for v in ("create", "patch")},
    ("", "namespaces", "get", ""),  # role sharing (kube-system UID), Pod Security labels for created namespaces
    *{("", "namespaces", v, "") for v in ("list", "watch")},  # workers[].access namespaceSelector: their labels
    *{("scheduling.k8s.io", "priorityclasses", v, "") for v in ("list", "watch")},  # FairShare: Job priority
    ("authentication.k8s.io", "tokenreviews", "create", ""),  # inspect API: who is calling
    ("authorization.k8s.io", "subjectaccessreviews", "create", ""),  # inspect API: may they get the Job
}
#: every authenticated user, the controller too, may reach the inspect API through the service proxy
INSPECT_PROXY_RULES: set[Rule] = {("", "services/proxy", "get", "https:jobmirror-inspect:inspect")}
LEADER_ELECTION_RULES: set[Rule] = {
    ("coordination.k8s.io", "leases", "create", ""),
    ("coordination.k8s.io", "leases", "get", LEASE_NAME),
    ("coordination.k8s.io", "leases", "update", LEASE_NAME),
}
WORKER_RULES: set[Rule] = {
    *{("batch", "jobs", v, "") for v in ("get", "list", "watch", "create", "delete", "patch")},
    *{("", "namespaces", v, "") for v in ("get", "create")},
    *{("", "pods", v, "") for v in ("get", "list", "watch")},  # describe, logs, pod events, room (watch)
    *{("", "nodes", v, "") for v in ("list", "watch")},  # placement RoomAware: each node's room
    *{("scheduling.k8s.io", "priorityclasses", v, "") for v in ("list", "watch")},  # RoomAware: classes served
    *{("", "serviceaccounts", v, "") for v in ("list", "watch")},  # RoomAware: ServiceAccounts present
    ("", "pods/log", "get", ""),
    *{("", "events", v, "") for v in ("list", "watch")},  # Warning events mirrored onto manager Jobs
}
#: deploy/jobset/ (the chart with config.kinds [Job, JobSet]): the controller's JobSet rules on the
#: manager, and the worker's (also the controller's on a manager that is a worker).
JOBSET_CONTROLLER_RULES: set[Rule] = {
    *{("jobset.x-k8s.io", "jobsets", v, "") for v in ("get", "list", "watch", "patch")},
    ("jobset.x-k8s.io", "jobsets/status", "update", ""),
}
JOBSET_WORKER_RULES: set[Rule] = {
    *{("jobset.x-k8s.io", "jobsets", v, "") for v in ("get", "list", "watch", "create", "delete", "patch")},
}
# Granted to every authenticated identity by the default cluster roles; not ours.
_DEFAULT_RULES = {
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
}
# Read by every ServiceAccount by default: from Kubernetes 1.37 ClusterTrustBundle is GA and on,
# and the ClusterRoleBinding system:cluster-trust-bundle-discovery grants get/list/watch on them.
_DEFAULT_READS = {("certificates.k8s.io", "clustertrustbundles")}


def _jobsets_deployed(env: E2EEnv) -> bool:
    """The environment was brought up mirroring JobSets (kindbed's default): deploy/jobset/ is part of it."""
    return bool(getattr(env.kind, "jobsets", False))


def _controller_rules(env: E2EEnv) -> set[Rule]:
    rules = CONTROLLER_RULES | (WORKER_RULES if env.manager_worker else set())
    if _jobsets_deployed(env):
        rules |= JOBSET_CONTROLLER_RULES | (JOBSET_WORKER_RULES if env.manager_worker else set())
    return rules


def _worker_rules(env: E2EEnv) -> set[Rule]:
    return WORKER_RULES | (JOBSET_WORKER_RULES if _jobsets_deployed(env) else set())


async def effective_rules(client: ClusterClient, namespace: str) -> set[Rule]:
    """What the API server's authorizer says this client may do in ``namespace`` (SelfSubjectRulesReview)."""
    review = await client.create(SSRR, None, {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                                              "spec": {"namespace": namespace}})
    status = review["status"]
    assert not status.get("incomplete"), f"rules review incomplete: {status.get('evaluationError')}"
    rules: set[Rule] = set()
    for r in status.get("resourceRules", []):
        for g in r.get("apiGroups", []):
            for res in r.get("resources", []):
                if (g, res) in _DEFAULT_RULES:
                    continue
                for v in r.get("verbs", []):
                    if (g, res) in _DEFAULT_READS and v in ("get", "list", "watch"):
                        continue
                    for name in r.get("resourceNames") or [""]:
                        rules.add((g, res, v, name))
    return rules


async def sar(admin: ClusterClient, user: str, *, verb: str, resource: str, group: str = "", namespace: str = "",
              subresource: str = "", name: str = "") -> bool:
    """SubjectAccessReview for a ServiceAccount user (with its groups), asked by the admin."""
    sa_ns = user.split(":")[2]
    attrs = {k: v for k, v in {"verb": verb, "group": group, "resource": resource, "namespace": namespace,
                                "subresource": subresource, "name": name}.items() if v or k == "group"}
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": ["system:serviceaccounts", f"system:serviceaccounts:{sa_ns}",
                                               "system:authenticated"], "resourceAttributes": attrs}}
    review = await admin.create(SAR, None, body)
    return bool(review["status"].get("allowed"))


def _fmt(rules: set[Rule]) -> str:
    lines = [f"  {g or 'core'} {res} {v}{f' [{n}]' if n else ''}" for g, res, v, n in sorted(rules)]
    return "\n".join(lines) or "  (none)"


# -- kustomize / server-side validation ------------------------------------------------------


async def test_kustomizations_pass_server_side_dry_run(e2e_env: E2EEnv) -> None:
    """kubectl apply -k --dry-run=server: deploy/, deploy/manager-as-worker/, deploy/worker/"""
    assert e2e_env.dry_runs, "no dry run was recorded"
    problems = []
    for (cluster, kust), proc in e2e_env.dry_runs.items():
        if proc.returncode != 0:
            problems.append(f"{cluster}: kubectl apply -k {kust} --dry-run=server → {proc.returncode}\n{proc.stderr}")
        elif "would violate PodSecurity" in proc.stderr:
            problems.append(f"{cluster}: {kust}: Pod Security warnings:\n{proc.stderr}")
        elif "(server dry run)" not in proc.stdout:
            problems.append(f"{cluster}: {kust}: not a server dry run?\n{proc.stdout}")
    assert not problems, "\n".join(problems)
    if e2e_env.provider == "local":
        assert {k for _, k in e2e_env.dry_runs} >= {"deploy", "deploy/manager-as-worker", "deploy/worker",
                                                    "deploy/jobset/manager", "deploy/jobset/manager-as-worker",
                                                    "deploy/jobset/worker"}


async def test_admission_policy_type_checks_against_the_job_schema(e2e_env: E2EEnv) -> None:
    """both ValidatingAdmissionPolicies compile against batch/v1 Job without type warnings"""
    vap = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy",
                   namespaced=False)

    for name in (POLICY, "jobmirror-reserved-keys"):
        async def checked(name: str = name) -> Obj | None:
            p = await e2e_env.manager.get(vap, None, name)
            st = p.get("status", {})
            return p if st.get("observedGeneration") == p["metadata"]["generation"] and "typeChecking" in st else None

        policy = await wait_for(checked, timeout=30, what=f"type checking of {name}")
        assert not policy["status"]["typeChecking"].get("expressionWarnings"), policy["status"]


def test_shipped_config_files_are_valid() -> None:
    """config files shipped in deploy/ load with the controller's own config parser"""
    from mirror.config import load_config

    base = load_config(MANAGER_BASE / "files" / "config.yaml")
    story1 = load_config(STORY1_KUSTOMIZATION / "config.yaml")
    for cfg in (base, story1):
        assert cfg.manager_kubeconfig is None, "in-cluster identity expected on the manager"
        assert cfg.leader_election.enabled and cfg.leader_election.namespace == SYSTEM_NS
        assert cfg.leader_election.lease_name == LEASE_NAME
        assert cfg.controller_name == CONTROLLER_NAME, "the admission policy names this controller"
    assert [w.name for w in base.workers] == ["worker-1", "worker-2"]
    assert "manager" in [w.name for w in story1.workers]


# -- Pod Security ----------------------------------------------------------------------------


async def test_controller_pods_are_admitted_under_restricted_pod_security(e2e_env: E2EEnv) -> None:
    """controller Pods pass Pod Security 'restricted' (enforced on jobmirror-system)"""
    env = e2e_env
    ns = await env.manager.get(NAMESPACES, None, SYSTEM_NS)
    assert ns["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "restricted"
    dep = await env.manager.get(DEPLOYMENTS, SYSTEM_NS, DEPLOYMENT)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"generateName": "psa-check-", "labels": dep["spec"]["template"]["metadata"]["labels"]},
           "spec": copy.deepcopy(dep["spec"]["template"]["spec"])}
    # Enforcement, not just the warning: a server-side dry-run create runs the PodSecurity admission plugin.
    await env.manager.create(POD_RES, SYSTEM_NS, pod, dry_run=True)
    # ... and it is really enforced here: the same Pod without its securityContext is rejected.
    bad = copy.deepcopy(pod)
    bad["spec"].pop("securityContext", None)
    for c in bad["spec"]["containers"]:
        c.pop("securityContext", None)
    with pytest.raises(ApiError) as exc:
        await env.manager.create(POD_RES, SYSTEM_NS, bad, dry_run=True)
    assert exc.value.status == 403 and "PodSecurity" in exc.value.message, exc.value

    # The ReplicaSet controller created the Deployment's Pods: admitted under enforce=restricted.
    async def pods() -> list[Obj] | None:
        items, _ = await env.manager.list_all(POD_RES, SYSTEM_NS, label_selector="app.kubernetes.io/name=jobmirror")
        return items if len(items) >= dep["spec"]["replicas"] else None

    await wait_for(pods, timeout=60, what="the controller Deployment's Pods to be created")


async def test_deployment_has_the_production_shape(e2e_env: E2EEnv) -> None:
    """Deployment: 2 replicas + leader election, probes, resources, read-only mounts, metrics Service"""
    env = e2e_env
    dep = await env.manager.get(DEPLOYMENTS, SYSTEM_NS, DEPLOYMENT)
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    assert spec["replicas"] == 2
    assert pod["serviceAccountName"] == "jobmirror"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["resources"]["requests"] and c["resources"]["limits"].get("memory")
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert all(m.get("readOnly") for m in c["volumeMounts"] if m["name"] in ("config", "worker-kubeconfigs"))
    config_map = next(v["configMap"]["name"] for v in pod["volumes"] if v["name"] == "config")
    cm = await env.manager.get(Resource("", "v1", "configmaps", "ConfigMap"), SYSTEM_NS, config_map)
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    assert cfg["leaderElection"] == {"enabled": True, "namespace": SYSTEM_NS, "leaseName": LEASE_NAME}
    assert "managerKubeconfig" not in cfg, "in-cluster config expected on the manager"
    assert cfg["metricsAddress"].endswith(":8080")
    secret_keys = set((await env.manager.get(SECRETS, SYSTEM_NS, "jobmirror-worker-kubeconfigs")).get("data", {}))
    for w in cfg["workers"]:
        if w["kubeconfig"].startswith("/etc/jobmirror/workers/"):
            assert w["kubeconfig"].rsplit("/", 1)[1] in secret_keys, (w, secret_keys)
    svc = await env.manager.get(Resource("", "v1", "services", "Service"), SYSTEM_NS, "jobmirror-metrics")
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics"
    assert svc["spec"]["selector"].items() <= spec["template"]["metadata"]["labels"].items()


# -- RBAC: exactly the documented rules, nothing more ------------------------------------------


async def test_controller_serviceaccount_has_exactly_the_documented_rules(e2e_env: E2EEnv) -> None:
    """manager: the controller ServiceAccount's effective rules are exactly the documented ones"""
    env = e2e_env
    sa = await env.controller_client()
    elsewhere = f"e2e-rbac-{uuid.uuid4().hex[:6]}"
    await ensure_namespace(env.manager, elsewhere)
    want = _controller_rules(env)
    got = await effective_rules(sa, elsewhere)
    assert got == want, f"in {elsewhere}:\nmissing:\n{_fmt(want - got)}\nexcess:\n{_fmt(got - want)}"
    want_sys = want | LEADER_ELECTION_RULES | INSPECT_PROXY_RULES
    got_sys = await effective_rules(sa, SYSTEM_NS)
    assert got_sys == want_sys, (f"in {SYSTEM_NS}:\nmissing:\n{_fmt(want_sys - got_sys)}\n"
                                 f"excess:\n{_fmt(got_sys - want_sys)}")
    await env.manager.delete(NAMESPACES, None, elsewhere)


async def test_worker_identity_has_exactly_the_documented_rules(e2e_env: E2EEnv) -> None:
    """workers: the jobmirror-worker identity's effective rules are exactly the documented ones"""
    env = e2e_env
    assert env.separate_workers(), "no separate worker cluster"
    for name in env.separate_workers():
        sa = await env.worker_sa_client(name)
        want = _worker_rules(env)
        for ns in ("default", SYSTEM_NS):
            got = await effective_rules(sa, ns)
            assert got == want, f"{name}/{ns}:\nmissing:\n{_fmt(want - got)}\nexcess:\n{_fmt(got - want)}"


async def test_the_jobset_opt_in_adds_exactly_the_documented_rules(e2e_env: E2EEnv) -> None:
    """deploy/jobset/: applied, both identities gain exactly the JobSet rules; removed, they are gone again"""
    env = e2e_env
    if _jobsets_deployed(env):  # part of this deployment: the exact-rule tests above cover it, keep it
        pytest.skip("deploy/jobset/ is part of this deployment (kindbed mirrors JobSets)")
    story1 = bool(env.manager_worker)
    manager_kust = JOBSET_KUSTOMIZATIONS / ("manager-as-worker" if story1 else "manager")
    worker_kust = JOBSET_KUSTOMIZATIONS / "worker"
    want = _controller_rules(env) | JOBSET_CONTROLLER_RULES | (JOBSET_WORKER_RULES if story1 else set())
    workers = env.separate_workers()
    try:
        await asyncio.to_thread(env.kubectl, "apply", "-k", str(manager_kust))
        for name in workers:
            await asyncio.to_thread(env.kubectl_for(name), "apply", "-k", str(worker_kust))
        sa = await env.controller_client()
        got = await effective_rules(sa, "default")
        assert got == want, f"manager:\nmissing:\n{_fmt(want - got)}\nexcess:\n{_fmt(got - want)}"
        for name in workers:
            got = await effective_rules(await env.worker_sa_client(name), "default")
            want_w = WORKER_RULES | JOBSET_WORKER_RULES
            assert got == want_w, f"{name}:\nmissing:\n{_fmt(want_w - got)}\nexcess:\n{_fmt(got - want_w)}"
    finally:
        await asyncio.to_thread(env.kubectl, "delete", "-k", str(manager_kust), "--ignore-not-found")
        for name in workers:
            await asyncio.to_thread(env.kubectl_for(name), "delete", "-k", str(worker_kust), "--ignore-not-found")

    async def back_to_base() -> bool | None:
        return await effective_rules(sa, "default") == _controller_rules(env) or None

    await wait_for(back_to_base, timeout=30, what="the JobSet rules to be gone once deploy/jobset/ is deleted")


DENIED_ON_MANAGER = [
    # (verb, group, resource, subresource, namespace, name)
    ("get", "", "secrets", "", "kube-system", ""),
    ("list", "", "secrets", "", "", ""),
    ("watch", "", "secrets", "", "default", ""),
    ("get", "", "secrets", "", SYSTEM_NS, "jobmirror-worker-kubeconfigs"),  # mounted as a volume, never read via API
    ("get", "", "configmaps", "", "kube-system", ""),
    ("create", "", "pods", "", "default", ""),
    ("create", "", "serviceaccounts", "token", SYSTEM_NS, "jobmirror"),
    ("update", "coordination.k8s.io", "leases", "", "kube-system", "kube-controller-manager"),
    ("update", "coordination.k8s.io", "leases", "", SYSTEM_NS, "someone-elses-lease"),
    ("delete", "coordination.k8s.io", "leases", "", SYSTEM_NS, LEASE_NAME),
    ("deletecollection", "batch", "jobs", "", "default", ""),
    ("create", "batch", "cronjobs", "", "default", ""),
    ("get", "", "nodes", "", "", "x"),
    ("bind", "rbac.authorization.k8s.io", "clusterroles", "", "", "cluster-admin"),
    ("escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", "jobmirror-controller"),
    ("create", "rbac.authorization.k8s.io", "rolebindings", "", SYSTEM_NS, ""),
    ("delete", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", "", "", POLICY),
    ("update", "admissionregistration.k8s.io", "validatingadmissionpolicies", "", "", POLICY),
    ("delete", "", "namespaces", "", "", "default"),
    ("patch", "batch", "jobs", "status", "default", "any"),  # status is written whole (update), never patched
    ("update", "batch", "jobs", "", "default", "any"),  # metadata is patched, never replaced
]
DENIED_ON_MANAGER_UNLESS_WORKER = [
    ("create", "batch", "jobs", "", "default", ""),
    ("delete", "batch", "jobs", "", "default", ""),
    ("create", "", "namespaces", "", "", ""),
    ("list", "", "pods", "", "", ""),
    ("list", "", "nodes", "", "", ""),  # placement RoomAware reads a worker's nodes
]
ALLOWED_ON_MANAGER = [
    ("get", "", "namespaces", "", "", "kube-system"),
    ("get", "", "namespaces", "", "", "default"),
    ("watch", "", "namespaces", "", "", ""),  # workers[].access namespaceSelector
    ("list", "batch", "jobs", "", "", ""),
    ("watch", "batch", "jobs", "", "", ""),
    ("update", "batch", "jobs", "status", "default", "any"),
    ("patch", "batch", "jobs", "", "default", "any"),
    ("create", "", "events", "", "default", ""),
    ("get", "coordination.k8s.io", "leases", "", SYSTEM_NS, LEASE_NAME),
    ("create", "coordination.k8s.io", "leases", "", SYSTEM_NS, ""),
]


async def test_controller_serviceaccount_access_reviews(e2e_env: E2EEnv) -> None:
    """manager: SubjectAccessReviews — no Secrets anywhere, no Pods, no escalation, no foreign Leases"""
    env = e2e_env
    denied = DENIED_ON_MANAGER + ([] if env.manager_worker else DENIED_ON_MANAGER_UNLESS_WORKER)
    wrong = []
    for expect, cases in ((False, denied), (True, ALLOWED_ON_MANAGER)):
        for verb, group, res, sub, ns, name in cases:
            allowed = await sar(env.manager, CONTROLLER_USER, verb=verb, group=group, resource=res, subresource=sub,
                                namespace=ns, name=name)
            if allowed != expect:
                what = f"{verb} {group or 'core'}/{res}{('/' + sub) if sub else ''} ns={ns or '*'} {name}"
                wrong.append(f"{'DENIED but needed' if expect else 'ALLOWED but must be denied'}: {what}")
    assert not wrong, "\n".join(wrong)

    # The ServiceAccount asks for itself, and tries for real.
    sa = await env.controller_client()
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "list", "resource": "secrets"}}}
    review = await sa.create(SSAR, None, body)
    assert review["status"].get("allowed") is not True, review["status"]
    for ns in ("kube-system", "default"):
        with pytest.raises(ApiError) as exc:
            await sa.list(SECRETS, ns)
        assert exc.value.status == 403, exc.value


async def test_worker_identity_access_reviews(e2e_env: E2EEnv) -> None:
    """workers: SubjectAccessReviews — Jobs, namespaces, reads of pods/logs/events; no Secrets, pod writes, status"""
    env = e2e_env
    denied = [
        ("get", "", "secrets", "", "kube-system", ""), ("list", "", "secrets", "", "", ""),
        ("create", "", "pods", "", "default", ""), ("delete", "", "pods", "", "default", ""),
        ("create", "", "pods", "exec", "default", "x"), ("create", "", "pods", "portforward", "default", "x"),
        ("update", "batch", "jobs", "status", "default", "x"), ("patch", "batch", "jobs", "status", "default", "x"),
        ("list", "", "namespaces", "", "", ""), ("delete", "", "namespaces", "", "", "default"),
        ("update", "", "namespaces", "", "", "default"), ("get", "", "nodes", "", "", "x"),
        ("update", "", "nodes", "", "", "x"), ("patch", "", "nodes", "status", "", "x"),
        ("create", "", "serviceaccounts", "token", SYSTEM_NS, "jobmirror-worker"),
        ("create", "batch", "cronjobs", "", "default", ""), ("create", "", "events", "", "default", ""),
    ]
    allowed = [
        ("create", "batch", "jobs", "", "any-namespace", ""), ("delete", "batch", "jobs", "", "any-namespace", "x"),
        ("watch", "batch", "jobs", "", "", ""), ("get", "", "namespaces", "", "", "x"),
        ("create", "", "namespaces", "", "", ""), ("get", "", "pods", "log", "any-namespace", "x"),
        ("watch", "", "events", "", "", ""), ("watch", "", "pods", "", "", ""), ("list", "", "nodes", "", "", ""),
        ("watch", "", "nodes", "", "", ""),
    ]
    wrong = []
    for name, client in env.separate_workers().items():
        for verb, group, res, sub, ns, obj in denied:
            if await sar(client, WORKER_USER, verb=verb, group=group, resource=res, subresource=sub, namespace=ns,
                         name=obj):
                wrong.append(f"{name}: ALLOWED but must be denied: {verb} {group or 'core'}/{res} {sub} ns={ns}")
        for verb, group, res, sub, ns, obj in allowed:
            if not await sar(client, WORKER_USER, verb=verb, group=group, resource=res, subresource=sub, namespace=ns,
                             name=obj):
                wrong.append(f"{name}: DENIED but needed: {verb} {group or 'core'}/{res} {sub} ns={ns}")
    assert not wrong, "\n".join(wrong)


# -- the ValidatingAdmissionPolicy: only our Jobs ---------------------------------------------------


async def _status_replace_refused(sa: ClusterClient, ns: str, name: str, tries: int = 5) -> ApiError:
    """The error a status replace of ``name`` gets. A conflict is not the answer being tested (the Job
    controller wrote the Job's status between our read and our write): read it again."""
    for _ in range(tries):
        job = await sa.get(JOBS, ns, name)
        try:
            await sa.replace(JOBS, ns, name, job, subresource="status")
        except ApiError as exc:
            if exc.conflict:
                continue
            return exc
        raise AssertionError(f"the controller's ServiceAccount replaced the status of {ns}/{name}")
    raise AssertionError(f"{tries} conflicts in a row replacing the status of {ns}/{name}")


async def test_admission_policy_limits_the_controller_to_its_own_jobs(e2e_env: E2EEnv) -> None:
    """ValidatingAdmissionPolicy: the controller cannot write a Job (or its status) that it does not manage"""
    env = e2e_env
    ns = f"e2e-vap-{uuid.uuid4().hex[:6]}"
    await ensure_namespace(env.manager, ns)
    img = env.pod_image
    await env.manager.create(JOBS, ns, job_manifest("foreign", image=img, suspend=True, managed_by=None))
    await env.manager.create(JOBS, ns, job_manifest("other", image=img, suspend=True, managed_by="example.com/other"))
    await env.manager.create(JOBS, ns, job_manifest("ours", image=img, suspend=True, managed_by=CONTROLLER_NAME))
    sa = await env.controller_client()
    try:
        for name in ("foreign", "other"):
            # RBAC alone would allow both writes (jobs/status update, jobs patch): the policy denies them.
            refused = await _status_replace_refused(sa, ns, name)
            assert refused.status == 403 and POLICY in refused.message, refused
            with pytest.raises(ApiError) as exc:
                await sa.patch(JOBS, ns, name, {"metadata": {"annotations": {"jobmirror.dev/cluster": "x"}}})
            assert exc.value.status == 403 and POLICY in exc.value.message, exc.value
            # Labelling a foreign Job as "our copy" does not get it through either (the old object counts).
            with pytest.raises(ApiError) as exc:
                await sa.patch(JOBS, ns, name, {"metadata": {"labels": {"jobmirror.dev/origin": "jobmirror"}}})
            assert exc.value.status == 403 and POLICY in exc.value.message, exc.value
            # Other users are not affected by the policy.
            await env.manager.patch(JOBS, ns, name, {"status": {}}, subresource="status", dry_run=True)
        # The controller's own Jobs: allowed (dry run: no side effects on a Job a running controller may own).
        await sa.replace(JOBS, ns, "ours", await sa.get(JOBS, ns, "ours"), subresource="status", dry_run=True)
        await sa.patch(JOBS, ns, "ours", {"metadata": {"annotations": {"e2e.jobmirror.dev/probe": "1"}}}, dry_run=True)
    finally:
        await env.manager.delete(NAMESPACES, None, ns)

