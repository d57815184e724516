"""The shared batch/v1 vocabulary, and that both controllers now read Jobs the same way.

Each test here pins a rule on which the mirror's and the builtin controller's former copies
disagreed, checked through both controllers' own entry points.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from builtin_controller import fields, status
from jobapi import conditions as jc
from jobapi import names, times
from jobapi.intervals import Intervals
from mirror import naming
from mirror.jobs.status_translation import desired_manager_status


def cond(ctype: str, st: str = "True") -> dict[str, Any]:
    return {"type": ctype, "status": st, "reason": "", "message": ""}


def test_one_definition_of_finished_in_both_controllers() -> None:
    # Used to be False in the builtin controller (first entry only) and True in the mirror.
    job = {"status": {"conditions": [cond("Complete", "False"), cond("Complete")]}}
    assert fields.is_finished(job) is jc.is_finished(job) is True
    assert fields.is_finished is jc.is_finished
    # A finished manager Job is frozen by the mirror's translator: same definition there.
    frozen = desired_manager_status({"spec": {}, **job}, {"status": {"active": 3}}, datetime.now(UTC))
    assert frozen == job["status"]
    assert not jc.is_finished({"status": {"conditions": [cond("SuccessCriteriaMet"), cond("Failed", "False")]}})
    assert not jc.is_finished({"status": {"conditions": ["junk", 7]}}) and not jc.is_finished(None)


def test_first_entry_and_any_entry_lookups_have_different_names() -> None:
    conds = [cond("Suspended", "False"), cond("Suspended")]
    assert not jc.found_true(conds, "Suspended")  # the first entry, as upstream's lookup
    assert jc.is_true(conds, "Suspended")  # any entry, as the status validation
    assert jc.first_true(conds, "Suspended") is conds[1]
    assert not fields.condition_true({"status": {"conditions": conds}}, "Suspended")


def test_parse_time_keeps_fractions_and_the_seconds_variant_truncates() -> None:
    # Used to be kept by the builtin controller and silently truncated by the mirror.
    frac = times.parse_time("2026-11-23T10:00:00.25Z")
    assert frac == datetime(2026, 11, 23, 10, 0, 0, 250000, tzinfo=UTC)
    assert fields.parse_time is times.parse_time
    assert times.parse_time_seconds("2026-11-23T10:00:00.25Z") == datetime(2026, 11, 23, 10, tzinfo=UTC)
    # Offsets and naive values normalise to aware UTC in both.
    assert times.parse_time("2026-11-23T12:00:00+02:00") == datetime(2026, 11, 23, 10, tzinfo=UTC)
    assert times.parse_time("2026-11-23T10:00:00") == datetime(2026, 11, 23, 10, tzinfo=UTC)
    assert times.parse_time("junk") is None and times.parse_time(5) is None
    assert times.format_time(frac) == "2026-11-23T10:00:00Z" == fields.format_time(frac)


@pytest.mark.parametrize("text", ["1_0", " 10", "\uff110", "²"])
def test_numbers_read_as_go_atoi_in_every_parser(text: str) -> None:
    # "1_0" used to be index 10 for the builtin controller and dropped by the mirror.
    assert names.atoi(text) is None
    assert not Intervals.parse(text, 100)
    assert not Intervals.parse_lenient(text, 100)
    pod = {"metadata": {"annotations": {names.COMPLETION_INDEX_KEY: text, names.INDEX_FAILURE_COUNT_KEY: text}}}
    assert fields.completion_index(pod) == fields.UNKNOWN_INDEX
    assert fields.index_failure_count(pod) == 0


def test_atoi() -> None:
    assert names.atoi("10") == 10 and names.atoi("+3") == 3 and names.atoi("-2") == -2
    assert names.atoi("") is None and names.atoi("+") is None and names.atoi(None) is None


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("1,3-5,7", "1,3-5,7"),
        ("7,1,3-5", "1,3-5,7"),  # any order
        ("1-4,3-6", "1-6"),  # overlaps merge
        ("x,2,1-0,1-2-3,+5,4", "2,4"),  # invalid pieces dropped, the rest kept
        ("0-2,3", "0-3"),
        ("8-20,30", "8,9"),  # cut at the limit, pieces beyond dropped
    ],
)
def test_lenient_parse(text: str, want: str) -> None:
    assert str(Intervals.parse_lenient(text, 10)) == want


def test_the_two_parsers_differ_on_purpose() -> None:
    # Upstream's reading of its own (ordered) value stops at the first out-of-range piece ...
    assert str(Intervals.parse("1,12,3", 10)) == "1"
    # ... the lenient reading of a foreign value keeps every valid piece.
    assert str(Intervals.parse_lenient("1,12,3", 10)) == "1,3"


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        ("", "", ""),
        ("0-9", "", "0-9"),
        ("0-9", "3", "0-2,4-9"),
        ("0-9", "0-9", ""),
        ("0-9", "2-3,5,8-12", "0,1,4,6,7"),
        ("1,5-7,20", "0-5,7", "6,20"),
        ("3", "1,5", "3"),
    ],
)
def test_difference(a: str, b: str, want: str) -> None:
    got = Intervals.parse_lenient(a) - Intervals.parse_lenient(b)
    assert str(got) == want
    assert set(got.indexes()) == set(Intervals.parse_lenient(a).indexes()) - set(Intervals.parse_lenient(b).indexes())


def test_ten_million_completions_never_expand_into_a_set() -> None:
    n = 10_000_000
    manager = {"spec": {"completionMode": "Indexed", "completions": n, "parallelism": 10, "backoffLimitPerIndex": 1},
               "status": {"completedIndexes": f"0-{n // 2}", "failedIndexes": f"{n // 2 - 5}-{n // 2 + 9}"}}
    remote = {"spec": {}, "status": {"completedIndexes": f"0-{n - 11}", "failedIndexes": f"{n - 3}-{n + 5}"}}
    started = time.monotonic()
    out = desired_manager_status(manager, remote, datetime.now(UTC))
    assert time.monotonic() - started < 1.0  # a set of 10^7 ints takes seconds and ~500 MB
    assert out["completedIndexes"] == f"0-{n - 11}"
    assert out["failedIndexes"] == f"{n - 3}-{n - 1}"
    assert Intervals.parse(out["completedIndexes"], n).total() == n - 10


def test_both_condition_setting_rules() -> None:
    conds: list[dict[str, Any]] = [jc.new_condition("Suspended", "True", "A", "m", "T0")]
    # Upstream controller rule (builtin): a reason change restamps the transition time.
    assert jc.set_restamping(conds, "Suspended", "True", "B", "m", "T1")
    assert conds[0]["lastTransitionTime"] == "T1"
    # API conventions rule (mirror): only a status change moves it.
    assert jc.set_keeping_transition(conds, "Suspended", "True", "C", "m", "T2")
    assert conds[0]["lastTransitionTime"] == "T1" and conds[0]["lastProbeTime"] == "T2"
    assert jc.set_keeping_transition(conds, "Suspended", "False", "C", "m", "T3")
    assert conds[0]["lastTransitionTime"] == "T3"
    # Neither creates a False condition from nothing.
    assert not jc.set_restamping(conds, "Complete", "False", "", "", "T4")
    assert not jc.set_keeping_transition(conds, "Complete", "False", "", "", "T4")
    now = datetime(2026, 11, 23, 10, tzinfo=UTC)
    assert status.new_condition("Failed", "True", "r", "m", now) == jc.new_condition(
        "Failed", "True", "r", "m", "2026-11-23T10:00:00Z")


def test_controller_names_are_one_set() -> None:
    assert fields.JOB_CONTROLLER_NAME == naming.BUILTIN_CONTROLLER_NAME == names.BUILTIN_JOB_CONTROLLER
    assert naming.DEFAULT_CONTROLLER_NAME == names.JOBMIRROR_CONTROLLER
    assert naming.CONTROLLER_UID_LABELS is names.CONTROLLER_UID_LABELS


@pytest.mark.parametrize(("phase", "deleting", "ended"), [
    ("Pending", False, False), ("Running", False, False), ("Running", True, False), ("Unknown", False, False),
    (None, False, False), ("Succeeded", False, True), ("Failed", True, True)])
def test_a_pod_ends_with_its_phase_not_its_deletion(phase: str | None, deleting: bool, ended: bool) -> None:
    from jobapi.objects import not_ended
    pod = {"metadata": {"name": "p", **({"deletionTimestamp": "t"} if deleting else {})},
           "status": {"phase": phase} if phase else {}}
    assert not_ended([pod]) == ([] if ended else ["p"])
