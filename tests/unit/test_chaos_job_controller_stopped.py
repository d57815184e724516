"""bench.chaos job-controller-stopped: its hold, its progress config and what it fails on beyond the verdict."""

from __future__ import annotations

from bench import chaos
from mirror.progress import ProgressConfig
from testkit.invariants import ChaosVerdict

NAME = "job-controller-stopped"


def test_the_hold_scales_with_the_job_count_within_bounds() -> None:
    assert chaos.kcm_hold(10) == (25.0, 32.5)  # never shorter than 25 s
    assert chaos.kcm_hold(50) == (25.0, 32.5)  # the CI tier
    assert chaos.kcm_hold(200) == (100.0, 130.0)  # the "a few minutes" at 200
    assert chaos.kcm_hold(10_000) == (120.0, 156.0)


def test_the_scenario_runs_before_jobset_mix_with_a_valid_progress_config() -> None:
    names = list(chaos.SCENARIOS)
    assert NAME in names and names.index(NAME) < names.index("jobset-mix")
    assert set(chaos.PROGRESS) | set(chaos.MOVES_OFF) | chaos.NO_DUPLICATES_EVEN_DURING_FAULT <= set(names)
    cfg = ProgressConfig.model_validate(chaos.PROGRESS[NAME])
    assert 5 <= cfg.pods_created_timeout <= 8 and cfg.stalled_copies == 3
    assert cfg.pods_created_timeout < chaos.kcm_hold(50)[0]  # stuck copies are noticed inside the shortest stop


def test_a_duplicate_during_the_fault_or_no_move_fails_it_and_no_other_scenario() -> None:
    clean = ChaosVerdict(jobs=5)
    assert chaos.scenario_checks(NAME, clean, {"worker-1": 3}, []) == []
    dup = ChaosVerdict(jobs=5, duplicates_during_fault=["manager:ns/a: worker-1/ns/a and worker-2/ns/a both active"])
    assert chaos.scenario_checks(NAME, dup, {"worker-1": 3}, [])[0].startswith("1 duplicates during the fault")
    assert chaos.scenario_checks(NAME, clean, {"worker-2": 1}, []) == [
        "no stuck copy was moved off worker-1 (jobmirror_replacements_total: {'worker-2': 1})"]
    assert chaos.scenario_checks(NAME, clean, {"worker-1": 1}, ["still stalled"]) == ["still stalled"]
    assert chaos.scenario_checks("worker-stopped", dup, {}, []) == []  # reported there, not failed
