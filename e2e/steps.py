"""Steps the journeys share, on every provider: namespaces, placement, waiting for conditions."""

from __future__ import annotations

import contextlib
import uuid

from e2e.harness import (
    ANNOTATION_CLUSTER,
    ANNOTATION_ORIGIN_JOB,
    FINALIZER,
    LABEL_ORIGIN,
    LABEL_ORIGIN_UID,
    E2EEnv,
    condition_true,
    remote_copies,
)
from kruntime.client import ApiError
from kruntime.resources import JOBS, NAMESPACES, Obj
from testkit.waiting import ensure_namespace, get_or_none, wait_for


async def namespace(env: E2EEnv, journey: str) -> str:
    ns = f"e2e-{journey}-{uuid.uuid4().hex[:6]}"
    await ensure_namespace(env.manager, ns)
    return ns


async def cleanup(env: E2EEnv, ns: str) -> None:
    """Best effort, not awaited to completion: the manager namespace, and the copies' namespaces."""
    for client in {id(c): c for c in [env.manager, *env.workers.values()]}.values():
        with contextlib.suppress(ApiError):
            await client.delete(NAMESPACES, None, ns)


def pin_round_robin(env: E2EEnv, i: int) -> str:
    """Journeys are pinned round-robin so every worker (separate, or the manager itself) runs some."""
    names = sorted(env.workers)
    return names[i % len(names)]


async def placed(env: E2EEnv, ns: str, name: str, uid: str, timeout: float = 45,
                  pin: str | None = None) -> tuple[Obj, str, Obj]:
    """Wait until the manager Job carries our finalizer + placement and exactly one copy exists; return them."""
    async def probe() -> tuple[Obj, list[tuple[str, Obj]]] | None:
        job = await env.manager.get(JOBS, ns, name)
        copies = await remote_copies(env, ns, uid)
        md = job["metadata"]
        if FINALIZER in (md.get("finalizers") or []) and ANNOTATION_CLUSTER in (md.get("annotations") or {}) and copies:
            return job, copies
        return None

    job, copies = await wait_for(probe, timeout=timeout, what=f"{ns}/{name} dispatched to a worker")
    assert len(copies) == 1, f"more than one copy of {ns}/{name}: {[(w, c['metadata']['name']) for w, c in copies]}"
    worker, copy = copies[0]
    assert job["metadata"]["annotations"][ANNOTATION_CLUSTER] == worker, (job["metadata"]["annotations"], worker)
    if pin:
        assert worker == pin, f"{ns}/{name} pinned to {pin} but placed on {worker}"
    return job, worker, copy


def assert_sanitized_copy(env: E2EEnv, manager_job: Obj, worker: str, copy: Obj) -> None:
    md, cmd = manager_job["metadata"], copy["metadata"]
    uid = md["uid"]
    if worker != env.manager_worker:
        assert cmd["name"] == md["name"], "a copy in a separate worker keeps the Job's name"
    else:
        assert cmd["name"] != md["name"], "a copy in the manager itself needs a derived name"
    assert cmd["namespace"] == md["namespace"]
    assert "managedBy" not in copy["spec"], copy["spec"].get("managedBy")
    assert cmd["labels"].get(LABEL_ORIGIN), cmd["labels"]
    assert cmd["labels"].get(LABEL_ORIGIN_UID) == uid
    assert cmd["annotations"].get(ANNOTATION_ORIGIN_JOB) == f"{md['namespace']}/{md['name']}"
    assert cmd["uid"] != uid and not cmd.get("ownerReferences")
    # The worker generated its own selector: nothing in the copy points at the manager Job's UID.
    assert uid not in str(copy["spec"].get("selector")), copy["spec"].get("selector")
    assert uid not in str(copy["spec"]["template"]["metadata"].get("labels")), copy["spec"]["template"]["metadata"]
    assert FINALIZER not in (cmd.get("finalizers") or [])


async def wait_condition(env: E2EEnv, ns: str, name: str, ctype: str, timeout: float = 90) -> Obj:
    async def probe() -> Obj | None:
        job = await env.manager.get(JOBS, ns, name)
        return job if condition_true(job, ctype) else None

    try:
        return await wait_for(probe, timeout=timeout, what=f"manager Job {ns}/{name} {ctype}=True")
    except AssertionError as exc:
        job = await get_or_none(env.manager, JOBS, ns, name)
        copies = await remote_copies(env, ns, (job or {}).get("metadata", {}).get("uid", "-"))
        raise AssertionError(f"{exc}\nmanager status: {(job or {}).get('status')}\n"
                             f"copies: {[(w, c.get('status')) for w, c in copies]}") from None


async def wait_no_copies(env: E2EEnv, ns: str, uid: str, timeout: float = 45, what: str = "") -> None:
    async def gone() -> bool:
        return not await remote_copies(env, ns, uid)

    await wait_for(gone, timeout=timeout, what=what or f"the copies of {ns} uid={uid} to be deleted")


async def is_gone(env: E2EEnv, ns: str, name: str) -> bool:
    return await get_or_none(env.manager, JOBS, ns, name) is None
