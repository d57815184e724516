"""The builtin Job controller vs kube-controller-manager's, with real kubelets and containers.

Runs with ``JOBMIRROR_E2E_PROVIDER=kind`` (the kind tier of ``make test``). Upstream's side is
a worker cluster of the deployment (kcm with its Job controller); ours is ``<prefix>-no-jobs``
(kcm ``--controllers=*,-job-controller``) with the builtin controller running in this process
for the ``bc-`` namespaces, as in ``tests/conformance``. Every scenario runs on both at once
(same namespace name) and all scenarios run concurrently, so the module costs about its
slowest scenario. Compared exactly (``testkit.differential.diff``): the conformance snapshot
(final status, condition trace, startTime trace, pods created and left, pod shapes) plus the
checkpoints of :mod:`e2e.differential`. Each scenario also states what both sides must show at
its checkpoints, so a run where the interesting window never opened cannot pass as equal.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from builtin_controller import fields
from e2e.differential import (
    KindScenario,
    Result,
    Side,
    delete_namespace,
    format_report,
    job_spec,
    kubectl_for,
    pod_template,
    run_pair,
)
from e2e.harness import E2EEnv, log
from kruntime.client import ClusterClient
from kruntime.resources import PODS, Obj
from testkit.differential import diff
from tests.conformance.harness import ensure_controller, ensure_view, new_namespace_name, stop_controllers

pytestmark = [pytest.mark.e2e, pytest.mark.kind]

#: Seconds a deleted pod stays Terminating (its SIGTERM trap): room for a checkpoint inside.
TERM_DELAY = 8
#: Longer than the replacement's re-creation backoff (10 s after a failure) plus its start.
LONG_TERM_DELAY = 30
NO_JOBS_FLAG = "--controllers=*,-job-controller"
FAILJOB_42 = {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}
IGNORE_DISRUPTION = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


# -- steps ------------------------------------------------------------------------------------

def _one_terminating(s: Side) -> bool:
    return len(s.terminating()) == 1


async def scale_down_with_a_terminating_pod(s: Side) -> None:
    await s.wait_ready(2)
    await s.checkpoint("both-ready")
    await s.d.patch_job({"spec": {"parallelism": 1}})
    await s.d.wait(lambda: _one_terminating(s), what="one pod terminating")
    await s.checkpoint("one-terminating", hold=lambda: _one_terminating(s))
    await s.d.wait(lambda: not s.terminating(), timeout=60, what="the deleted pod gone")
    await s.checkpoint("terminated")
    await s.release_all()
    await s.wait_ready(1, fresh=True)
    await s.checkpoint("second-pod-ready")
    await s.release_all()


async def suspend_with_terminating_pods(s: Side) -> None:
    await s.wait_ready(2)
    await s.checkpoint("running")
    await s.d.patch_job({"spec": {"suspend": True}})
    await s.d.wait(lambda: len(s.terminating()) == 2, what="both pods terminating")
    await s.checkpoint("suspending", hold=lambda: len(s.terminating()) == 2)
    await s.d.wait(lambda: not s.terminating(), timeout=60, what="both pods gone")
    await s.checkpoint("suspended")
    await s.d.patch_job({"spec": {"suspend": False}})
    await s.wait_ready(2, fresh=True)
    await s.checkpoint("resumed")
    await s.release_all()


async def delete_then_wait_for_the_replacement(s: Side) -> None:
    [pod] = await s.wait_ready(1)
    await s.checkpoint("running")
    await s.d.delete_pod(pod)
    await s.d.wait(lambda: _one_terminating(s), what="the deleted pod terminating")
    await s.checkpoint("terminating", hold=lambda: _one_terminating(s))
    await s.wait_ready(1, fresh=True)
    await s.checkpoint("replaced")
    await s.release_all()


async def delete_then_replacement_beside_the_terminating_pod(s: Side) -> None:
    [pod] = await s.wait_ready(1)
    await s.checkpoint("running")
    await s.d.delete_pod(pod)
    await s.d.wait(lambda: _one_terminating(s), what="the deleted pod terminating")
    await s.wait_ready(1, fresh=True)
    await s.checkpoint("replaced-while-terminating", hold=lambda: _one_terminating(s))
    await s.release_all()


async def index_zero_exits_42_beside_a_running_pod(s: Side) -> None:
    await s.wait_ready(2)
    await s.checkpoint("running")
    [zero] = [p for p in s.d.active() if fields.completion_index(p) == 0]
    await s.release(zero)
    await s.d.wait(lambda: s.d.cond("FailureTarget") == "True" and _one_terminating(s),
                   what="FailureTarget with the sibling terminating")
    await s.checkpoint("failure-target", hold=lambda: _one_terminating(s))


async def evict_then_release_the_replacement(s: Side) -> None:
    [pod] = await s.wait_ready(1)
    await s.checkpoint("running")
    await s.evict(pod)
    await s.d.wait(lambda: _one_terminating(s), what="the evicted pod terminating")
    await s.checkpoint("evicted", hold=lambda: _one_terminating(s))
    await s.wait_ready(1, fresh=True)
    await s.checkpoint("replaced")
    await s.release_all()


# -- the catalogue ----------------------------------------------------------------------------

def catalogue(image: str) -> dict[str, KindScenario]:
    tpl = functools.partial(pod_template, image, term_delay=TERM_DELAY)

    scenarios = [
        KindScenario("ready-terminating-scale-down",
                     job_spec(tpl(readiness_probe=True), completions=2, parallelism=2),
                     scale_down_with_a_terminating_pod,
                     covers="status.ready from a readiness probe; status.terminating while a scaled-down pod drains",
                     expect={"both-ready": {"active": 2, "ready": 2, "terminating": 0},
                             "one-terminating": {"active": 1, "ready": 1, "terminating": 1},
                             "terminated": {"active": 1, "ready": 1, "terminating": 0},
                             "second-pod-ready": {"active": 1, "ready": 1, "succeeded": 1}},
                     final={"terminal": "Complete", "succeeded": 2, "ready": 0, "terminating": 0}),
        KindScenario("suspend-with-terminating-pods",
                     job_spec(tpl(readiness_probe=True), completions=2, parallelism=2), suspend_with_terminating_pods,
                     covers="suspend: ready drops at once, terminating counts the draining pods, resume",
                     expect={"running": {"active": 2, "ready": 2},
                             "suspending": {"active": 0, "ready": 0, "terminating": 2},
                             "suspended": {"active": 0, "terminating": 0},
                             "resumed": {"active": 2, "ready": 2, "terminating": 0}},
                     final={"terminal": "Complete", "succeeded": 2}),
        KindScenario("replacement-policy-failed-graceful",
                     job_spec(tpl(), backoffLimit=2, podReplacementPolicy="Failed"),
                     delete_then_wait_for_the_replacement,
                     covers="podReplacementPolicy Failed: no replacement while the deleted pod terminates",
                     expect={"terminating": {"active": 0, "terminating": 1, "pods_created": 1},
                             "replaced": {"active": 1, "terminating": 0, "pods_created": 2}},
                     final={"terminal": "Complete", "succeeded": 1}, beside_terminating=[0]),
        KindScenario("replacement-policy-default-graceful",
                     job_spec(pod_template(image, term_delay=LONG_TERM_DELAY), backoffLimit=2),
                     delete_then_replacement_beside_the_terminating_pod,
                     covers="podReplacementPolicy TerminatingOrFailed (the default), the contrast: the replacement "
                            "runs beside the terminating pod",
                     expect={"replaced-while-terminating": {"active": 1, "ready": 1, "terminating": 1,
                                                            "pods_created": 2}},
                     final={"terminal": "Complete", "succeeded": 1, "terminating": 0}, beside_terminating=[1]),
        KindScenario("pfp-failjob-exit-42-sibling-terminating",
                     job_spec(tpl(exit_codes={0: 42}), completionMode="Indexed", completions=2, parallelism=2,
                              podFailurePolicy={"rules": [FAILJOB_42]}),
                     index_zero_exits_42_beside_a_running_pod,
                     covers="podFailurePolicy FailJob on a real exit code: FailureTarget, Failed once the sibling "
                            "is gone",
                     expect={"failure-target": {"terminating": 1, "conditions": [
                         ("FailureTarget", "True", "PodFailurePolicy")]}},
                     final={"terminal": "Failed", "failed": 2, "terminating": 0}),
        KindScenario("pfp-ignore-eviction",
                     job_spec(tpl(), backoffLimit=0, podFailurePolicy={"rules": [FAILJOB_42, IGNORE_DISRUPTION]}),
                     evict_then_release_the_replacement,
                     covers="podFailurePolicy Ignore on DisruptionTarget set by the Eviction API",
                     expect={"evicted": {"active": 0, "terminating": 1, "failed": 0},
                             "replaced": {"active": 1, "failed": 0, "pods_created": 2}},
                     final={"terminal": "Complete", "succeeded": 1, "failed": 0}, beside_terminating=[0]),
    ]
    return {s.name: s for s in scenarios}


NAMES = list(catalogue("busybox"))


def expectation_misses(sc: KindScenario, snap: Obj) -> list[str]:
    """What the scenario says every Job controller shows at its checkpoints and at its end."""
    out = []
    for cp, want in sc.expect.items():
        got = snap["checkpoints"].get(cp, {})
        out += [f"checkpoint {cp}: {k}={got.get(k)!r}, want {v!r}" for k, v in want.items() if got.get(k) != v]
    job = snap.get("job") or {}
    out += [f"final {k}={job.get(k)!r}, want {v!r}" for k, v in sc.final.items() if job.get(k) != v]
    if sc.beside_terminating is not None and snap["created_beside_terminating"] != sc.beside_terminating:
        out.append(f"pods created beside a terminating pod: {snap['created_beside_terminating']}, "
                   f"want {sc.beside_terminating}")
    return out


# -- the run ----------------------------------------------------------------------------------

async def _check_no_job_controller(client: ClusterClient) -> None:
    """Two Job controllers on one cluster would both create pods: prove kcm runs without its own."""
    pods, _ = await client.list_all(PODS, "kube-system", label_selector="component=kube-controller-manager")
    commands = [" ".join(c.get("command") or []) for p in pods for c in p["spec"]["containers"]]
    assert commands and all(NO_JOBS_FLAG in c for c in commands), f"kcm of the no-jobs cluster: {commands}"


@pytest.fixture(scope="module")
async def kind_differential(request: pytest.FixtureRequest,
                            e2e_env: E2EEnv) -> AsyncIterator[dict[str, asyncio.Task[Result]]]:
    """Both clusters, our controller on the no-jobs one, and every selected scenario started."""
    env = e2e_env
    if env.provider != "kind":
        pytest.fail("e2e/test_kind_differential.py needs JOBMIRROR_E2E_PROVIDER=kind (make e2e-kind)")
    dep = env.kind
    if not dep.no_jobs_kubeconfig:
        msg = ("this kind deployment has no no-jobs cluster (attached to one made without it? "
               "python -m kindbed up --no-jobs-cluster)")
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    worker = sorted(env.separate_workers())[0]
    t0 = time.monotonic()
    ours_kc = Path(dep.no_jobs_kubeconfig)
    ours_client = await ClusterClient.from_kubeconfig("no-jobs", ours_kc, qps=0)
    await _check_no_job_controller(ours_client)
    await ensure_controller("no-jobs", str(ours_kc))
    upstream = (await ensure_view(env.workers[worker]), kubectl_for(env.kubectl_binary, env.worker_kubeconfigs[worker]))
    ours = (await ensure_view(ours_client), kubectl_for(env.kubectl_binary, ours_kc))
    log(f"kind differential: kcm on {worker} vs the builtin controller on {dep.no_jobs_kubeconfig} "
        f"({time.monotonic() - t0:.1f}s to start)")
    by_name = catalogue(env.pod_image)
    selected = [item.callspec.params["scenario"] for item in request.session.items
                if hasattr(item, "callspec") and "kind_differential" in getattr(item, "fixturenames", ())]
    namespaces = {name: new_namespace_name() for name in dict.fromkeys(selected)}
    t0 = time.monotonic()
    tasks = {name: asyncio.create_task(run_pair(upstream, ours, by_name[name], ns), name=f"kind-diff-{name}")
             for name, ns in namespaces.items()}
    yield tasks
    for t in tasks.values():
        t.cancel()
    done = await asyncio.gather(*tasks.values(), return_exceptions=True)
    secs = [r.seconds for r in done if isinstance(r, Result)]
    env.notes.append(f"kind differential: {len(secs)}/{len(tasks)} scenarios ran on both sides in "
                     f"{time.monotonic() - t0:.0f}s (slowest {max(secs, default=0):.0f}s)")
    for ns in namespaces.values():
        for view in (upstream[0], ours[0]):
            await delete_namespace(view, ns)
    await stop_controllers()
    await ours_client.close()


@pytest.mark.parametrize("scenario", NAMES)
async def test_kind_builtin_controller_matches_kcm(scenario: str,
                                                   kind_differential: dict[str, asyncio.Task[Result]]) -> None:
    """builtin Job controller = kube-controller-manager's with real kubelets (status, checkpoints, pods)"""
    r = await kind_differential[scenario]
    sc = catalogue("busybox")[scenario]
    if dump := os.environ.get("JOBMIRROR_CONFORMANCE_DUMP"):
        Path(dump).mkdir(parents=True, exist_ok=True)
        (Path(dump) / f"kind-{scenario}.json").write_text(json.dumps(
            {"upstream": r.upstream, "ours": r.ours, "report": r.report}, indent=1, default=str))
    timelines = format_report(r.report)
    for side, snap in (("kube-controller-manager", r.upstream), ("builtin", r.ours)):
        assert not snap["driver_errors"], (side, snap["driver_errors"])
        assert not snap["trajectory_faults"], (side, snap["trajectory_faults"], timelines)
        misses = expectation_misses(sc, snap)
        assert not misses, (f"{scenario} on {side} did not do what the scenario is about: {misses}\n"
                            f"{timelines}")
    differences = diff(r.upstream, r.ours)
    assert not differences, (f"{scenario}: builtin controller differs from kube-controller-manager with real "
                             "kubelets:\n" + "\n".join(differences) + f"\n{timelines}")


def test_kind_differential_catalogue_covers_the_issue() -> None:
    """the kind differential covers ready/terminating, podReplacementPolicy Failed, podFailurePolicy"""
    covers = " | ".join(s.covers for s in catalogue("busybox").values())
    for topic in ("status.ready", "status.terminating", "podReplacementPolicy Failed", "FailJob on a real exit code",
                  "Ignore on DisruptionTarget"):
        assert topic in covers, topic
