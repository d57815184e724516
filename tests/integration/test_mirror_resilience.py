"""Failures MultiKueue users hit, and the controller's recovery invariants.

Invariants asserted throughout: no lost Job, never two running copies after recovery,
a correct final status, no orphans after GC, and foreign Jobs never touched.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable

import pytest

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime.client import ClusterClient
from kruntime.resources import JOBS, Obj
from mirror.jobs.kind import JOB_KIND
from mirror.naming import ANNOTATION_CLUSTER, ANNOTATION_PIN, FINALIZER, LABEL_ORIGIN_UID
from testkit.copies import CopyRecorder
from tests.conftest import WORKER_1, WORKER_2, ensure_namespace, wait_for
from tests.integration.mirror_env import make_job, mirror_env, wait_gc_rounds, wait_syncs

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]


@pytest.mark.integration
async def test_orphan_remote_is_garbage_collected(client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        ctrl = await env.start()
        created = await env.create(make_job("orphan", duration_ms=60000))
        uid = created["metadata"]["uid"]
        await wait_for(lambda: env.copies(uid), timeout=30, what="copy")
        await env.stop(ctrl)
        # The manager Job disappears while the controller is down (finalizer force-removed).
        await env.manager.delete(JOBS, ns, "orphan")
        await env.manager.patch(JOBS, ns, "orphan", {"metadata": {"finalizers": None}})
        await env.wait_gone("orphan")
        assert await env.copies(uid)  # still there: nobody was running
        await env.start()

        async def collected() -> bool:
            return await env.copies(uid) == {}

        await wait_for(collected, timeout=30, what="orphan copy garbage-collected")


@pytest.mark.integration
async def test_restart_mid_run_converges_without_duplicates(client_for: ClientFor, cluster: ClusterFn,
                                                            ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env, CopyRecorder(env.workers, ns) as rec:
        ctrl = await env.start()
        jobs = [await env.create(make_job(f"r{i}", duration_ms=2500)) for i in range(6)]
        await asyncio.sleep(0.4)  # kill it while dispatches are in flight
        await env.stop(ctrl)
        await env.start()
        for j in jobs:
            await env.wait_condition(j["metadata"]["name"], "Complete", timeout=90)
        for j in jobs:
            name = j["metadata"]["name"]
            placed = (await env.get(name))["metadata"]["annotations"][ANNOTATION_CLUSTER]  # type: ignore[index]
            # Exactly one copy was ever made (watched, so even a short-lived second one counts),
            # on the placement worker.
            assert list(rec.copies_of(j["metadata"]["uid"]).values()) == [placed], (name, rec.copies_of(
                j["metadata"]["uid"]))


@pytest.mark.integration
async def test_lagging_manager_cache_never_deletes_the_copy_just_created(
    client_for: ClientFor, cluster: ClusterFn, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manager cache shows the Job without its placement for 3 s after the first look.

    The first pass places it and creates the copy; the copy's watch event runs the next
    pass on the stale object, which sees a copy on a worker the (stale) Job is not placed
    on. That copy must survive: it is ours and current. (The 100-Job benchmark caught
    the old code deleting and re-creating it.)
    """
    async with mirror_env(client_for, cluster, ns) as env, CopyRecorder(env.workers, ns) as rec:
        ctrl = await env.start()

        async def synced() -> bool:
            return ctrl.jobs is not None and ctrl.jobs.synced.is_set()

        await wait_for(synced, timeout=30, what="controller caches synced")
        informer = ctrl.jobs
        assert informer is not None
        real_get = informer.get
        first_seen: dict[str, tuple[float, Obj]] = {}

        def lagging_get(key: str) -> Obj | None:
            obj = real_get(key)
            if obj is None or not key.endswith("/lagged"):
                return obj
            t, snap = first_seen.setdefault(key, (time.monotonic(), copy.deepcopy(obj)))
            return snap if time.monotonic() - t < 3.0 else obj

        monkeypatch.setattr(informer, "get", lagging_get)
        created = await env.create(make_job("lagged", duration_ms=5000))
        uid = created["metadata"]["uid"]
        copies = await wait_for(lambda: env.copies(uid), timeout=30, what="copy")
        (worker, first_copy), = copies.items()
        done = await env.wait_condition("lagged", "Complete", timeout=60)
        assert time.monotonic() - first_seen[f"{ns}/lagged"][0] > 3.0, "finished inside the lag: nothing tested"
        # The one copy made ran to the end: never deleted and re-created.
        assert rec.copies_of(uid) == {first_copy["metadata"]["uid"]: worker}, rec.copies_of(uid)
        assert done["status"]["succeeded"] == 1
        reasons = [(e["reason"], e.get("count"), e["message"]) for e in await env.events("lagged")]
        assert not [r for r in reasons if r[0] == "RemoteDeleted" and "(stale)" in r[2]], reasons
        # Created once: the copy watches, caught up with the worker, saw no other copy.
        assert await env.copies_made(uid) == {first_copy["metadata"]["uid"]: worker}


