"""bench/fleet.py's pure summaries: a phase's figures from two scrapes of the controller's metrics."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import fleet
from bench.promtext import Sample, parse


def lag(counts: dict[str, float], passes: float = 0, dispatches: float = 0) -> list[Sample]:
    """A scrape with the loop-lag histogram's cumulative ``counts`` by bound, and two counters."""
    text = [f'jobmirror_event_loop_lag_seconds_bucket{{le="{le}"}} {n}' for le, n in counts.items()]
    text.append(f"jobmirror_event_loop_lag_seconds_count {max(counts.values(), default=0)}")
    text.append(f'jobmirror_runtime_queue_passes_total{{queue="mirror",why="manager-added"}} {passes}')
    text.append(f'jobmirror_dispatches_total{{worker="worker-1"}} {dispatches}')
    return parse("\n".join(text) + "\n")


@pytest.mark.parametrize(("before", "after", "want"), [
    # nothing observed between the scrapes
    ({"0.01": 5, "0.1": 5, "+Inf": 5}, {"0.01": 5, "0.1": 5, "+Inf": 5}, None),
    # every new observation under 10 ms
    ({"0.01": 5, "0.1": 5, "+Inf": 5}, {"0.01": 9, "0.1": 9, "+Inf": 9}, 0.01),
    # one new observation between 10 and 100 ms: the longest was at most 100 ms
    ({"0.01": 5, "0.1": 5, "+Inf": 5}, {"0.01": 8, "0.1": 9, "+Inf": 9}, 0.1),
    # one past the highest bound
    ({"0.01": 0, "0.1": 0, "+Inf": 0}, {"0.01": 1, "0.1": 1, "+Inf": 2}, math.inf),
])
def test_lag_max_bound_is_the_smallest_bound_holding_every_new_observation(
        before: dict[str, float], after: dict[str, float], want: float | None) -> None:
    assert fleet.lag_max_bound(lag(before), lag(after)) == want


def test_phase_summary_rates_are_per_second_of_the_phase() -> None:
    before = lag({"0.01": 10, "0.1": 10, "+Inf": 10}, passes=100, dispatches=40)
    after = lag({"0.01": 110, "0.1": 110, "+Inf": 110}, passes=300, dispatches=140)
    out = fleet.phase_summary("steady", 50.0, 5.0, 321.5, before, after, jobs=100)
    assert out["phase"] == "steady" and out["jobs"] == 100
    assert out["cpuPercent"] == 10.0  # 5 CPU-seconds over 50 s
    assert out["passes"] == 200 and out["passesPerSecond"] == 4.0
    assert out["dispatches"] == 100 and out["dispatchesPerSecond"] == 2.0
    assert out["loopLagMaxAtMostSeconds"] == 0.01
    assert out["loopLagP99Seconds"] is not None and out["loopLagP99Seconds"] <= 0.01
    assert out["rssMiB"] == 321.5


def test_phase_summary_of_a_process_that_restarted_counts_its_new_counters_whole() -> None:
    """The failover phase's second process starts its counters at zero: nothing goes negative."""
    out = fleet.phase_summary("failover", 10.0, 2.0, None, lag({"+Inf": 50}, passes=900), lag({"+Inf": 3}, passes=7))
    assert out["passes"] == 7


def test_workers_up_and_rooms_listed_need_every_worker() -> None:
    m = parse('jobmirror_worker_up{worker="worker-1"} 1\njobmirror_worker_up{worker="worker-2"} 0\n'
              'jobmirror_worker_allocatable{worker="worker-1",resource="cpu"} 64\n')
    assert fleet.workers_up(m, ["worker-1"]) and not fleet.workers_up(m, ["worker-1", "worker-2"])
    assert fleet.rooms_listed(m, ["worker-1"]) and not fleet.rooms_listed(m, ["worker-1", "worker-2"])
    assert fleet.worker_names(3) == ["worker-1", "worker-2", "worker-3"]


def test_markdown_table_names_the_simulation_and_a_failure() -> None:
    result = {"options": {"workers": 2, "pods_per_worker": 200, "nodes_per_worker": 3, "running": 20, "rate": 1.0,
                          "window": 10.0},
              "git": {"commit": "0123456789abcdef"},
              "phases": [fleet.phase_summary("start", 4.0, 1.0, 80.0, [], [])],
              "error": "fill: not after 60s"}
    md = fleet.markdown_table(result)
    assert md.startswith("Simulation: 2 workers x 200 pods on 3 nodes each, 20 running Jobs")
    assert "(0123456)" in md and "| start | 4.0 | 25.0 | 80.0 |" in md
    assert md.endswith("FAILED: fill: not after 60s")


def test_phase_summary_names_what_queued_the_passes() -> None:
    before = parse('jobmirror_runtime_queue_passes_total{queue="mirror",why="after"} 10\n'
                   'jobmirror_runtime_queue_passes_total{queue="mirror",why="manager-added"} 5\n')
    after = parse('jobmirror_runtime_queue_passes_total{queue="mirror",why="after"} 610\n'
                  'jobmirror_runtime_queue_passes_total{queue="mirror",why="manager-added"} 5\n')
    assert fleet.phase_summary("steady", 60.0, 1.0, None, before, after)["passesByTrigger"] == {"after": 600}


def test_the_stall_reports_are_read_from_the_controllers_json_log(tmp_path: Path) -> None:
    log = tmp_path / "start.log"
    log.write_text("\n".join([
        '{"ts": "t1", "level": "info", "logger": "mirror.controller", "msg": "caches synced"}',
        '{"ts": "t2", "level": "warning", "logger": "kruntime.stalls", "msg": "event loop stalled 0.1s (…)"}',
        'not json "kruntime.stalls"',
    ]))
    assert fleet.stall_reports(log) == [{"log": "start.log", "ts": "t2", "msg": "event loop stalled 0.1s (…)"}]
    assert fleet.stall_reports(tmp_path / "missing.log") == []


def test_the_controller_is_told_to_report_shorter_stalls_only_when_asked(tmp_path: Path) -> None:
    from bench.mirror_bench import controller_argv
    plain = controller_argv(tmp_path / "c.yaml", None)
    asked = controller_argv(tmp_path / "c.yaml", None, report_stalls_over=0.05)
    assert "--report-stalls-over" not in plain
    at = asked.index("--report-stalls-over")
    assert asked[at + 1] == "0.05" and asked.index("run") > at  # a flag of the program, before its verb


@pytest.mark.parametrize("bad", ["0", "-1", "inf", "soon"])
def test_a_bad_stall_threshold_is_refused_before_any_controller_starts(
        bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli import parser
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(["fleet", "--report-stalls-over", bad])
    assert exit_.value.code == 2 and "--report-stalls-over" in capsys.readouterr().err
    assert parser().parse_args(["fleet", "--report-stalls-over", "0.05"]).report_stalls_over == 0.05
