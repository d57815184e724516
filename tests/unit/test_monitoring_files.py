"""deploy/monitoring/: the PrometheusRule is well formed and the dashboard covers what operators need.

Whether every metric these files use is one the controller exports is checked against a
running controller (tests/integration/test_monitoring.py); here, structure only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.promql import metric_names

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
RULE = yaml.safe_load((MONITORING / "jobmirror-alerts.yaml").read_text())
DASHBOARD = json.loads((MONITORING / "jobmirror-dashboard.json").read_text())

#: Prometheus' duration syntax (model.ParseDuration): units in decreasing order, no spaces.
DURATION = re.compile(r"^(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?$")
RULE_KEYS = {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}
SEVERITIES = {"critical", "warning", "info"}


def alerts() -> list[dict[str, Any]]:
    return [r for g in RULE["spec"]["groups"] for r in g["rules"]]


def by_labels(expr: str) -> set[str]:
    """Label names an expression keeps: those of its by (...) clauses."""
    clauses = re.findall(r"\bby\s*\(([^)]*)\)", expr)
    return {lbl.strip() for clause in clauses for lbl in clause.split(",") if lbl.strip()}


def balanced(expr: str) -> bool:
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', "", expr):
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs and (not stack or stack.pop() != pairs[ch]):
            return False
    return not stack


def test_prometheusrule_object() -> None:
    assert RULE["apiVersion"] == "monitoring.coreos.com/v1" and RULE["kind"] == "PrometheusRule"
    assert set(RULE) == {"apiVersion", "kind", "metadata", "spec"} and set(RULE["spec"]) == {"groups"}
    names = [g["name"] for g in RULE["spec"]["groups"]]
    assert names and len(names) == len(set(names)), names
    for g in RULE["spec"]["groups"]:
        assert set(g) <= {"name", "interval", "rules", "limit"} and g["rules"], g


@pytest.mark.parametrize("rule", alerts(), ids=lambda r: r.get("alert", "?"))
def test_alert_rule(rule: dict[str, Any]) -> None:
    assert set(rule) <= RULE_KEYS and {"alert", "expr", "labels", "annotations"} <= set(rule), set(rule)
    assert re.fullmatch(r"Jobmirror[A-Z][A-Za-z]+", rule["alert"]), rule["alert"]
    expr = rule["expr"]
    assert isinstance(expr, str) and balanced(expr), expr
    assert metric_names(expr), f"{rule['alert']}: selects no metric"
    if "for" in rule:
        assert DURATION.fullmatch(rule["for"]) and rule["for"], rule["for"]
    assert rule["labels"].get("severity") in SEVERITIES, rule["labels"]
    assert {"summary", "description"} <= set(rule["annotations"]), rule["annotations"]
    # A template may only name labels the expression keeps.
    used = set(re.findall(r"\$labels\.(\w+)", json.dumps(rule["annotations"])))
    assert used <= by_labels(expr), f"{rule['alert']}: annotations use {used}, expr keeps {by_labels(expr)}"
    for text in rule["annotations"].values():
        assert text.count("{{") == text.count("}}"), text


def test_alert_names_are_unique_and_the_issue_s_alerts_exist() -> None:
    names = [r["alert"] for r in alerts()]
    assert len(names) == len(set(names)), names
    by_name = {r["alert"]: r for r in alerts()}
    assert {"JobmirrorWorkerDown", "JobmirrorStatusWritesRejected", "JobmirrorQueueGrowing",
            "JobmirrorReconcileErrors"} <= set(by_name)
    assert "jobmirror_worker_up" in metric_names(by_name["JobmirrorWorkerDown"]["expr"])
    assert by_name["JobmirrorWorkerDown"]["for"] == "5m"


def panels() -> list[dict[str, Any]]:
    return [p for p in DASHBOARD["panels"] if p["type"] != "row"]


def test_dashboard_structure() -> None:
    assert DASHBOARD["uid"] == "jobmirror" and DASHBOARD["title"]
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids)), ids
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for p in panels():
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert balanced(t["expr"]) and metric_names(t["expr"]), (p["title"], t["expr"])
        gp = p["gridPos"]
        assert gp["x"] >= 0 and gp["x"] + gp["w"] <= 24, (p["title"], gp)


def test_panels_do_not_overlap() -> None:
    cells: dict[tuple[int, int], str] = {}
    for p in DASHBOARD["panels"]:
        gp = p["gridPos"]
        for x in range(gp["x"], gp["x"] + gp["w"]):
            for y in range(gp["y"], gp["y"] + gp["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]


def test_dashboard_covers_the_issue_s_topics() -> None:
    """dispatch rate, queue depth, status-propagation latency, rejected writes, worker health, re-dispatches, GC"""
    used = {n for p in panels() for t in p["targets"] for n in metric_names(t["expr"])}
    for needed in ("jobmirror_dispatches_total", "jobmirror_runtime_queue_depth",
                   "jobmirror_status_propagation_seconds_bucket", "jobmirror_status_writes_total",
                   "jobmirror_worker_refusals_total", "jobmirror_worker_up", "jobmirror_redispatches_total",
                   "jobmirror_gc_deletions_total"):
        assert needed in used, needed
