"""bench versions: the plan, the verdicts and the report (pure parts of bench/versions.py and
bench/journeys.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import journeys
from bench import versions as vm
from clusterbed import versions
from testkit.status_sequences import sample_sequences

ROOT = Path(__file__).resolve().parents[2]


def test_parse_versions_takes_supported_releases_and_bare_minors() -> None:
    oldest, newest = versions.OLDEST_SUPPORTED_KUBE_VERSION, versions.KUBE_VERSION
    oldest_minor, newest_minor = (v.rsplit(".", 1)[0] for v in (oldest, newest))
    assert vm.parse_versions(f"{oldest}, v{newest_minor},{oldest_minor}") == (oldest, newest)
    with pytest.raises(ValueError, match="not a supported release"):
        vm.parse_versions(versions.OLD_KUBE_VERSION)
    with pytest.raises(ValueError, match="no release"):
        vm.parse_versions(" , ")


def test_plan_is_manager_major_and_the_corners_are_what_ci_runs() -> None:
    assert vm.plan(["1.33.7", "1.37.2"], ["1.36.4", "1.33.7"]) == [
        vm.Combination("1.33.7", "1.36.4"), vm.Combination("1.33.7", "1.33.7"),
        vm.Combination("1.37.2", "1.36.4"), vm.Combination("1.37.2", "1.33.7")]
    corners = vm.plan([], [], corners=True)
    assert corners == list(vm.CORNERS)
    assert {c.manager for c in corners} | {c.worker for c in corners} == {
        versions.KUBE_VERSION, *versions.CORNER_KUBE_VERSIONS}
    oldest = versions.OLDEST_SUPPORTED_KUBE_VERSION
    assert {(c.manager, c.worker) for c in corners if oldest in (c.manager, c.worker)} == {
        (versions.KUBE_VERSION, oldest), (oldest, versions.KUBE_VERSION)}  # both directions of skew


def test_cluster_uses_count_each_role_and_release() -> None:
    uses = vm.cluster_uses(vm.plan(["1.37.2"], ["1.37.2", "1.33.7"]))
    assert uses == {("manager", "1.37.2"): 2, ("worker", "1.37.2"): 1, ("worker", "1.33.7"): 1}
    m, w = vm.default_spec(vm.MANAGER, "1.36.4"), vm.default_spec(vm.WORKER, "1.36.4")
    assert (m.name, m.kube_version, m.nodes) == ("manager-1-36-4", "1.36.4", 0)
    assert (w.name, w.nodes) == ("worker-1-36-4", 2)


def test_verdict_tells_a_failed_expectation_from_an_error() -> None:
    assert journeys.verdict(None) == "passed"
    assert journeys.verdict(journeys.JourneyFailed("x")) == "failed"
    assert journeys.verdict(AssertionError("timed out waiting")) == "failed"
    assert journeys.verdict(TimeoutError()) == "failed"
    assert journeys.verdict(KeyError("status")) == "error"


def _journey(name: str, outcome: str = "passed", **kw: Any) -> dict[str, Any]:
    return {"name": name, "outcome": outcome, "seconds": 1.0, "step": kw.get("step"), "message": kw.get("message"),
            "notes": kw.get("notes", {}), "events": []}


def _doc() -> dict[str, Any]:
    combos = [
        {"manager": {"version": "1.37.2"}, "worker": {"version": "1.37.2"}, "seconds": 40.0, "journeysSeconds": 30.0,
         "journeys": [_journey("readmission", notes={"copyRewrite": "in place"}), _journey("status-replay")]},
        {"manager": {"version": "1.37.2"}, "worker": {"version": "1.33.7"}, "seconds": 50.0, "journeysSeconds": 45.0,
         "journeys": [_journey("readmission", notes={"copyRewrite": "recreated"}),
                      _journey("status-replay", "failed", step="replay", message="step 3 rejected\nold=...")]},
        {"manager": {"version": "1.36.4"}, "worker": {"version": "1.37.2"}, "seconds": 1.0,
         "error": "BedError: cluster manager-1-36-4 failed to start\nlogs"},
    ]
    doc = {"date": "2026-11-26T01:00:00Z", "git": {"commit": "abcdef1234567", "dirty": False},
           "machine": {"cores": 2}, "command": "python -m bench versions", "seconds": 90.0,
           "journeys": ["readmission", "status-replay"], "combinations": combos}
    doc["summary"] = vm.summary(doc)
    return doc


def test_summary_and_failures_name_every_journey_that_did_not_pass_and_every_combination_not_run() -> None:
    doc = _doc()
    assert doc["summary"] == {"combinations": 3, "combinationsNotRun": 1, "journeys": 4, "passed": 3, "failed": 1,
                              "error": 0, "controllerErrors": 0, "ok": False}
    assert vm.failures(doc) == [
        'manager 1.37.2 x worker 1.33.7 · status-replay failed at "replay": step 3 rejected',
        "manager 1.36.4 x worker 1.37.2: could not run: BedError: cluster manager-1-36-4 failed to start"]


def test_markdown_table_rows_are_managers_columns_workers_in_release_order() -> None:
    md = vm.markdown(_doc())
    assert "| manager \\ worker | 1.33.7 | 1.37.2 |" in md
    assert "| **1.36.4** | - | not run |" in md
    assert "| **1.37.2** | 1/2 ✗ | 2/2 |" in md
    assert "| **1.37.2** | recreated | in place |" in md  # how each worker took the re-admission
    assert "suspend-resume" not in md.split("passed.")[-1]  # no grid for a journey that did not run
    assert "- manager 1.37.2 x worker 1.33.7 · status-replay failed" in md


def test_the_docs_include_the_reports_matrix_section_the_bench_writes() -> None:
    """docs/versions.md shows results/versions.md's section, not a copy that can drift (issue 33)."""
    md = vm.markdown(_doc())
    start, end = "<!-- --8<-- [start:matrix] -->", "<!-- --8<-- [end:matrix] -->"
    assert md.index(start) < md.index("| manager \\ worker") < md.index(end)
    committed = (ROOT / "results" / "versions.md").read_text()
    assert start in committed and end in committed
    assert '--8<-- "results/versions.md:matrix"' in (ROOT / "docs" / "versions.md").read_text()