@pytest.mark.integration
async def test_copy_is_adopted_when_the_placement_annotation_is_removed(client_for: ClientFor, cluster: ClusterFn,
                                                                       ns: str) -> None:
    async with mirror_env(client_for, cluster, ns) as env, CopyRecorder(env.workers, ns) as rec:
        env.expect_errors("conflict")  # the test writes the manager Job while the controller does
        await env.start()
        created = await env.create(make_job("unplaced", duration_ms=4000))
        uid = created["metadata"]["uid"]
        (worker, first_copy), = (await wait_for(lambda: env.copies(uid), timeout=30, what="copy")).items()
        await env.manager.patch(JOBS, ns, "unplaced", {"metadata": {"annotations": {ANNOTATION_CLUSTER: None}}})

        async def placed_again() -> str | None:
            j = await env.get("unplaced")
            return ((j or {}).get("metadata", {}).get("annotations") or {}).get(ANNOTATION_CLUSTER)

        assert await wait_for(placed_again, timeout=30, what="placement annotation restored") == worker
        done = await env.wait_condition("unplaced", "Complete", timeout=60)
        assert done["status"]["succeeded"] == 1
        # Adopted: the first copy is the only one there ever was (created once, never re-created).
        assert rec.copies_of(uid) == {first_copy["metadata"]["uid"]: worker}, rec.copies_of(uid)
        assert await env.copies_made(uid) == {first_copy["metadata"]["uid"]: worker}


@pytest.mark.integration
async def test_two_managers_share_a_worker_without_touching_each_other(
    client_for: ClientFor, cluster: ClusterFn, ns: str
) -> None:
    """Manager A is the manager cluster, manager B is worker-2's API server; both use worker-1."""
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1,)) as env, CopyRecorder(env.workers, ns) as rec:
        b_manager = await client_for(WORKER_2)
        await ensure_namespace(b_manager, ns)
        b_cfg = env.config_with(manager_kubeconfig=env.clusters["manager"].kubeconfig.parent.parent / "worker-2"
                                / "kubeconfig.yaml", origin=f"b-{ns}")
        await env.start()
        await env.start(b_cfg)
        a = await env.create(make_job("from-a", duration_ms=1500))
        b = await env.create(make_job("from-b", duration_ms=1500), client=b_manager)
        # Same name in both managers: the second copy would collide; one of them reports it.
        await env.create(make_job("same", duration_ms=60000))
        await env.create(make_job("same", duration_ms=60000), client=b_manager)

        async def b_complete() -> bool:
            j = await env.get("from-b", b_manager)
            return any(c["type"] == "Complete" and c["status"] == "True"
                       for c in (j or {}).get("status", {}).get("conditions") or [])

        await env.wait_condition("from-a", "Complete", timeout=90)
        await wait_for(b_complete, timeout=90, what="manager B's Job Complete")
        await wait_gc_rounds(5)  # ≥ 2 GC rounds of each controller, each seeing the other's copies
        # Each manager's Job ran in exactly one copy: neither GC deleted the other's, forcing a re-run.
        for j in (a, b):
            assert len(rec.copies_of(j["metadata"]["uid"])) == 1, (j["metadata"]["name"],
                                                                   rec.copies_of(j["metadata"]["uid"]))

        # exactly one "same" copy exists on worker-1 and it was never replaced
        w1 = env.workers["worker-1"]
        same = await env.get("same", w1)
        assert same is not None
        a_same, b_same = await env.get("same"), await env.get("same", b_manager)
        owner = same["metadata"]["labels"]["jobmirror.dev/origin"]
        loser_client = b_manager if owner == env.origin else env.manager
        loser = b_same if owner == env.origin else a_same
        assert loser is not None

        async def collision_reported() -> bool:
            from kruntime.resources import EVENTS

            evs, _ = await loser_client.list_all(EVENTS, ns, field_selector="involvedObject.name=same")
            return any(e["reason"] == "NameCollision" for e in evs)

        await wait_for(collision_reported, timeout=30, what="NameCollision event")
        await wait_gc_rounds(2)
        again = await env.get("same", w1)
        assert again is not None and again["metadata"]["uid"] == same["metadata"]["uid"]
        winner_uid = same["metadata"]["labels"][LABEL_ORIGIN_UID]
        assert rec.copies_of(winner_uid) == {same["metadata"]["uid"]: "worker-1"}, rec.copies_of(winner_uid)
        assert rec.copies_of(loser["metadata"]["uid"]) == {}, "the colliding Job got a copy"


