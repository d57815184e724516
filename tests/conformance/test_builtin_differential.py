"""Differential conformance: kube-controller-manager's Job controller vs ours.

Each scenario runs on KCM_JOBS (upstream Job controller) and on KCM_NO_JOBS (kcm with its
Job controller disabled, ours running) with identical pod outcomes. The final status —
conditions with type/status/reason/message, counters, completed/failed indexes, terminal
or not, whether startTime is set (and each time that changed) — the order of condition
transitions, and what the controller put into its pods must match exactly. Both clusters
run one Kubernetes release (``JOBMIRROR_DIFFERENTIAL_KUBE_VERSION``, default the bed's), and
ours must follow that release's semantics. Differences that are deliberate are listed in
``builtin_controller/DEVIATIONS.md``; none of them is visible here.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from builtin_controller import semantics
from kruntime.resources import Obj
from testkit.differential import diff
from tests.conformance.conftest import OURS, UPSTREAM
from tests.conformance.harness import running_controller
from tests.conformance.scenarios import SCENARIOS

pytestmark = pytest.mark.conformance


@pytest.mark.parametrize("scenario", [s.name for s in SCENARIOS])
async def test_same_outcome_as_kube_controller_manager(scenario: str,
                                                       differential: dict[str, asyncio.Task[tuple[Obj, Obj]]]) -> None:
    upstream, ours = await differential[scenario]
    if dump := os.environ.get("JOBMIRROR_CONFORMANCE_DUMP"):
        Path(dump).mkdir(parents=True, exist_ok=True)
        (Path(dump) / f"{scenario}.json").write_text(json.dumps({"upstream": upstream, "ours": ours}, indent=1,
                                                                default=str))
    assert not upstream["driver_errors"] and not ours["driver_errors"], (upstream["driver_errors"],
                                                                         ours["driver_errors"])
    differences = diff(upstream, ours)
    assert not differences, (f"{scenario}: builtin controller differs from kube-controller-manager:\n"
                             + "\n".join(differences))


async def test_builtin_follows_the_release_of_its_api_server(
        differential: dict[str, asyncio.Task[tuple[Obj, Obj]]]) -> None:
    """Our controller read the API server's version and chose that release's semantics."""
    ctl = running_controller(OURS.name)
    assert ctl is not None and ctl.semantics is not None
    v = await ctl.client.request("GET", "/version")
    assert v["gitVersion"] == f"v{OURS.kube_version}" and OURS.kube_version == UPSTREAM.kube_version
    assert ctl.semantics == semantics.select(semantics.parse_version(v)).semantics
    assert ctl.semantics.release == ".".join(OURS.kube_version.split(".")[:2])


async def test_suspending_a_running_job_clears_start_time_as_the_release_does(
        differential: dict[str, asyncio.Task[tuple[Obj, Obj]]]) -> None:
    """kube-controller-manager itself behaves as our semantics table says for this release."""
    upstream, _ = await differential["suspend-running-stays-suspended"]
    sem = semantics.select(semantics.parse_version({"gitVersion": UPSTREAM.kube_version})).semantics
    assert upstream["job"]["startTime"] is not sem.clear_start_time_on_suspend
    want_trace = [False, True, False] if sem.clear_start_time_on_suspend else [False, True]
    assert upstream["job"]["startTime_trace"] == want_trace


def test_scenario_catalogue_is_large_enough() -> None:
    assert len(SCENARIOS) >= 40
    covered = {s.covers for s in SCENARIOS}
    for topic in ("managedBy", "NonIndexed", "Indexed", "completions nil", "parallelism scale down",
                  "elastic Indexed", "adoption", "release", "deleted pods counted as failed",
                  "finalizers removed on Job deletion", "suspend", "resume", "activeDeadlineSeconds timer reset",
                  "backoffLimit + exponential delay", "backoffLimitPerIndex", "maxFailedIndexes",
                  "podFailurePolicy FailJob", "podFailurePolicy FailIndex", "podFailurePolicy Ignore",
                  "podFailurePolicy Count", "podFailurePolicy on conditions", "podReplacementPolicy",
                  "activeDeadlineSeconds", "successPolicy", "terminal only without terminating pods",
                  "suspend clears startTime (1.36+)"):
        assert topic in covered, topic