def test_replayed_histories_are_the_same_for_the_same_seed() -> None:
    a, b = sample_sequences(5, 6), sample_sequences(5, 6)
    assert len(a) == 6
    assert [(s.manager_job, s.steps) for s in a] == [(s.manager_job, s.steps) for s in b]
    assert [s.steps for s in sample_sequences(6, 6)] != [s.steps for s in a]


def test_a_422_is_shortened_to_its_field_and_verdict() -> None:
    msg = ('Job.batch "readmission" is invalid: spec.template: Invalid value: {"labels":{"a":"b: c"},'
           '"spec":{}}: field is immutable')
    assert journeys.short_invalid(msg) == 'Job.batch "readmission" is invalid: spec.template: field is immutable'
    assert journeys.short_invalid("forbidden") == "forbidden"


def test_a_logged_controller_error_fails_the_run_and_is_listed() -> None:
    import logging

    with vm.controller_errors() as errors:
        logging.getLogger("mirror.reconciler").error("ns/x: the pass did not settle")
        logging.getLogger("mirror.reconciler").warning("only a warning")
        logging.getLogger("elsewhere").error("not ours")
    logging.getLogger("mirror.reconciler").error("after the run")
    assert errors == ["mirror.reconciler ERROR: ns/x: the pass did not settle"]
    doc = {"combinations": [{"manager": {"version": "1.37.2"}, "worker": {"version": "1.37.2"}, "seconds": 1.0,
                             "journeysSeconds": 1.0, "journeys": [_journey("readmission")]}],
           "controllerErrors": errors, "journeys": ["readmission"], "date": "d", "git": {}, "machine": {},
           "command": "c", "seconds": 1.0}
    doc["summary"] = vm.summary(doc)
    assert doc["summary"]["controllerErrors"] == 1 and not doc["summary"]["ok"]
    assert "the pass did not settle" in vm.markdown(doc)