@pytest.mark.integration
async def test_foreign_remote_job_with_same_name_is_never_deleted_or_overwritten(
    client_for: ClientFor, cluster: ClusterFn, ns: str
) -> None:
    async with mirror_env(client_for, cluster, ns) as env:
        w1 = env.workers["worker-1"]
        foreign = await env.create(make_job("clash", managed_by=None, duration_ms=60000), client=w1)
        env.expect_errors("conflict")  # the test writes the manager Job while the controller does
        await env.start()
        await env.create(make_job("clash", annotations={ANNOTATION_PIN: "worker-1"}))
        await env.wait_event("clash", "NameCollision")
        await wait_syncs(2)  # it looked again (collision retries) and still left the foreign Job alone
        await wait_gc_rounds(2)
        still = await env.get("clash", w1)
        assert still is not None and still["metadata"]["uid"] == foreign["metadata"]["uid"]
        assert still["spec"] == {**still["spec"], **{k: v for k, v in foreign["spec"].items()}}
        # deleting the manager Job must not delete the foreign Job either
        await env.manager.delete(JOBS, ns, "clash")
        await env.wait_gone("clash")
        await wait_gc_rounds(2)  # GC is who could still delete it now
        after = await env.get("clash", w1)
        assert after is not None and after["metadata"]["uid"] == foreign["metadata"]["uid"]


@pytest.mark.integration
async def test_finished_job_is_not_dispatched_again_after_remote_vanishes(
    client_for: ClientFor, cluster: ClusterFn, ns: str
) -> None:
    """A worker-side TTL (or anyone) deleting a finished copy must not re-run the Job."""
    async with mirror_env(client_for, cluster, ns, keep_finished_remote=True) as env, \
            CopyRecorder(env.workers, ns) as rec:
        ctrl = await env.start()
        created = await env.create(make_job("ttl"))
        uid = created["metadata"]["uid"]
        await env.wait_condition("ttl", "Complete", timeout=90)
        copies = await env.copies(uid)
        assert copies  # kept (keepFinishedRemote); now it vanishes as a worker TTL would delete it
        for wname, c in copies.items():
            await env.workers[wname].delete(JOBS, ns, c["metadata"]["name"])

        async def deletion_handled() -> bool:
            # The cache dropping the copy queued a pass (same step); the queue idle = that pass ran.
            return all(w.copy_of(JOB_KIND, created) is None for w in ctrl.workers.values()) and ctrl.queue.idle()

        await wait_for(deletion_handled, timeout=30, what="the controller handled the copy's deletion")
        await wait_gc_rounds(1)
        assert await env.copies(uid) == {}
        assert set(rec.copies_of(uid)) == {c["metadata"]["uid"] for c in copies.values()}, "dispatched again"
        j = await env.get("ttl")
        assert j is not None and j["status"]["succeeded"] == 1
        assert FINALIZER not in (j["metadata"].get("finalizers") or [])


