"""Table tests for mirror/naming.py's derived remote name (role sharing: the manager is also a worker)."""

from __future__ import annotations

import re

import pytest

from mirror.naming import derived_remote_name

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NAMES = [
    "train",
    "a",
    "x" * 51,
    "x" * 52,
    "n" * 63,
    "job-" + "0123456789" * 6,  # 64+ characters
    "a" * 50 + "-" + "b" * 12,  # truncation lands just after a dash
    "a" * 49 + "--" + "b" * 12,  # ... after a run of dashes
    "nightly-etl-28934712",  # a CronJob child
]
IDS = ["short", "one-char", "51", "52", "63", "long", "cut-at-dash", "cut-at-dashes", "cronjob-child"]


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_derived_name_is_a_valid_bounded_label(name: str) -> None:
    d = derived_remote_name(name, "jobmirror")
    assert len(d) <= 63
    assert DNS1123_LABEL.match(d), d
    assert d != name  # it cannot share the Job's name in the same cluster


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_derived_name_is_deterministic(name: str) -> None:
    assert derived_remote_name(name, "jobmirror") == derived_remote_name(name, "jobmirror")


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_derived_name_differs_by_origin(name: str) -> None:
    assert derived_remote_name(name, "mgr-a") != derived_remote_name(name, "mgr-b")


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_derived_name_keeps_a_recognisable_prefix(name: str) -> None:
    d = derived_remote_name(name, "jobmirror")
    head = d.rsplit("-jm-", 1)[0]
    assert head and name.startswith(head)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("x" * 60 + "-one", "x" * 60 + "-two"),
        ("train", "train2"),
    ],
    ids=["long-names-sharing-a-prefix", "short-names"],
)
def test_different_names_get_different_derived_names(a: str, b: str) -> None:
    assert derived_remote_name(a, "jobmirror") != derived_remote_name(b, "jobmirror")


def test_known_value_is_stable_across_releases() -> None:
    """A changed derivation would orphan every role-shared copy on upgrade."""
    assert derived_remote_name("train", "jobmirror") == "train-jm-2606a815"
