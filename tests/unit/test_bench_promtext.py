"""bench.promtext: Prometheus exposition parsing and counter deltas."""
# ruff: noqa: E501  (verbatim kube-apiserver /metrics lines)

from __future__ import annotations

import math

import pytest

from bench.promtext import (
    MetricsParseError,
    Sample,
    counter_delta,
    grouped,
    parse,
    parse_line,
    quantile_from_histogram,
    total,
)

APISERVER = r'''
# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, ...
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 100
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="status",verb="PUT",version="v1"} 250
apiserver_request_total{code="409",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="status",verb="PUT",version="v1"} 3
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 12
apiserver_request_duration_seconds_bucket{verb="GET",le="+Inf"} 5
'''


def test_parse_apiserver_counters() -> None:
    samples = parse(APISERVER)
    assert len(samples) == 5
    assert total(samples, "apiserver_request_total") == 365
    assert total(samples, "apiserver_request_total", {"resource": "jobs", "subresource": "status"}) == 253
    assert total(samples, "apiserver_request_total", lambda lb: lb["code"].startswith("2")) == 362
    assert grouped(samples, "apiserver_request_total", ("verb",)) == {("POST",): 100, ("PUT",): 253, ("GET",): 12}


def test_escapes_infinities_and_timestamps() -> None:
    s = parse_line(r'm{path="a\"b\\c\nd",x="1,2}"} +Inf 1700000000000')
    assert s == Sample("m", {"path": 'a"b\\c\nd', "x": "1,2}"}, math.inf)
    assert parse_line("m_nolabels 3.5e2") == Sample("m_nolabels", {}, 350.0)
    assert math.isnan(parse_line("m NaN").value)  # type: ignore[union-attr]
    assert parse_line('m{a="1",} -Inf') == Sample("m", {"a": "1"}, -math.inf)
    assert parse_line("  # comment") is None and parse_line("") is None


def test_prometheus_client_output_round_trips() -> None:
    from prometheus_client import CollectorRegistry, Counter, generate_latest

    reg = CollectorRegistry()
    c = Counter("jobmirror_runtime_api_requests_total", "x", ["cluster", "verb", "code"], registry=reg)
    c.labels("manager", "PUT", "200").inc(7)
    c.labels("worker-1", "GET", "404").inc(2)
    samples = parse(generate_latest(reg).decode())
    assert total(samples, "jobmirror_runtime_api_requests_total", {"cluster": "manager"}) == 7
    assert total(samples, "jobmirror_runtime_api_requests_total") == 9


@pytest.mark.parametrize("bad", ['m{a=1} 2', 'm{a="1" 2', "m", 'm{a="x"} notanumber'])
def test_malformed_lines_raise(bad: str) -> None:
    with pytest.raises(MetricsParseError):
        parse_line(bad)


def test_counter_delta_groups_and_restarts() -> None:
    before = parse('r{verb="GET"} 10\nr{verb="PUT"} 5\nr{verb="POST"} 50\n')
    after = parse('r{verb="GET"} 25\nr{verb="PUT"} 5\nr{verb="POST"} 4\nr{verb="DELETE"} 2\n')
    d = counter_delta(before, after, "r", ("verb",))
    # unchanged PUT omitted; POST went down (process restart): its whole new value counts
    assert d == {("GET",): 15, ("POST",): 4, ("DELETE",): 2}
    # Ungrouped, the sum went down (65 -> 36): taken as a restart, the whole new value counts.
    assert counter_delta(before, after, "r") == {(): 36}
    assert counter_delta(after, after, "r") == {}


def test_mean_from_histogram() -> None:
    from bench.promtext import mean_from_histogram

    before = parse('d_sum{verb="GET"} 1.0\nd_count{verb="GET"} 10\nd_sum{verb="PUT"} 2\nd_count{verb="PUT"} 4\n')
    after = parse('d_sum{verb="GET"} 4.0\nd_count{verb="GET"} 40\nd_sum{verb="PUT"} 2\nd_count{verb="PUT"} 4\n')
    assert mean_from_histogram(before, after, "d", ("verb",)) == {("GET",): pytest.approx(0.1)}


def _wait(buckets: dict[str, float], urgent: str = "true") -> list[Sample]:
    return [Sample("w_bucket", {"le": le, "urgent": urgent}, n) for le, n in buckets.items()]


@pytest.mark.parametrize(("q", "want"), [
    (0.5, 0.1),    # rank 50 of 100: the end of the (0.01, 0.1] bucket, which holds 40 of the first 50
    (0.3, 0.055),  # rank 30: halfway through the 40 in (0.01, 0.1]
    (0.99, 1.0),   # rank 99 lies in the +Inf bucket: the highest finite bound
    (0.05, 0.005),  # rank 5 of the 10 in (0, 0.01]
])
def test_quantile_from_histogram_between_scrapes(q: float, want: float) -> None:
    before = _wait({"0.01": 5, "0.1": 5, "1": 5, "+Inf": 5}) + _wait({"0.01": 7, "+Inf": 7}, urgent="false")
    after = _wait({"0.01": 15, "0.1": 55, "1": 95, "+Inf": 105}) + _wait({"0.01": 9, "+Inf": 9}, urgent="false")
    got = quantile_from_histogram(before, after, "w", q, {"urgent": "true"})
    assert got is not None and math.isclose(got, want), got


def test_quantile_from_histogram_of_nothing() -> None:
    same = _wait({"0.01": 3, "+Inf": 3})
    assert quantile_from_histogram(same, same, "w", 0.99) is None
    assert quantile_from_histogram([], [], "w", 0.5) is None