@pytest.mark.chaos
async def test_black_holed_worker_does_not_delay_the_other(client_for: ClientFor, cluster: ClusterFn,
                                                           ns: str) -> None:
    """worker-1's API server is frozen (accepts TCP, never answers): worker-2 keeps flowing."""
    async with mirror_env(client_for, cluster, ns, request_timeout=3.0) as env:
        env.expect_errors("transport")
        ctrl = await env.start()
        w1 = env.clusters["worker-1"]
        stuck = await env.create(make_job("stuck", duration_ms=60000, annotations={ANNOTATION_PIN: "worker-1"}))
        running = await env.create(make_job("running", duration_ms=8000, annotations={ANNOTATION_PIN: "worker-2"}))
        for j in (stuck, running):
            await wait_for(lambda j=j: env.copies(j["metadata"]["uid"]), timeout=30, what="copies dispatched")

        async def stuck_started() -> bool:
            s = await env.get("stuck")
            return bool(s and (s.get("status") or {}).get("startTime"))

        # What it shows after the freeze is its last mirrored status: wait for one (a loaded machine is slow).
        await wait_for(stuck_started, timeout=30, what="the stuck Job's start mirrored before the freeze")
        w1.freeze()
        try:
            t0 = time.monotonic()
            # The hung worker is detected (probe + timed-out calls) and taken out of placement.
            await wait_for(lambda: asyncio.sleep(0, not ctrl.workers["worker-1"].healthy), timeout=30,
                           what="worker-1 marked unhealthy")
            detected = time.monotonic() - t0
            await env.create(make_job("pinned-hung", annotations={ANNOTATION_PIN: "worker-1"}))
            t1 = time.monotonic()
            for i in range(5):
                await env.create(make_job(f"flow{i}", duration_ms=300))
            for i in range(5):
                j = await env.wait_condition(f"flow{i}", "Complete", timeout=60)
                assert j["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2"
            flow = time.monotonic() - t1
            # Status sync of a Job already on worker-2 went on meanwhile.
            await env.wait_condition("running", "Complete", timeout=60)
            assert flow < 30, f"healthy worker slowed down by the hung one: {flow:.1f}s (detected in {detected:.1f}s)"
            await env.wait_event("pinned-hung", "NoWorker")
            # The Job already on the hung worker keeps its last mirrored status.
            s = await env.get("stuck")
            assert s is not None and s["status"].get("startTime")
        finally:
            w1.thaw()
        await env.wait_condition("pinned-hung", "Complete", timeout=90)


@pytest.mark.chaos
async def test_lost_worker_redispatch_and_stale_copy_removed(client_for: ClientFor, cluster: ClusterFn,
                                                             ns: str) -> None:
    async with mirror_env(client_for, cluster, ns, worker_lost_timeout=6.0) as env, \
            CopyRecorder(env.workers, ns) as rec:
        env.expect_errors("transport", "conflict")  # worker-1 stopped; the test unpins the Job
        await env.start()
        w1 = env.clusters["worker-1"]
        created = await env.create(make_job("moved", duration_ms=4000, annotations={ANNOTATION_PIN: "worker-1"}))
        uid = created["metadata"]["uid"]

        async def running_on_w1() -> bool:
            j = await env.get("moved")
            return bool(j and (j.get("status") or {}).get("active"))

        await wait_for(running_on_w1, timeout=30, what="running on worker-1")
        before = await env.get("moved")
        # The pin is what we asked for; once worker-1 is lost the Job must still move on.
        await env.manager.patch(JOBS, ns, "moved", {"metadata": {"annotations": {ANNOTATION_PIN: None}}})
        w1.stop()
        try:
            await env.wait_event("moved", "WorkerLost", timeout=60)
            await env.wait_event("moved", "Redispatched", timeout=30)
            # While lost, the last mirrored status is kept (not cleared).
            mid = await env.get("moved")
            assert mid is not None and mid["status"]["startTime"] == before["status"]["startTime"]  # type: ignore[index]
            done = await env.wait_condition("moved", "Complete", timeout=90)
            assert done["metadata"]["annotations"][ANNOTATION_CLUSTER] == "worker-2"
        finally:
            w1.start()
        w1_client = env.workers["worker-1"]

        async def stale_removed() -> bool:
            return await env.get("moved", w1_client) is None

        await wait_for(stale_removed, timeout=60, what="stale copy on returned worker-1 deleted")
        # One copy on each worker over the whole run: the re-dispatch made exactly one.
        assert sorted(rec.copies_of(uid).values()) == ["worker-1", "worker-2"], rec.copies_of(uid)


@pytest.mark.chaos
async def test_cleanup_on_an_unreachable_worker_is_retried_until_it_succeeds(
    client_for: ClientFor, cluster: ClusterFn, ns: str
) -> None:
    async with mirror_env(client_for, cluster, ns) as env, CopyRecorder(env.workers, ns) as rec:
        env.expect_errors("transport", "conflict")  # worker-2 stopped; the test deletes the Job
        ctrl = await env.start()
        created = await env.create(make_job("gone", duration_ms=60000, annotations={ANNOTATION_PIN: "worker-2"}))
        uid = created["metadata"]["uid"]
        copies = await wait_for(lambda: env.copies(uid), timeout=30, what="copy on worker-2")
        remote_uid = copies["worker-2"]["metadata"]["uid"]
        w2 = env.clusters["worker-2"]
        w2.stop()
        try:
            await wait_for(lambda: asyncio.sleep(0, not ctrl.workers["worker-2"].healthy), timeout=60,
                           what="worker-2 seen unreachable")
            await env.manager.delete(JOBS, ns, "gone")
            await wait_syncs(3)  # passes ran on the deleted Job while its copy was unreachable
            # The finalizer holds the manager Job while its copy cannot be deleted.
            held = await env.get("gone")
            assert held is not None and held["metadata"].get("deletionTimestamp")
            assert FINALIZER in held["metadata"]["finalizers"]
        finally:
            w2.start()
        await env.wait_gone("gone", timeout=60)
        # The finalizer was released only after the copy was deleted (background propagation).
        after = await env.get("gone", env.workers["worker-2"])
        assert after is None, after
        assert rec.copies_of(uid) == {remote_uid: "worker-2"}, rec.copies_of(uid)


@pytest.mark.integration
async def test_manager_listed_as_its_own_worker_gets_a_derived_copy_name(
    client_for: ClientFor, cluster: ClusterFn, ns: str
) -> None:
    """KEP-4368 Story 1: the manager cluster is also a worker; the copy cannot share the name."""
    from tests.conftest import MANAGER

    async with mirror_env(client_for, cluster, ns, workers=(MANAGER,)) as env:
        await env.start()
        created = await env.create(make_job("self"))
        uid = created["metadata"]["uid"]
        copies = await wait_for(lambda: env.copies(uid), timeout=30, what="copy in the manager cluster")
        remote = copies["manager"]
        rname = remote["metadata"]["name"]
        assert rname != "self" and rname.startswith("self-jm-")
        j = await env.get("self")
        assert j is not None
        assert j["metadata"]["annotations"]["jobmirror.dev/remote-name"] == rname
        assert "managedBy" not in remote["spec"]
        # the copy (no managedBy) is run by the manager's own kcm: its pod shows up as active
        async def active() -> bool:
            m = await env.get("self")
            return bool(m and (m.get("status") or {}).get("active"))

        await wait_for(active, timeout=30, what="manager mirrors the copy's active pod")
        await env.manager.delete(JOBS, ns, "self")
        await env.wait_gone("self")
        assert await env.get(rname) is None
