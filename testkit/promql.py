"""Metric names used by PromQL expressions, and metric names a /metrics page exports.

Enough PromQL for our dashboard and alerts, not a parser: strings, label matchers, range
and subquery brackets, Grafana variables and the label lists of ``by``/``without``/
``on``/``ignoring``/``group_left``/``group_right`` are removed; what remains that is an
identifier, not followed by ``(`` and not a keyword, is a metric name.
"""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

_KEYWORDS = frozenset({
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
    "inf", "nan", "atan2",
    # aggregation operators may be written `sum by (x) (...)`: not directly followed by "("
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile", "limitk", "limit_ratio",
})
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GRAFANA_VARS = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_OFFSETS = re.compile(r"\boffset\s+-?[0-9a-z]+")
_IDENT = re.compile(r"(?<![\w.:])[a-zA-Z_:][a-zA-Z0-9_:]*")
_CALL = re.compile(r"\s*\(")


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects (``rate(x_total[5m])`` → ``{"x_total"}``)."""
    text = _STRINGS.sub(" ", expr)
    text = _GRAFANA_VARS.sub(" ", text)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _LABEL_LISTS.sub(" ", text)
    text = _OFFSETS.sub(" ", text)
    return {m.group() for m in _IDENT.finditer(text)
            if m.group().lower() not in _KEYWORDS and not _CALL.match(text, m.end())}


#: Sample names each metric type puts on a /metrics page (prometheus_client's text format).
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("_sum", "_count", "_created", ""),
    "gauge": ("",),
    "info": ("_info",),
    "stateset": ("",),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "unknown": ("",),
}


def exported_names(metrics_text: str) -> dict[str, str]:
    """Every sample name a /metrics page declares or carries → its metric type, including the
    series a labelled metric will have once it is first incremented (declared by ``# TYPE``)."""
    names: dict[str, str] = {}
    for family in text_string_to_metric_families(metrics_text):
        for suffix in _SUFFIXES.get(family.type, ("",)):
            names[family.name + suffix] = family.type
        for sample in family.samples:
            names[sample.name] = family.type
    return names
