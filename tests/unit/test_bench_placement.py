"""The pure figures of ``bench placement``, driven directly: the lower bound, stuck Jobs, pending
pod-seconds, never-fit placements (judged with the controller's own fit), makespan, when a run
is over, and the seeded workload."""

from __future__ import annotations

import pytest

from bench import placement as pl
from mirror.jobs.kind import pods_wanted
from mirror.room.fit import NodeRoom, node_room

GPU = pl.GPU
BIG = pl.NodeShape(1, "16", "64Gi", extended=((GPU, "4"),))
SMALL = pl.NodeShape(2, "4", "16Gi")


def rooms(**shapes: pl.NodeShape) -> dict[str, list[NodeRoom]]:
    return {w.replace("_", "-"): [node_room(pl.node_manifest(n, s)) for n in pl.node_names(w, s)]
            for w, s in shapes.items()}


NODES = rooms(worker_1=BIG, worker_2=SMALL)  # 16 + 8 cpu, 64 + 32 Gi, 4 gpu (worker-1 only)


def job(name: str, kind: str, cpu: str, seconds: float, pods: int = 1, gpu: bool = False) -> pl.PlannedJob:
    req = (("cpu", cpu), ("memory", "1Gi")) + (((GPU, "1"),) if gpu else ())
    return pl.PlannedJob(name, kind, pods, req, seconds)


@pytest.mark.parametrize(("jobs", "seconds", "binding", "cpu"), [
    # 100 one-cpu pods of 2 s: 200 cpu-s over 24 cpu
    ([job(f"s{i}", "small", "1", 2.0) for i in range(100)], 8.33, "total cpu", 8.33),
    # a 12-cpu pod fits only worker-1 (16 cpu): 60 cpu-s there, but its own 10 s pod is longer
    ([job("a", "small", "1", 10.0), job("b", "large", "12", 5.0)], 10.0, "longest pod", 2.92),
    # ten 12-cpu pods of 5 s: 600 cpu-s on worker-1 alone = 37.5 s, not 600 / 24 = 25 s
    ([job(f"l{i}", "large", "12", 5.0) for i in range(10)], 37.5, "worker-1 only, cpu", 25.0),
    # gpu: 8 one-gpu pods of 6 s on 4 gpus = 12 s; parallelism counts every pod
    ([job("g", "gpu", "1", 6.0, pods=8, gpu=True)], 12.0, f"total {GPU}", 2.0),
])
def test_lower_bound_is_the_largest_of_its_parts(jobs: list[pl.PlannedJob], seconds: float, binding: str,
                                                 cpu: float) -> None:
    lb = pl.lower_bound(jobs, NODES)
    assert lb["seconds"] == seconds and lb["binding"] == binding and lb["cpu"] == cpu
    assert lb["jobsNoWorkerCouldRun"] == 0


def test_lower_bound_leaves_out_jobs_no_worker_could_run() -> None:
    lb = pl.lower_bound([job("huge", "large", "64", 100.0), job("a", "small", "1", 3.0)], NODES)
    assert lb["jobsNoWorkerCouldRun"] == 1 and lb["seconds"] == 3.0


@pytest.mark.parametrize(("created", "first_start", "stuck"), [
    (100.0, 100.0, False), (100.0, 160.0, False), (100.0, 161.0, True), (100.0, None, True), (None, 5.0, True),
])
def test_stuck_means_no_pod_running_60s_after_creation(created: float | None, first_start: float | None,
                                                       stuck: bool) -> None:
    assert pl.stuck(created, first_start) is stuck


@pytest.mark.parametrize(("pods", "end", "seconds"), [
    ([], 50.0, 0.0),
    ([pl.PodTimes("a", "w", created=10, scheduled=12)], 50.0, 2.0),
    ([pl.PodTimes("a", "w", created=10)], 50.0, 40.0),  # never scheduled: until the end of the run
    ([pl.PodTimes("a", "w", created=10, deleted=20)], 50.0, 10.0),  # ... or until it went
    ([pl.PodTimes("a", "w", created=10, scheduled=9)], 50.0, 0.0),  # 1-s stamps: never negative
    ([pl.PodTimes("a", "w"), pl.PodTimes("b", "w", created=1, scheduled=4),
      pl.PodTimes("c", "w", created=2)], 7.0, 8.0),
])
def test_pending_seconds(pods: list[pl.PodTimes], end: float, seconds: float) -> None:
    assert pl.pending_seconds(pods, end) == seconds


def _shapes(*jobs: pl.PlannedJob) -> dict[str, tuple[dict[str, object], int]]:
    out = {}
    for j in jobs:
        m = pl.manifest(j, "r")
        out[j.name] = (m["spec"]["template"], pods_wanted(m["spec"]))
    return out


