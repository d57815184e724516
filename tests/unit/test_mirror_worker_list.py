"""Worker-list changes (issue 11 item 2): renames adopt the running copy, removals wait, duplicates are errors."""

from __future__ import annotations

import pytest

from mirror.config import cluster_conflicts
from mirror.decisions import adoption_target, lost_for
from mirror.naming import default_origin

CONFIGURED = ("w-a", "w-b")


@pytest.mark.parametrize(("placed", "live", "want"), [
    ("w-a", ["w-b"], None),  # placed on a configured worker: the off-placement copy is stale
    (None, ["w-b", "w-a"], "w-a"),  # annotation removed: adopt (deterministically)
    ("old-name", ["w-b"], "w-b"),  # renamed entry: the copy keeps running under the new name
    ("old-name", [], None),  # removed worker, no copy anywhere we see: keep the placement (lost worker path)
    (None, [], None),
])
def test_adoption_target(placed: str | None, live: list[str], want: str | None) -> None:
    assert adoption_target(placed, CONFIGURED, live) == want


@pytest.mark.parametrize(("unhealthy_for", "configured_for", "want"), [
    (30.0, 5.0, 30.0),  # a configured worker: its own unhealthy time
    (None, 5.0, 5.0),  # not configured: since this process loaded the config, never infinite
    (0.0, 1000.0, 0.0),
])
def test_lost_for(unhealthy_for: float | None, configured_for: float, want: float) -> None:
    assert lost_for(unhealthy_for, configured_for=configured_for) == want


@pytest.mark.parametrize(("workers", "origin", "needles"), [
    ({"a": "u1", "b": "u2"}, None, []),
    ({"a": "m", "b": "u2"}, None, []),  # the manager as one worker: role sharing, fine
    ({"a": "u1", "b": "u1"}, None, ["'a' and 'b'", "same cluster"]),
    ({"a": "m", "b": "m"}, None, ["'a' and 'b'", "manager cluster itself"]),
    ({"a": "u1", "b": None, "c": None}, None, []),  # unreadable identities are not conflicts
    ({"a": "u1"}, default_origin("u1"), ["origin", "'a'"]),  # another manager's default origin
    ({"a": "m"}, default_origin("m"), []),  # our own default origin, spelled out
    ({"a": "u1"}, "custom", []),
])
def test_cluster_conflicts(workers: dict[str, str | None], origin: str | None, needles: list[str]) -> None:
    problems = cluster_conflicts("m", workers, origin=origin)
    assert bool(problems) == bool(needles), problems
    for needle in needles:
        assert any(needle in p for p in problems), (needle, problems)
