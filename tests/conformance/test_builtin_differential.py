"""Differential conformance: kube-controller-manager's Job controller vs ours.

Each scenario runs on KCM_JOBS (upstream Job controller) and on KCM_NO_JOBS (kcm with its
Job controller disabled, ours running) with identical pod outcomes. The final status —
conditions with type/status/reason/message, counters, completed/failed indexes, terminal
or not — the order of condition transitions, and what the controller put into its pods
must match exactly. Differences that are deliberate are listed in
``builtin_controller/DEVIATIONS.md``; none of them is visible here.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from kruntime.resources import Obj
from tests.conformance.scenarios import SCENARIOS

pytestmark = pytest.mark.conformance


def _diff(a: object, b: object, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            out += _diff(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{path}.{k}")
        return out
    return [] if a == b else [f"{path}: upstream={json.dumps(a, default=str)} ours={json.dumps(b, default=str)}"]


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
    diff = _diff(upstream, ours)
    assert not diff, f"{scenario}: builtin controller differs from kube-controller-manager:\n" + "\n".join(diff)


def test_scenario_catalogue_is_large_enough() -> None:
    assert len(SCENARIOS) >= 40
    covered = {s.covers for s in SCENARIOS}
    for topic in ("managedBy", "NonIndexed", "Indexed", "completions nil", "parallelism scale down",
                  "elastic Indexed", "adoption", "release", "deleted pods counted as failed",
                  "finalizers removed on Job deletion", "suspend", "resume", "activeDeadlineSeconds timer reset",
                  "backoffLimit + exponential delay", "backoffLimitPerIndex", "maxFailedIndexes",
                  "podFailurePolicy FailJob", "podFailurePolicy FailIndex", "podFailurePolicy Ignore",
                  "podFailurePolicy Count", "podFailurePolicy on conditions", "podReplacementPolicy",
                  "activeDeadlineSeconds", "successPolicy", "terminal only without terminating pods"):
        assert topic in covered, topic
