"""What a user on the manager sees of a mirrored Job (issue 15): worker-side problems told on the manager
Job, ``kubectl jobmirror describe``/``logs``, and the inspect API's access check.

Real API servers throughout: the worker's own Job controller refusing pods under a
ResourceQuota (FailedCreate), its scheduler finding no room (FailedScheduling), real
ServiceAccount tokens reviewed by the manager's API server, and the manager's real service
proxy in front of the in-process controller's inspect API. The plugin runs as a subprocess,
as a user runs it. The local bed's pods run on kwok fake nodes, which serve a fixed log (clusterbed ClusterLogs)
behind the real log path (kind e2e reads real container logs).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import yaml

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import PODS, Obj, Resource
from mirror import metrics
from mirror.naming import ANNOTATION_PIN, ANNOTATION_PLACEMENT_REASON
from tests.conftest import ensure_namespace, wait_for
from tests.integration.inspect_env import expose_through_service_proxy, host_address, plugin, proxied, user
from tests.integration.mirror_env import MirrorEnv, make_job, mirror_env

pytestmark = pytest.mark.integration

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]
QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")


async def manager_event(env: MirrorEnv, name: str, reason: str, *, contains: str = "", timeout: float = 60) -> Obj:
    async def probe() -> Obj | None:
        return next((e for e in await env.events(name) if e["reason"] == reason and contains in e["message"]), None)

    return await wait_for(probe, timeout=timeout, what=f"event {reason} on {name}")  # type: ignore[no-any-return]


def write_config(env: MirrorEnv, path: Path) -> Path:
    data = {"managerKubeconfig": str(env.clusters["manager"].kubeconfig), "origin": env.origin,
            "namespaces": [env.ns],
            "workers": [{"name": n, "kubeconfig": str(env.clusters[n].kubeconfig)} for n in env.workers]}
    path.write_text(yaml.safe_dump(data))
    return path


# -- worker-side problems on the manager Job ------------------------------------------------------


async def test_quota_refusing_the_copys_pods_is_told_on_the_manager_job(client_for: ClientFor, cluster: ClusterFn,
                                                                      ns: str) -> None:
    """worker-1's Job controller cannot create pods (ResourceQuota pods: 0): FailedCreate, naming the worker"""
    async with mirror_env(client_for, cluster, ns) as env:
        w1 = env.workers["worker-1"]
        await w1.create(QUOTAS, ns, {"metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}})

        async def computed() -> bool:
            return bool(((await w1.get(QUOTAS, ns, "no-pods")).get("status") or {}).get("hard"))

        await wait_for(computed, timeout=30, what="quota status computed")
        await env.start()
        await env.create(make_job("quota", annotations={ANNOTATION_PIN: "worker-1"}))
        before = metrics.WORKER_WARNINGS.labels("worker-1")._value.get()
        ev = await manager_event(env, "quota", "FailedCreate", contains="on worker worker-1")
        assert metrics.WORKER_WARNINGS.labels("worker-1")._value.get() > before
        assert ev["type"] == "Warning"
        assert "Job " + ns + "/quota" in ev["message"] and "exceeded quota" in ev["message"], ev["message"]
        assert ev["source"]["component"] == "jobmirror"
        # The worker's Job controller retries with backoff: repeats fold into the one event's count,
        # never a new event each time (the recorder's dedupe), and the spam filter caps the rest.
        await asyncio.sleep(3)
        same = [e for e in await env.events("quota") if e["reason"] == "FailedCreate"]
        assert len({e["message"] for e in same}) == len(same), [e["message"] for e in same]


async def test_unschedulable_copy_is_told_then_flagged_after_the_timeout(client_for: ClientFor, cluster: ClusterFn,
                                                                       ns: str, tmp_path: Path) -> None:
    """FailedScheduling mirrored; CopyUnschedulable after unschedulableTimeout; describe shows it all
    (placement LeastLoaded, which does not see room: RoomAware would keep this Job in the manager)"""
    async with mirror_env(client_for, cluster, ns, unschedulable_timeout=3.0, placement="LeastLoaded") as env:
        await env.start()
        await env.create(make_job("too-big", outcome="hang", requests={"cpu": "1000"}))
        sched = await manager_event(env, "too-big", "FailedScheduling", contains="Insufficient cpu")
        placed = await env.get("too-big")
        assert placed is not None
        worker = placed["metadata"]["annotations"]["jobmirror.dev/cluster"]
        assert f"on worker {worker}, Pod {ns}/too-big-" in sched["message"]
        assert placed["metadata"]["annotations"][ANNOTATION_PLACEMENT_REASON].startswith(
            f"LeastLoaded: chose {worker}; unfinished copies per worker then: worker-1=")
        stuck = await manager_event(env, "too-big", "CopyUnschedulable", timeout=60)
        assert f"on worker {worker} has been unschedulable since " in stuck["message"]
        assert "longer than unschedulableTimeout (3s): 0/2 nodes are available" in stuck["message"]

        rc, out, err = await plugin("describe", "too-big", "-n", ns, "--config", str(write_config(env, tmp_path /
                                                                                                   "c.yaml")))
        assert rc == 0, err
        print(out)  # the report quotes a real one
        lines = out.splitlines()
        assert f"Worker:      {worker}" in lines
        assert any(ln.startswith("Placement:   LeastLoaded: chose") for ln in lines)
        assert any(ln.startswith(f"Copy:        {ns}/too-big on {worker} (uid ") for ln in lines)
        pod_line = next(ln for ln in lines if ln.strip().startswith("too-big-"))
        assert pod_line.split()[1:4] == ["Pending", "<none>", "0"], pod_line
        assert any("FailedScheduling" in ln and "Pod/too-big-" in ln for ln in lines)  # the worker's own event
        assert any("CopyUnschedulable" in ln for ln in lines)  # ours, on the manager Job
        assert any(ln.split()[:3] == ["active", "1", "1"] for ln in lines), out
        # Why it cannot run, per worker, as placement RoomAware would judge it.
        at = lines.index("Room now (one pod of this Job, per worker):")
        for i, name in enumerate(("worker-1", "worker-2"), 1):
            assert re.match(rf"  {name}: never: largest node has \S+ cpu < 1000 cpu requested", lines[at + i]), out

        rc, out, err = await plugin("describe", "too-big", "-n", ns, "-o", "json", "--config",
                                    str(tmp_path / "c.yaml"))
        assert rc == 0, err
        data = json.loads(out)
        assert data["worker"]["pods"][0]["phase"] == "Pending" and data["worker"]["copy"]["name"] == "too-big"
        assert set(data["room"]) == {"worker-1", "worker-2"}

        rc, out, err = await plugin("status", "-n", ns, "--kubeconfig", str(env.clusters["manager"].kubeconfig),
                                    "--worker", worker, "-o", "json")
        assert rc == 0, err
        assert [r["job"] for r in json.loads(out)["jobs"]] == [f"{ns}/too-big"]
        rc, out, err = await plugin("status", "-n", ns, "--kubeconfig", str(env.clusters["manager"].kubeconfig),
                                    "--state", "Complete")
        assert rc == 0 and "(0 shown)" in out, out


# -- the inspect API: who may read what -----------------------------------------------------------


async def test_inspect_api_serves_only_users_who_may_get_the_job(client_for: ClientFor, cluster: ClusterFn, ns: str,
                                                                tmp_path: Path) -> None:
    """through the real service proxy: alice (get jobs here) is served; bob (none) and carol (elsewhere) refused"""
    ip = host_address()
    async with mirror_env(client_for, cluster, ns, inspect_address=f"{ip}:0") as env:
        ctrl = await env.start()
        admin = env.manager
        other = f"{ns}-other"
        await ensure_namespace(admin, other)

        async def api_up() -> bool:
            return ctrl.inspect_api is not None and ctrl.inspect_api.port != 0

        await wait_for(api_up, timeout=30, what="inspect API listening")
        assert ctrl.inspect_api is not None
        await expose_through_service_proxy(admin, ns, ip, ctrl.inspect_api.port)
        mkc = env.clusters["manager"].kubeconfig
        alice_token, alice = await user(admin, ns, "alice", mkc, tmp_path / "alice", may_get_jobs_in=ns)
        bob_token, bob = await user(admin, ns, "bob", mkc, tmp_path / "bob", may_get_jobs_in=None)
        carol_token, _ = await user(admin, ns, "carol", mkc, tmp_path / "carol", may_get_jobs_in=other)

        await env.create(make_job("work", outcome="hang", annotations={ANNOTATION_PIN: "worker-2"}))

        async def running() -> bool:
            copies = await env.copies((await env.get("work") or {})["metadata"]["uid"])
            if "worker-2" not in copies:
                return False
            pods = await env.workers["worker-2"].list(PODS, ns, label_selector="job-name=work")
            return any((p.get("status") or {}).get("phase") == "Running" for p in pods.get("items") or [])

        await wait_for(running, timeout=60, what="the copy's pod running on worker-2")
        path = f"/v1/namespaces/{ns}/jobs/work/describe"

        # The API server authenticates the caller for the proxy, then strips Authorization: the
        # controller never sees it (this is why the plugin repeats the token in X-Jobmirror-Token).
        status, body = await proxied(admin, ns, path, {"Authorization": f"Bearer {alice_token}"})
        assert status == 401 and "no bearer token" in body["error"], (status, body)

        refused = metrics.INSPECT_REQUESTS.labels("describe", "403")._value.get()
        status, body = await proxied(admin, ns, path, {"Authorization": f"Bearer {bob_token}",
                                                       "X-Jobmirror-Token": bob_token})
        assert status == 403, (status, body)
        assert metrics.INSPECT_REQUESTS.labels("describe", "403")._value.get() == refused + 1
        assert body["error"] == f"user 'system:serviceaccount:{ns}:bob' may not get jobs.batch {ns}/work on the manager"
        status, body = await proxied(admin, ns, path.replace("describe", "logs"),
                                     {"Authorization": f"Bearer {carol_token}", "X-Jobmirror-Token": carol_token})
        assert status == 403 and f"{ns}:carol' may not get" in body["error"], (status, body)
        status, body = await proxied(admin, ns, path, {"Authorization": f"Bearer {alice_token}",
                                                       "X-Jobmirror-Token": "not-a-token"})
        assert status == 401 and "token not accepted" in body["error"], (status, body)

        status, body = await proxied(admin, ns, path, {"Authorization": f"Bearer {alice_token}",
                                                       "X-Jobmirror-Token": alice_token})
        assert status == 200, (status, body)
        assert body["worker"] == "worker-2" and body["copy"]["name"] == "work"
        assert body["pods"][0]["phase"] == "Running" and body["pods"][0]["node"], body

        svc = f"--inspect-service={ns}/https:jobmirror-inspect:inspect"
        rc, out, err = await plugin("describe", "work", "--kubeconfig", str(alice), svc)
        assert rc == 0, err
        assert "Copy:        " + f"{ns}/work on worker-2" in out and "Running" in out, out
        # kwok's kubelet API serves the bed's fixed container log (clusterbed ClusterLogs): the
        # request went all the way, authorised on the manager, then read from the worker for alice.
        rc, out, err = await plugin("logs", "work", "--kubeconfig", str(alice), svc)
        assert rc == 0, (out, err)
        assert "kwok fake container log line 3" in out, out
        rc, out, err = await plugin("logs", "work", "--kubeconfig", str(bob), svc)
        assert rc == 1 and "cannot get resource \"jobs\"" in err, err  # bob cannot even read the Job itself
        # Where it runs and why is on the manager Job for any reader (no Event on the normal path).
        placed = await env.get("work")
        assert placed is not None and placed["metadata"]["annotations"]["jobmirror.dev/cluster"] == "worker-2"
        await admin.request("DELETE", f"/api/v1/namespaces/{other}")
