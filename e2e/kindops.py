"""What only the kind provider can do: docker on the node containers, the deployed controller's pods.

Faults here are real: ``docker stop`` of a worker's node container takes its API server,
kubelet and every container away at once; ``kill -9`` hits the controller process inside the
manager's node (found through the CRI, as a node admin would).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from typing import cast

from e2e.harness import LEASE_NAME, POD_RES, SYSTEM_NS, E2EEnv, log
from kruntime.client import ApiError
from kruntime.resources import JOBS, LEASES, Obj
from testkit.waiting import get_or_none, wait_for

CONTROLLER_SELECTOR = "app.kubernetes.io/name=jobmirror"


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    log(f"+ docker {' '.join(args)}")
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"`docker {' '.join(args)}` failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def node_container(cluster: str) -> str:
    """kind names a single-node cluster's node container ``<cluster>-control-plane``."""
    return f"{cluster}-control-plane"


def kind(env: E2EEnv, *args: str, timeout: float = 300) -> str:
    return str(env.kind.tool().run(env.kind.kind, *args, what=f"kind {' '.join(args)}", timeout=timeout))


async def lease_holder(env: E2EEnv) -> str:
    lease = await get_or_none(env.manager, LEASES, SYSTEM_NS, LEASE_NAME)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def holder_pod(holder: str) -> str:
    """The Lease identity is ``<hostname>_<pid>_<random>``; a Pod's hostname is its name."""
    return holder.split("_", 1)[0]


async def controller_pods(env: E2EEnv) -> list[Obj]:
    items, _ = await env.manager.list_all(POD_RES, SYSTEM_NS, label_selector=CONTROLLER_SELECTOR)
    return cast(list[Obj], items)


async def wait_new_leader(env: E2EEnv, old: str, timeout: float) -> tuple[str, float]:
    """Wait for a holder other than ``old``; return it and the seconds it took."""
    t0 = time.monotonic()

    async def other() -> str | None:
        h = await lease_holder(env)
        return h if h and h != old else None

    holder = await wait_for(other, timeout=timeout, interval=0.25, what=f"a new Lease holder (old {old})")
    return str(holder), time.monotonic() - t0


def kill_9_in_node(env: E2EEnv, pod: Obj) -> int:
    """``kill -9`` the main process of ``pod``'s first container from inside the manager's node."""
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[-1]
    node = node_container(env.kind.manager_cluster)
    info = json.loads(docker("exec", node, "crictl", "inspect", cid).stdout)
    pid = int(info["info"]["pid"])
    docker("exec", node, "kill", "-9", str(pid))
    return pid


async def finished(env: E2EEnv, ns: str, names: list[str], timeout: float) -> dict[str, Obj]:
    """Wait until every named manager Job has a terminal condition; return them by name."""
    async def all_done() -> dict[str, Obj] | None:
        out = {}
        for n in names:
            job = await env.manager.get(JOBS, ns, n)
            conds = {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}
            if conds.get("Complete") != "True" and conds.get("Failed") != "True":
                return None
            out[n] = job
        return out

    try:
        return cast(dict[str, Obj], await wait_for(all_done, timeout=timeout, interval=1,
                                                   what=f"{len(names)} Jobs in {ns} finished"))
    except AssertionError as exc:
        states = {}
        for n in names:
            with contextlib.suppress(ApiError):
                j = await env.manager.get(JOBS, ns, n)
                states[n] = ((j["metadata"].get("annotations") or {}).get("jobmirror.dev/cluster"), j.get("status"))
        raise AssertionError(f"{exc}\n{json.dumps(states, indent=1)[:4000]}") from None
