from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from kruntime.client import ApiError
from kruntime.resources import NAMESPACES, Obj
from mirror.naming import ANNOTATION_PIN
from mirror.tenancy import (
    ENFORCE,
    RecentNamespaces,
    created_namespace_labels,
    enforce_level,
    may_use,
    not_allowed_reason,
    weaker_posture,
    worker_namespace,
)
from testkit.fakecluster import FakeApiServer
from testkit.fakefleet import fake_fleet, job

BASELINE = {"pod-security.kubernetes.io/enforce": "baseline"}


@pytest.mark.parametrize(("ns", "allowed", "ok"), [
    ("team-a", [], True),
    ("team-a", ["team-a"], True),
    ("team-a", ["team-*"], True),
    ("team-a", ["team-b", "other-*"], False),
    ("kube-system", ["team-*"], False),
    ("team-a", ["TEAM-*"], False),  # names are lower case; patterns match exactly
])
def test_worker_namespace_allow_list(ns: str, allowed: list[str], ok: bool) -> None:
    assert may_use(ns, allowed) is ok


@pytest.mark.parametrize(("manager_labels", "extra", "defaults", "expected"), [
    # Pod Security labels always travel, every mode and version.
    ({"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "v1.30",
      "pod-security.kubernetes.io/audit": "restricted", "other": "x"}, [], BASELINE,
     {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "v1.30",
      "pod-security.kubernetes.io/audit": "restricted"}),
    # None on the manager: the defaults, so never an unlabelled (privileged) namespace.
    ({}, [], BASELINE, BASELINE),
    (None, [], BASELINE, BASELINE),
    # The manager may say privileged on purpose: that is what the tenant has there.
    ({"pod-security.kubernetes.io/enforce": "privileged"}, [], BASELINE,
     {"pod-security.kubernetes.io/enforce": "privileged"}),
    # Only warn on the manager: the default enforce stays.
    ({"pod-security.kubernetes.io/warn": "restricted"}, [], BASELINE,
     {**BASELINE, "pod-security.kubernetes.io/warn": "restricted"}),
    # Extra keys by name or pattern.
    ({"team": "a", "cost.example.com/center": "42", "other": "x"}, ["team", "cost.example.com/*"], {},
     {"team": "a", "cost.example.com/center": "42"}),
    ({}, [], {}, {}),
])
def test_created_namespaces_take_the_managers_posture(manager_labels: dict[str, str] | None, extra: list[str],
                                                      defaults: dict[str, str], expected: dict[str, str]) -> None:
    ns = {"metadata": {"name": "team-a", "labels": manager_labels}}
    assert created_namespace_labels(ns, extra=extra, defaults=defaults) == expected


