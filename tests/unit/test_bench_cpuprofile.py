"""Sorting a CPU profile into the parts every contender has (bench/cpuprofile.py)."""

from __future__ import annotations

from bench.cpuprofile import OTHER, PARTS, sort_samples

ROOT = "<module> (mirror/cli.py:1);Runner.run (asyncio/runners.py:118)"
LOOP = f"{ROOT};WorkQueue.run_workers.<locals>.loop (kruntime/workqueue.py:200)"
PASS = f"{LOOP};Reconciler.reconcile (mirror/reconciler.py:99);Reconciler._reconcile (mirror/reconciler.py:120)"
PART = {name.split(" (")[0]: name for name, _ in PARTS}


def test_each_sample_goes_to_the_first_part_one_of_its_frames_belongs_to() -> None:
    lines = [
        f"{ROOT} 50",  # the loop polling, in C: idle
        f"{ROOT};Thread.run (threading.py:1);Condition.wait (threading.py:320) 30",
        f"{PASS};next_action (mirror/plan.py:250) 7",
        f"{PASS};Placer.choose (mirror/placer.py:280);RoomView.fit (mirror/room/view.py:550) 3",
        f"{PASS};ClusterClient.replace (kruntime/client.py:300);ClusterClient._send (kruntime/client.py:240) 6",
        f"{ROOT};RecordInformer._watch_once (kruntime/informer.py:230);ClusterClient.watch (kruntime/client.py:470) 4",
        f"{ROOT};RecordInformer._emit (kruntime/informer.py:170);RoomView._on_pod (mirror/room/view.py:500) 2",
        f"{ROOT};ResponseHandler.data_received (aiohttp/client_proto.py:1) 5",
        f"{LOOP};WorkQueue.get (kruntime/workqueue.py:150) 1",
        f"{ROOT};MetricWrapperBase.labels (prometheus_client/metrics.py:1) 2",
        "not a sample line",
    ]
    p = sort_samples(lines)
    assert (p.samples, p.idle) == (110, 80)
    assert p.parts == {PART["passes' own work"]: 7, PART["room views"]: 5, PART["API calls"]: 6,
                       PART["watch events"]: 4, PART["bytes in"]: 5, PART["work queue"]: 1, OTHER: 2}
    summary = p.summary(top=3)
    assert summary["busySamples"] == 30 and abs(sum(summary["shares"].values()) - 1) < 1e-3
    assert summary["topInclusive"][0] == {"frame": "WorkQueue.run_workers.<locals>.loop (kruntime/workqueue.py)",
                                          "share": round(17 / 30, 4)}  # the frames under the loop only


def test_the_floors_own_code_counts_as_its_passes() -> None:
    p = sort_samples([f"{ROOT};Floor._dispatch (bench/floor.py:140);claim_patch (bench/floor.py:60) 3"])
    assert p.parts == {PART["passes' own work"]: 3}


def test_a_runs_cpu_per_job_is_split_by_its_processes_busy_samples() -> None:
    from bench.cpuprofile import ms_per_job_by_part

    controller = {"cpuSecondsPerJob": 0.01, "cpuProfile": {"processes": {
        "a": {"busySamples": 300, "shares": {"x": 0.5, "y": 0.5}},
        "b": {"busySamples": 100, "shares": {"x": 1.0}},
        "c": {"error": "py-spy wrote nothing"}}}}
    assert ms_per_job_by_part(controller) == {"x": 6.25, "y": 3.75}
    assert ms_per_job_by_part({"cpuSecondsPerJob": 0.01}) is None