@pytest.mark.parametrize(("placements", "never"), [
    ({"small": "worker-2", "large": "worker-1", "gpu": "worker-1"}, []),
    ({"small": "worker-2", "large": "worker-2", "gpu": "worker-2"}, ["gpu", "large"]),
    ({"small": "worker-1", "large": None, "gpu": "worker-9"}, []),  # not placed / unknown worker: not judged
    ({"medium": "worker-2"}, []),  # 3 cpu fits a 4-cpu node
])
def test_never_fit_judges_final_placement_with_the_controllers_fit(placements: dict[str, str | None],
                                                                    never: list[str]) -> None:
    shapes = _shapes(job("small", "small", "1", 1), job("medium", "medium", "3", 1, pods=4),
                     job("large", "large", "12", 1), job("gpu", "gpu", "2", 1, gpu=True))
    assert pl.never_fit(placements, shapes, NODES) == never


@pytest.mark.parametrize(("created", "complete", "span"), [
    ([10.0, 11.0], [20.0, 31.5], 21.5),
    ([10.0, None], [20.0, 25.0], 15.0),
    ([10.0, 11.0], [20.0, None], None),  # one not Complete: no makespan
    ([], [], None),
])
def test_makespan(created: list[float | None], complete: list[float | None], span: float | None) -> None:
    assert pl.makespan(created, complete) == span


@pytest.mark.parametrize(("unfinished", "never", "policy", "over"), [
    (["a", "b"], ["a", "b", "c"], "LeastLoaded", True),
    (["a", "b"], ["a"], "LeastLoaded", False),
    ([], [], "LeastLoaded", False),  # finished is not "over for good"
    (["a"], ["a"], "RoomAware", False),  # RoomAware moves stuck copies: wait
])
def test_run_is_over_only_when_nothing_left_can_change(unfinished: list[str], never: list[str], policy: str,
                                                       over: bool) -> None:
    assert pl.run_is_over(unfinished, never, policy) is over


def test_bytes_per_pod() -> None:
    assert pl.bytes_per_pod(2048, 1024, 1024) == 1024.0
    assert pl.bytes_per_pod(None, 1024, 10) is None and pl.bytes_per_pod(1, 1, 0) is None


@pytest.mark.parametrize(("n", "counts"), [
    (300, {"small": 180, "medium": 75, "large": 30, "gpu": 15}),
    (24, {"small": 15, "medium": 6, "large": 2, "gpu": 1}),
    (4, {"small": 1, "medium": 1, "large": 1, "gpu": 1}),
])
def test_every_kind_is_in_the_mix(n: int, counts: dict[str, int]) -> None:
    assert pl.kind_counts(n) == counts
    with pytest.raises(ValueError):
        pl.kind_counts(3)


def test_plan_is_seeded_and_fits_the_bed_as_designed() -> None:
    a, b = pl.plan(300, 21), pl.plan(300, 21)
    assert a == b and a != pl.plan(300, 22)
    assert [j.name for j in a] == [f"job-{i:05d}" for i in range(300)]
    nodes = {w: [node_room(pl.node_manifest(n, s)) for n in pl.node_names(w, s)] for w, s in pl.WORKER_SHAPES.items()}
    for j in a:
        want = ["worker-1"] if j.kind in ("large", "gpu") else ["worker-1", "worker-2"]
        assert pl.could_run_on(j, nodes) == want, j
    lb = pl.lower_bound(a, nodes)
    assert 60 <= lb["seconds"] <= 150, lb  # "~1-2 min at 300 Jobs"
    assert pl.default_timeout(lb["seconds"]) == round(3 * lb["seconds"] + 120)


def test_figures_from_what_a_run_saw() -> None:
    jobs = [job("a", "small", "1", 1), job("b", "large", "12", 1)]
    seen = pl.Seen(jobs={"a": pl.JobSeen(created=100, placement="worker-2", complete=105),
                         "b": pl.JobSeen(created=100, placement="worker-2")},
                   pods={"p1": pl.PodTimes("a", "worker-2", created=101, scheduled=101, started=102),
                         "p2": pl.PodTimes("b", "worker-2", created=101)})
    f = pl.figures(jobs, seen, ["b"], t0=99.5, end=200)
    assert f["completed"] == 1 and f["makespanSeconds"] is None and f["lastCompleteSeconds"] == 5.0
    assert f["stuckOver60s"] == 1 and f["neverFit"] == 1 and f["pendingPodSeconds"] == 99.0
    assert f["placementByKind"] == {"small": {"worker-2": 1}, "large": {"worker-2": 1}}
    assert [r["timeToStart"] for r in f["perJob"]] == [2.0, None]