def test_the_namespace_body() -> None:
    ns = {"metadata": {"name": "team-a", "uid": "u", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    assert worker_namespace("team-a", ns, extra=[], defaults=BASELINE) == {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team-a", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}


# -- issue 32 item 5: reserved namespaces, and existing worker namespaces weaker than the manager's --

@pytest.mark.parametrize(("ns", "allowed", "ok"), [
    ("default", [], False),
    ("kube-system", [], False),
    ("kube-public", ["*"], False),  # a catch-all never lets a cluster's own namespace in
    ("default", ["d*", "*t"], False),
    ("default", ["default"], True),
    ("kube-system", ["kube-system"], True),
    ("kube-node-lease", ["kube-*"], True),
    ("kube-system", ["kube-public"], False),
    ("defaults", [], True),  # only the names themselves are reserved
    ("kubeflow", [], True),
], ids=["default-empty", "kube-system-empty", "kube-star", "default-patterns", "default-named", "kube-system-named",
        "kube-pattern", "other-kube-named", "defaults", "kubeflow"])
def test_cluster_namespaces_are_used_only_when_named(ns: str, allowed: list[str], ok: bool) -> None:
    assert may_use(ns, allowed) is ok


def test_the_not_allowed_reason_says_why() -> None:
    assert "default, kube-*" in not_allowed_reason("default", [])
    assert "not among the workerNamespaces" in not_allowed_reason("team-a", ["team-b"])


def namespace(level: str | None, name: str = "team-a") -> Obj:
    labels = {} if level is None else {ENFORCE: level}
    return {"metadata": {"name": name, "labels": labels}}


@pytest.mark.parametrize(("labels", "level"), [
    (None, "privileged"),  # the Pod Security admission default (the controller cannot read another)
    ({}, "privileged"),
    ({ENFORCE: "privileged"}, "privileged"),
    ({ENFORCE: "baseline"}, "baseline"),
    ({ENFORCE: "restricted"}, "restricted"),
    ({ENFORCE: "Restricted"}, "restricted"),  # a value admission does not know: it falls back to restricted
    ({ENFORCE: ""}, "restricted"),
    ({"pod-security.kubernetes.io/warn": "restricted"}, "privileged"),  # only enforce refuses pods
], ids=["no-labels", "empty", "privileged", "baseline", "restricted", "unknown", "blank", "warn-only"])
def test_the_enforced_level(labels: dict[str, str] | None, level: str) -> None:
    assert enforce_level({"metadata": {"name": "x", "labels": labels}}) == level


@pytest.mark.parametrize(("manager", "worker", "weaker"), [
    ("restricted", None, True),  # issue 32: manager restricted, worker unlabelled
    ("restricted", "baseline", True),
    ("restricted", "privileged", True),
    ("baseline", None, True),
    ("baseline", "privileged", True),
    ("restricted", "restricted", False),
    ("baseline", "restricted", False),
    ("baseline", "baseline", False),
    (None, None, False),
    (None, "privileged", False),
    ("privileged", None, False),
    ("bogus", "baseline", True),  # unknown on the manager: held to the strictest
    ("restricted", "bogus", False),  # unknown on the worker: admission enforces restricted
], ids=["restricted-vs-unlabelled", "restricted-vs-baseline", "restricted-vs-privileged", "baseline-vs-unlabelled",
        "baseline-vs-privileged", "equal-restricted", "stricter", "equal-baseline", "both-unlabelled",
        "unlabelled-vs-privileged", "privileged-vs-unlabelled", "unknown-manager", "unknown-worker"])
def test_a_worker_namespace_weaker_than_the_managers(manager: str | None, worker: str | None, weaker: bool) -> None:
    why = weaker_posture(namespace(manager), namespace(worker), worker="w1")
    assert (why is not None) is weaker
    if why is not None:
        assert "team-a" in why and "w1" in why and f"{ENFORCE}=" in why


def test_an_unlabelled_worker_namespace_is_named_as_such() -> None:
    why = weaker_posture(namespace("restricted"), namespace(None), worker="w1")
    assert why is not None and "unlabelled" in why and "'privileged'" in why and "'restricted'" in why


async def test_namespaces_are_read_once_per_cluster_while_fresh() -> None:
    now = [0.0]
    reads: list[str] = []
    recent = RecentNamespaces(ttl=30, clock=lambda: now[0])

    def reader(cluster: str) -> Callable[[], Awaitable[Obj]]:
        async def read() -> Obj:
            reads.append(cluster)
            return namespace("baseline")
        return read

    for cluster in ("w1", "w1", "", "w1"):
        await recent.get(cluster, "team-a", reader(cluster))
    assert reads == ["w1", ""]
    now[0] = 31.0
    await recent.get("w1", "team-a", reader("w1"))
    assert reads == ["w1", "", "w1"]


async def test_a_failed_read_is_not_kept() -> None:
    recent = RecentNamespaces()
    calls = 0

    async def missing() -> Obj:
        nonlocal calls
        calls += 1
        raise ApiError(404, "NotFound", "no", {})

    for _ in range(2):
        with pytest.raises(ApiError):
            await recent.get("w1", "team-a", missing)
    assert calls == 2


async def test_passes_asking_while_a_read_is_under_way_share_it() -> None:
    recent = RecentNamespaces()
    reads = 0
    gate = asyncio.Event()

    async def read() -> Obj:
        nonlocal reads
        reads += 1
        await gate.wait()
        return namespace("baseline")

    waiting = [asyncio.create_task(recent.get("w1", "team-a", read)) for _ in range(20)]
    await asyncio.sleep(0)
    gate.set()
    got = await asyncio.gather(*waiting)
    assert reads == 1 and all(g == got[0] for g in got)


async def test_a_failed_shared_read_fails_every_waiter_and_is_not_kept() -> None:
    recent = RecentNamespaces()
    gate = asyncio.Event()

    async def missing() -> Obj:
        await gate.wait()
        raise ApiError(404, "NotFound", "no", {})

    waiting = [asyncio.create_task(recent.get("w1", "team-a", missing)) for _ in range(3)]
    await asyncio.sleep(0)
    gate.set()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(r, ApiError) for r in results)
    assert await recent.get("w1", "team-a", _ns_baseline) == namespace("baseline")


async def _ns_baseline() -> Obj:
    return namespace("baseline")


# -- through the reconciler, on fake servers ------------------------------------------------------

def seed_namespace(server: FakeApiServer, name: str, level: str | None) -> None:
    server.seed(NAMESPACES.path(), namespace(level, name))


@pytest.mark.parametrize(("pin", "copied_on", "weaker_event"), [
    ("worker-1", None, True),  # pinned to the weaker worker: no copy anywhere, a Warning
    (None, "worker-2", True),  # unpinned: placed on the worker whose namespace is strong enough
], ids=["pinned", "unpinned"])
async def test_a_copy_never_lands_in_a_weaker_existing_namespace(pin: str | None, copied_on: str | None,
                                                                 weaker_event: bool) -> None:
    async with fake_fleet() as f:
        seed_namespace(f.manager, "team-a", "restricted")
        seed_namespace(f.workers["worker-1"], "team-a", None)
        seed_namespace(f.workers["worker-2"], "team-a", "restricted")
        await f.create(job("a", namespace="team-a", annotations={ANNOTATION_PIN: pin} if pin else None))
        await f.sync("a", "team-a")
        await f.sync("a", "team-a")
        assert f.copy("worker-1", "a", "team-a") is None
        assert (f.copy("worker-2", "a", "team-a") is not None) is (copied_on == "worker-2")
        events = dict(f.events("a", "team-a"))
        assert ("NamespaceWeaker" in events) is weaker_event
        assert "worker-1" in events["NamespaceWeaker"] and "'privileged'" in events["NamespaceWeaker"]


async def test_a_job_in_default_gets_no_copy_unless_default_is_named() -> None:
    async with fake_fleet(workerNamespaces=["*"]) as f:
        await f.create(job("a"))
        await f.sync("a")
        assert f.copy("worker-1", "a") is None and f.copy("worker-2", "a") is None
        assert "NamespaceNotAllowed" in f.reasons("a")
