"""kruntime.events.SpamFilter: client-go's per-object, per-type token bucket."""

from __future__ import annotations

from kruntime.events import SpamFilter


def test_burst_then_one_per_refill_period() -> None:
    now = [0.0]
    f = SpamFilter(burst=25, refill_seconds=300.0, clock=lambda: now[0])
    assert all(f.allow("u1", "Normal") for _ in range(25))
    assert not f.allow("u1", "Normal")
    assert f.allow("u1", "Warning") and f.allow("u2", "Normal")  # separate buckets
    now[0] += 299.0
    assert not f.allow("u1", "Normal")
    now[0] += 2.0
    assert f.allow("u1", "Normal") and not f.allow("u1", "Normal")
    f.forget("u1")
    assert f.allow("u1", "Normal")
