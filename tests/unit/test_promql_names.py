"""testkit.promql: the metric names of PromQL expressions and of a /metrics page."""

from __future__ import annotations

import pytest

from testkit.promql import exported_names, metric_names


@pytest.mark.parametrize(("expr", "names"), [
    ("up", {"up"}),
    ("rate(jobmirror_dispatches_total[5m])", {"jobmirror_dispatches_total"}),
    ('sum by (worker) (rate(a_total{worker=~"w-1|w-2", x!="y"}[$__rate_interval]))', {"a_total"}),
    ("histogram_quantile(0.99, sum by (le) (rate(lat_seconds_bucket[5m])))", {"lat_seconds_bucket"}),
    ("max by (worker) (jobmirror_worker_up) == 0", {"jobmirror_worker_up"}),
    ("sum(rate(a[10m])) / clamp_min(sum(rate(b_count[10m])), 1e-9) > 0.1", {"a", "b_count"}),
    ("max(x) < 1 or absent(x)", {"x"}),
    ("a and on (pod) b unless ignoring(le) c", {"a", "b", "c"}),
    ("a * on (job) group_left(version) b", {"a", "b"}),
    ("sum without (instance) (a offset 1h)", {"a"}),
    ("deriv(q{queue=\"mirror\"}[15m:1m]) > 0 and q > 100", {"q"}),
    ('label_replace(a, "dst", "$1", "src", "(.*)")', {"a"}),
    ("count by (code) (ns:requests:rate5m)", {"ns:requests:rate5m"}),
    ("sum by(worker)(a{l='{weird}'})", {"a"}),
    ("topk(5, a) + bottomk by (x) (3, b)", {"a", "b"}),
    ("a > bool 3 and inf > nan", {"a"}),
    ("1e3 * 2", set()),
])
def test_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_exported_names_include_the_series_of_each_declared_type() -> None:
    text = """# HELP c_total things
# TYPE c_total counter
# HELP g a gauge
# TYPE g gauge
g 1.0
# HELP h_seconds latency
# TYPE h_seconds histogram
"""
    names = exported_names(text)
    assert {"c_total", "g", "h_seconds_bucket", "h_seconds_sum", "h_seconds_count"} <= set(names)
    assert names["c_total"] == "counter" and names["h_seconds_bucket"] == "histogram"
    assert "c" not in names and "h_seconds" not in names
