"""A copy's identity is what the controller stamped, never what a user wrote (issue 19 item 2), on
real API servers with the real controller: ``jobmirror.dev/`` keys set on a manager Job (at
creation or later) never reach its copy, and a copy edited on a worker by a user of one namespace
never stands in for a Job of another namespace, for the reconciler nor for GC.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from jobapi.objects import annotations_of, labels_of
from kruntime.client import ClusterClient
from kruntime.resources import JOBS, Obj
from mirror.naming import (
    ANNOTATION_ORIGIN_JOB,
    ANNOTATION_PIN,
    ANNOTATION_TEMPLATE_HASH,
    LABEL_ORIGIN,
    LABEL_ORIGIN_CLUSTER,
    LABEL_ORIGIN_UID,
)
from tests.conftest import MANAGER, ensure_namespace, wait_for
from tests.integration.mirror_env import MirrorEnv, cond, make_job, mirror_env, wait_gc_rounds

pytestmark = [pytest.mark.integration, pytest.mark.security]

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]


async def copy_in(env: MirrorEnv, worker: str, ns: str, name: str) -> Obj:
    async def probe() -> Obj | None:
        items, _ = await env.workers[worker].list_all(JOBS, ns, label_selector=f"{LABEL_ORIGIN}={env.origin}")
        return next((c for c in items if c["metadata"]["name"] == name), None)

    found = await wait_for(probe, timeout=60, what=f"the copy of {ns}/{name} on {worker}")
    assert found is not None
    return found


def forged(victim: Obj) -> tuple[dict[str, str], dict[str, str]]:
    """Labels and annotations naming ``victim`` as the manager Job, as a user would write them."""
    md = victim["metadata"]
    return ({LABEL_ORIGIN_UID: md["uid"], LABEL_ORIGIN_CLUSTER: "forged", "jobmirror.dev/anything": "x"},
            {ANNOTATION_ORIGIN_JOB: f"{md['namespace']}/{md['name']}", ANNOTATION_TEMPLATE_HASH: "0000"})


async def victim_untouched(env: MirrorEnv, ns: str, victim: Obj, victim_copy: Obj) -> None:
    job = await env.manager.get(JOBS, ns, victim["metadata"]["name"])
    assert not any(cond(job, t) == "True" for t in ("Complete", "Failed", "Suspended")), job.get("status")
    now = await env.workers["worker-1"].get(JOBS, ns, victim_copy["metadata"]["name"])
    assert now["metadata"]["uid"] == victim_copy["metadata"]["uid"], "the victim's copy was deleted and re-made"
    assert not (now.get("spec") or {}).get("suspend"), "the victim's copy was suspended"


PIN = {ANNOTATION_PIN: "worker-1"}


@contextlib.asynccontextmanager
async def beside_a_victim(client_for: ClientFor, cluster: ClusterFn, ns: str) -> AsyncIterator[Victim]:
    """The controller running, and another namespace's Job running on worker-1 (the victim)."""
    victims = f"{ns}-victim"
    await ensure_namespace(await client_for(MANAGER), victims)
    async with mirror_env(client_for, cluster, ns, namespaces=[ns, victims]) as env:
        await env.start()
        job = await env.manager.create(JOBS, victims, make_job("secret", outcome="hang", annotations=PIN))
        yield Victim(env, victims, job, await copy_in(env, "worker-1", victims, "secret"))


@dataclass
class Victim:
    env: MirrorEnv
    ns: str
    job: Obj
    copy: Obj


async def test_our_keys_on_a_manager_job_never_reach_its_copy(client_for: ClientFor, cluster: ClusterFn,
                                                              ns: str) -> None:
    """labels and annotations under jobmirror.dev/ naming another namespace's Job, set at creation and
    added after dispatch: the copy carries only what we stamp, and the other Job runs on untouched"""
    pin = PIN
    async with beside_a_victim(client_for, cluster, ns) as v:
        env, victims, victim, victim_copy = v.env, v.ns, v.job, v.copy
        labels, ann = forged(victim)
        job = make_job("mine", outcome="hang", annotations={**pin, **ann})
        job["metadata"]["labels"] = labels
        mine = await env.create(job)
        mine_copy = await copy_in(env, "worker-1", ns, "mine")
        # ... and again after dispatch, where the metadata sync would carry new keys over.
        other = await env.create(make_job("later", outcome="hang", annotations=pin))
        await copy_in(env, "worker-1", ns, "later")
        await env.manager.patch(JOBS, ns, "later",
                                {"metadata": {"labels": labels, "annotations": {**ann, "note": "n"}}})

        async def note_synced() -> bool:
            c = await env.workers["worker-1"].get(JOBS, ns, "later")
            return annotations_of(c).get("note") == "n"

        await wait_for(note_synced, timeout=30, what="the user's own annotation synced to the copy")
        await env.look_again(f"{ns}/mine", f"{ns}/later", f"{victims}/{victim['metadata']['name']}")
        await wait_gc_rounds(2)
        for job_, name in ((mine, "mine"), (other, "later")):
            c = await env.workers["worker-1"].get(JOBS, ns, name)
            ours = {k: v for k, v in labels_of(c).items() if k.startswith("jobmirror.dev/")}
            assert ours == {LABEL_ORIGIN: env.origin, LABEL_ORIGIN_UID: job_["metadata"]["uid"],
                            LABEL_ORIGIN_CLUSTER: ours[LABEL_ORIGIN_CLUSTER]}, ours
            assert ours[LABEL_ORIGIN_CLUSTER] != "forged"
            assert annotations_of(c)[ANNOTATION_ORIGIN_JOB] == f"{ns}/{name}"
            assert annotations_of(c)[ANNOTATION_TEMPLATE_HASH] != "0000"
            assert "jobmirror.dev/anything" not in labels_of(c)
        assert (await env.workers["worker-1"].get(JOBS, ns, "mine"))["metadata"]["uid"] == mine_copy["metadata"]["uid"]
        await victim_untouched(env, victims, victim, victim_copy)


async def test_a_copy_edited_on_a_worker_cannot_stand_in_for_another_namespaces_job(
        client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    """a user who may edit Jobs in one worker namespace relabels their copy as another namespace's Job's
    and lets it finish: that Job neither takes its status nor loses its copy, and GC deletes nothing"""
    pin = PIN
    async with beside_a_victim(client_for, cluster, ns) as v:
        env, victims, victim, victim_copy = v.env, v.ns, v.job, v.copy
        await env.create(make_job("mine", duration_ms=8000, annotations=pin))
        await copy_in(env, "worker-1", ns, "mine")
        labels, ann = forged(victim)
        labels.pop(LABEL_ORIGIN_CLUSTER)  # keep ours: a copy GC could otherwise judge an orphan
        await env.workers["worker-1"].patch(JOBS, ns, "mine", {"metadata": {"labels": labels, "annotations": ann}})

        async def finished_on_worker() -> bool:
            c = await env.workers["worker-1"].get(JOBS, ns, "mine")
            return cond(c, "Complete") == "True"

        await wait_for(finished_on_worker, timeout=60, what="the edited copy finished on the worker")
        await env.look_again(f"{ns}/mine", f"{victims}/{victim['metadata']['name']}")
        await wait_gc_rounds(2)
        await victim_untouched(env, victims, victim, victim_copy)
        # The edited copy is not deleted on its word either: GC keeps what it cannot attribute.
        assert (await env.workers["worker-1"].get(JOBS, ns, "mine"))["metadata"]["name"] == "mine"
