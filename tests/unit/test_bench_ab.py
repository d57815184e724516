"""bench/ab.py reads the figures it compares from a real compare result, and refuses a bad order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import ab

RESULTS = Path(__file__).resolve().parents[2] / "results"


def test_figures_come_from_the_jobmirror_run_of_a_compare_result() -> None:
    doc = json.loads((RESULTS / "compare-floor.json").read_text())
    thousand = next(r for r in doc["runs"] if r["jobs"] == 1000)
    got = ab.figures({**doc, "runs": [thousand]})  # an ab run has one size
    jm = thousand["results"]["jobmirror"]
    assert got["dispatches_per_s"] == jm["throughput"]["dispatchedPerSecond"]
    assert got["api_per_job_manager"] == jm["apiRequests"]["manager"]["perJobExcludingIdle"]
    assert got["own_manager_calls"] == jm["apiRequests"]["managerOwnCalls"]["total"]
    assert got["passes_per_job"] == round(jm["controller"]["reconciles"] / 1000, 2)
    assert got["complete"] == 1000 and set(ab.FIGURES) <= set(got)


def test_an_order_naming_an_unknown_variant_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="only A, B are given"):
        ab.main([("before", "HEAD"), ("after", "HEAD")], "ABC", 10, tmp_path, "x")
