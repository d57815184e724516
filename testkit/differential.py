"""The comparison of the builtin-controller differential tiers: upstream's snapshot vs ours.

Shared by the local differential suite (``tests/conformance``, the harness drives pod phases)
and the kind one (``e2e/test_kind_differential.py``, real kubelets and containers): both
normalise each side into a timing-free snapshot and fail on any path that differs.
"""

from __future__ import annotations

import json


def diff(upstream: object, ours: object, path: str = "") -> list[str]:
    """Every differing leaf as ``<path>: upstream=… ours=…``; dicts are walked key by key (a key
    one side lacks reads ``<missing>``), anything else is compared whole."""
    if isinstance(upstream, dict) and isinstance(ours, dict):
        out: list[str] = []
        for k in sorted(set(upstream) | set(ours), key=str):
            out += diff(upstream.get(k, "<missing>"), ours.get(k, "<missing>"), f"{path}.{k}")
        return out
    if upstream == ours:
        return []
    return [f"{path}: upstream={json.dumps(upstream, default=str)} ours={json.dumps(ours, default=str)}"]
