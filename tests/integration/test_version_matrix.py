"""The version matrix's corners in CI (issue 22): the journeys of ``bench versions`` through the
same code (bench/versions.py), on the session's clusters where they fit.

Corners: both on the default release; a worker on the oldest supported release; a manager on the
oldest supported release. The default-release manager serves two combinations at once (one controller
and namespace each), so only the oldest release's worker and manager are extra clusters.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from bench import versions as vm
from bench.machine import git_info, machine_info, now_iso
from clusterbed import versions
from clusterbed.cluster import ClusterSpec, LocalCluster
from tests.conftest import MANAGER, WORKER_1

pytestmark = [pytest.mark.integration, pytest.mark.built_beside]


def _spec(role: str, version: str) -> ClusterSpec:
    """The session's manager and worker-1 for the default release (same shapes), else the bench's."""
    if version == versions.KUBE_VERSION:
        return MANAGER if role == vm.MANAGER else WORKER_1
    return vm.default_spec(role, version)


def _explain(doc: dict[str, Any]) -> str:
    """Every journey that did not pass, with its step, message and the events on its Jobs."""
    out = vm.failures(doc) + [f"controller error: {e}" for e in doc["controllerErrors"]]
    for c in doc["combinations"]:
        for j in c.get("journeys") or []:
            if j["outcome"] != "passed":
                out.append(f"--- manager {c['manager']['version']} x worker {c['worker']['version']} · {j['name']} "
                           f"({j['outcome']} at {j['step']!r} after {j['seconds']}s)\n{j['message']}\n"
                           + "\n".join(f"  event {e}" for e in j["events"]))
    return "\n".join(out)


async def test_every_journey_passes_on_the_corners_of_the_version_matrix(
        cluster: Callable[[ClusterSpec], LocalCluster]) -> None:
    t0 = time.monotonic()
    lines: list[str] = []

    def say(msg: str) -> None:
        lines.append(msg)
        print(msg, flush=True)

    opts = vm.MatrixOptions(parallel=len(vm.CORNERS))
    with vm.controller_errors() as errors:
        results = await vm.run_matrix(vm.CORNERS, vm.ClusterPool(cluster, spec_for=_spec), opts, say)
    doc = vm.result_document(results, opts, command="pytest tests/integration/test_version_matrix.py",
                             seconds=time.monotonic() - t0, date=now_iso(), machine=machine_info(), git=git_info(),
                             errors=errors)
    print(vm.markdown(doc))
    assert doc["summary"]["ok"], "\n" + _explain(doc) + "\n\n" + json.dumps(doc["summary"])
    for c in results:
        assert c["manager"]["serverVersion"] == f"v{c['manager']['version']}", c["manager"]
        assert c["worker"]["serverVersion"] == f"v{c['worker']['version']}", c["worker"]
        assert [j["name"] for j in c["journeys"]] == list(vm.JOURNEYS), c["journeys"]
