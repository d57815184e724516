"""The pure parts of ``bench compare`` / ``bench behaviour``: MultiKueue objects and config, contender
order, ratios, the README table and the behaviour catalogue's manifests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import behaviour, compare, multikueue
from bench.workload import job_manifest
from mirror.naming import DEFAULT_CONTROLLER_NAME


@pytest.mark.parametrize(("manager", "has_mk"), [(True, True), (False, False)])
def test_kueue_config_is_local_and_only_the_manager_runs_multikueue(manager: bool, has_mk: bool) -> None:
    cfg = multikueue.kueue_config(multikueue.KueueSettings(), manager=manager, health_port=1234, webhook_port=5678,
                                  cert_dir=Path("/tmp/c"))
    assert cfg["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and cfg["kind"] == "Configuration"
    assert cfg["leaderElection"] == {"leaderElect": False}
    assert cfg["health"]["healthProbeBindAddress"] == "127.0.0.1:1234"
    assert cfg["webhook"] == {"port": 5678, "host": "127.0.0.1", "certDir": "/tmp/c"}
    assert cfg["metrics"] == {"bindAddress": "0"} and cfg["internalCertManagement"] == {"enable": False}
    assert cfg["integrations"]["frameworks"] == ["batch/job"]
    assert cfg["featureGates"] == {"VisibilityOnDemand": False}
    assert ("multiKueue" in cfg) is has_mk


@pytest.mark.parametrize(("settings", "client", "jobs", "workloads"), [
    (multikueue.KueueSettings(), {"qps": 300.0, "burst": 500}, 5, 10),  # v0.19.2's shipped file
    (multikueue.KueueSettings(qps=200, burst=400, job_concurrency=32, workload_concurrency=32),
     {"qps": 200, "burst": 400}, 32, 32),
])
def test_kueue_settings_reach_client_and_reconcilers(settings: multikueue.KueueSettings, client: dict[str, Any],
                                                     jobs: int, workloads: int) -> None:
    cfg = multikueue.kueue_config(settings, manager=True, health_port=1, webhook_port=2, cert_dir=Path("/c"))
    assert cfg["clientConnection"] == client
    gkc = cfg["controller"]["groupKindConcurrency"]
    assert gkc["Job.batch"] == jobs and gkc["Workload.kueue.x-k8s.io"] == workloads


@pytest.mark.parametrize(("settings", "env"), [
    (multikueue.KueueSettings(), {}),  # the released build: no knob, client-go's 5/10
    (multikueue.KueueSettings(worker_limits=(200, 400)),
     {"KUEUE_MULTIKUEUE_WORKER_QPS": "200", "KUEUE_MULTIKUEUE_WORKER_BURST": "400"}),
])
def test_worker_limits_reach_only_the_patched_manager(settings: multikueue.KueueSettings,
                                                      env: dict[str, str]) -> None:
    assert settings.manager_env() == env
    assert ("local patch" in settings.label()) is bool(env)
    assert compare.CONTENDERS["multikueue-patched"].kueue is not None
    assert compare.CONTENDERS["multikueue-patched"].kueue.worker_limits == (compare.MIRROR_QPS, compare.MIRROR_BURST)


def test_manager_objects_point_clusters_at_secrets_and_the_check_at_the_config() -> None:
    objs = multikueue.manager_objects({"w1": "kc1", "w2": "kc2"})
    kinds = [o["kind"] for o in objs]
    assert kinds == ["Secret", "MultiKueueCluster", "Secret", "MultiKueueCluster", "MultiKueueConfig",
                     "AdmissionCheck"]
    secret, cluster = objs[0], objs[1]
    assert secret["metadata"] == {"name": "w1-secret", "namespace": "kueue-system"}
    assert secret["stringData"] == {"kubeconfig": "kc1"}
    assert cluster["spec"]["clusterSource"]["kubeConfig"] == {"locationType": "Secret", "location": "w1-secret"}
    assert objs[4]["spec"]["clusters"] == ["w1", "w2"]
    ac = objs[5]["spec"]
    assert ac["controllerName"] == "kueue.x-k8s.io/multikueue"
    assert ac["parameters"] == {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "multikueue"}


@pytest.mark.parametrize(("check", "strategy"), [(None, None), ("multikueue", {"admissionChecks": [
    {"name": "multikueue"}]})])
def test_queue_objects_same_names_everywhere(check: str | None, strategy: Any) -> None:
    objs = multikueue.queue_objects(["a", "b"], "500", check)
    assert [o["kind"] for o in objs] == ["ResourceFlavor", "ClusterQueue", "LocalQueue", "LocalQueue"]
    cq = objs[1]["spec"]
    assert cq.get("admissionChecksStrategy") == strategy
    assert cq["resourceGroups"][0]["flavors"][0]["resources"][0] == {"name": "cpu", "nominalQuota": "500"}
    assert [o["metadata"]["namespace"] for o in objs[2:]] == ["a", "b"]
    assert {o["spec"]["clusterQueue"] for o in objs[2:]} == {multikueue.CLUSTER_QUEUE}


def test_queued_job_sets_what_kueues_webhook_would_and_leaves_the_input_alone() -> None:
    job = job_manifest("j", "run")
    out = multikueue.queued_job(job)
    assert out["metadata"]["labels"][multikueue.QUEUE_LABEL] == multikueue.LOCAL_QUEUE
    assert out["spec"]["suspend"] is True and out["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert "managedBy" not in job["spec"] and "suspend" not in job["spec"]


@pytest.mark.parametrize(("round_index", "expected"), [(0, ["a", "b", "c"]), (1, ["c", "b", "a"]),
                                                       (2, ["a", "b", "c"])])
def test_order_alternates_between_rounds(round_index: int, expected: list[str]) -> None:
    assert compare.order_for(["a", "b", "c"], round_index) == expected


def test_manifests_differ_only_in_who_claims_them() -> None:
    per = {k: compare.manifests(c, 2, "r", "1s") for k, c in compare.CONTENDERS.items()}
    assert per["bare"][0]["spec"]["managedBy"] == "bench.jobmirror.dev/bare"
    assert per["floor"][0]["spec"]["managedBy"] == "bench.jobmirror.dev/floor"
    assert per["jobmirror"][0]["spec"]["managedBy"] == DEFAULT_CONTROLLER_NAME
    assert per["multikueue"][1]["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    for jobs in per.values():
        assert [j["metadata"]["name"] for j in jobs] == ["job-00000", "job-00001"]
        assert jobs[0]["spec"]["template"] == per["bare"][0]["spec"]["template"]


def _run(rate: float | None, error: bool = False) -> dict[str, Any]:
    if error:
        return {"error": "boom"}
    return {"throughput": {"dispatchedPerSecond": rate}, "timeline": {}}


@pytest.mark.parametrize(("results", "key", "expected"), [
    ({"jobmirror": _run(40), "bare": _run(50)}, "jobmirrorOverBare", 0.8),
    ({"jobmirror": _run(40), "floor": _run(44), "bare": _run(50)}, "jobmirrorOverFloor", 0.91),
    ({"floor": _run(44), "bare": _run(55)}, "floorOverBare", 0.8),
    ({"jobmirror": _run(40), "floor": _run(0, error=True)}, "jobmirrorOverFloor", None),
    ({"jobmirror": _run(40), "multikueue": _run(4)}, "jobmirrorOverMultikueue", 10.0),
    ({"jobmirror": _run(40), "multikueue": _run(None)}, "jobmirrorOverMultikueue", None),
    ({"jobmirror": _run(40), "multikueue": _run(0, error=True)}, "jobmirrorOverMultikueue", None),
    ({"jobmirror-5qps": _run(9), "multikueue": _run(3)}, "jobmirror5qpsOverMultikueue", 3.0),
    ({}, "jobmirrorOverBare", None),
])
def test_ratios_come_from_the_same_run_and_tolerate_missing_sides(results: dict[str, Any], key: str,
                                                                   expected: float | None) -> None:
    assert compare.ratios(results)[key] == expected


def _full(rate: float, timed_out: bool = False) -> dict[str, Any]:
    lat = {"p50": 0.1, "p95": 0.2, "p99": 0.3}
    return {"contender": "x", "jobs": 10, "timedOut": timed_out, "outcomes": {"Complete": 7 if timed_out else 10},
            "timeline": {"submitted": [0.5, 1.0], "dispatched": [1.5, 2.5, 4.5]},
            "throughput": {"allCompleteSeconds": None if timed_out else 3.5,
                           "dispatchedPerSecond": None if timed_out else rate},
            "latencySeconds": {"dispatch": {"watch": lat},
                               "statusPropagation": {"watch": lat,
                                                     "bySubmission": {"afterSubmission": {"p99": 0.25}}}},
            "apiRequests": {"manager": {"perJobExcludingIdle": 2.0}, "workersCombined": {"perJobExcludingIdle": 9.0},
                            "managerOwnCalls": {"total": 3.0}},
            "controller": {"cpuSecondsWorkload": 0.5, "cpuSecondsPerJob": 0.05, "peakRssMiB": 90.0}}


def test_markdown_table_has_a_row_per_contender_and_says_timeouts_and_failures() -> None:
    result = {"contenders": {"bare": {"label": "bare"}, "multikueue": {"label": "MK"}, "jobmirror": {"label": "jm"}},
              "runs": [{"jobs": 10, "results": {"bare": _full(5.0), "multikueue": _full(1.0, timed_out=True),
                                                "jobmirror": {"error": "it broke"}}}]}
    table = compare.markdown_table(result).splitlines()
    assert len(table) == 5  # no ratio could be taken: no ratio table
    assert "| 10 | bare | 3.50 | 5.00 | 0.10/0.20/0.30 | 0.10/0.20/0.30 | 2.00 · 9.00 | 3.00 |" in table[2]
    assert "timed out (7/10 Complete) | 0.75 (partial) | n/a |" in table[3]  # 3 copies from 0.5 s to 4.5 s
    assert "failed: it broke" in table[4]
    assert {line.count("|") for line in table} == {11}


def test_a_results_file_without_the_submission_split_summarises_it_as_unknown() -> None:
    old = _full(5.0)
    del old["latencySeconds"]["statusPropagation"]["bySubmission"]
    assert compare.headline(old)["statusP99AfterSubmission"] is None
    assert compare.headline(_full(5.0))["statusP99AfterSubmission"] == 0.25


def test_markdown_table_ends_with_the_same_run_ratios_that_exist() -> None:
    result = {"contenders": {k: {"label": k} for k in ("bare", "floor", "jobmirror")},
              "runs": [{"jobs": 10, "results": {k: _full(5.0) for k in ("bare", "floor", "jobmirror")},
                        "ratios": {"jobmirrorOverFloor": 0.5, "jobmirrorOverBare": 0.4, "floorOverBare": 0.8,
                                   "jobmirrorOverMultikueue": None}}]}
    table = compare.markdown_table(result).splitlines()
    assert table[-3:] == ["| Jobs | jobmirror ÷ floor | jobmirror ÷ bare | floor ÷ bare |", "|---|---:|---:|---:|",
                          "| 10 | 0.50 | 0.40 | 0.80 |"]


def test_repeats_are_summarised_as_median_and_spread_with_failures_counted_apart() -> None:
    """three runs of a size: each figure's median, min and max over the runs that finished; a timed-out
    run is counted, not averaged in; same-run ratios likewise; the table shows them"""
    def row(rep: int, jm: dict[str, Any], floor_rate: float) -> dict[str, Any]:
        results = {"floor": _full(floor_rate), "jobmirror": jm}
        return {"jobs": 10, "repeat": rep, "results": results, "ratios": compare.ratios(results)}

    runs = [row(1, _full(8.0), 10.0), row(2, _full(9.0), 10.0), row(3, _full(1.0, timed_out=True), 12.0)]
    summary = compare.over_repeats(runs)
    jm = summary["10"]["contenders"]["jobmirror"]
    assert summary["10"]["repeats"] == 3 and jm["failedOrTimedOut"] == 1
    assert jm["dispatchesPerSecond"] == {"median": 8.5, "min": 8.0, "max": 9.0, "runs": 2}
    assert summary["10"]["contenders"]["floor"]["dispatchesPerSecond"] == {"median": 10.0, "min": 10.0,
                                                                           "max": 12.0, "runs": 3}
    # the timed-out run's partial rate (3 copies over 4 s) still makes a same-run ratio, as in the per-run table
    assert summary["10"]["ratios"]["jobmirrorOverFloor"] == {"median": 0.8, "min": 0.06, "max": 0.9, "runs": 3}
    assert summary["10"]["ratios"]["jobmirrorOverBare"]["runs"] == 0
    result = {"contenders": {"floor": {"label": "floor"}, "jobmirror": {"label": "jm"}}, "runs": runs,
              "summary": summary}
    table = compare.markdown_table(result).splitlines()
    assert "| 10 | jm | 2/3 | 8.50 (8.00-9.00) | 50.00 (50.00-50.00) | 0.30 (0.30-0.30) | 0.30 (0.30-0.30) | " \
           "0.25 (0.25-0.25) | 3.00 (3.00-3.00) |" in table
    assert "| 10 | jobmirror ÷ floor | 0.80 (0.06-0.90) |" in table


@pytest.mark.parametrize(("by", "expected"), [
    # the floor: claim, status, release; the benchmark's creates, lists, watches and the bed's own traffic
    # (leases, endpoints, openapi) are nobody's
    ({("POST", "batch", "jobs", ""): 10, ("PATCH", "batch", "jobs", ""): 20, ("PATCH", "batch", "jobs", "status"): 10,
      ("LIST", "batch", "jobs", ""): 3, ("WATCH", "batch", "jobs", ""): 3,
      ("PUT", "coordination.k8s.io", "leases", ""): 7, ("GET", "", "endpoints", ""): 1,
      ("GET", "", "openapi/v3", ""): 2}, {"PATCH jobs": 2.0, "PATCH jobs status": 1.0, "total": 3.0}),
    # jobmirror: status PUTs, events (both APIs) and a read
    ({("POST", "batch", "jobs", ""): 10, ("PATCH", "batch", "jobs", ""): 20, ("PUT", "batch", "jobs", "status"): 21,
      ("POST", "", "events", ""): 10, ("POST", "events.k8s.io", "events", ""): 4, ("GET", "batch", "jobs", ""): 1},
     {"GET jobs": 0.1, "PATCH jobs": 2.0, "POST events": 1.4, "PUT jobs status": 2.1, "total": 5.6}),
    # MultiKueue: its Workloads count, its lists do not
    ({("POST", "kueue.x-k8s.io", "workloads", ""): 10, ("PUT", "kueue.x-k8s.io", "workloads", "status"): 30,
      ("LIST", "kueue.x-k8s.io", "workloads", ""): 2}, {"POST workloads": 1.0, "PUT workloads status": 3.0,
                                                          "total": 4.0}),
    ({("POST", "batch", "jobs", ""): 10}, {"total": 0.0}),
], ids=["floor", "jobmirror", "multikueue", "nothing"])
def test_own_calls_are_the_contenders_alone(by: dict[tuple[str, ...], float], expected: dict[str, float]) -> None:
    assert compare.own_calls(by, 10) == expected


def test_behaviour_manifests_carry_the_case_and_the_system() -> None:
    by = {c.name: c for c in behaviour.CASES}
    assert len(by) >= 10
    bli = behaviour.manifest(by["backoff-limit-per-index"], "jobmirror", "r")
    assert bli["spec"]["backoffLimitPerIndex"] == 0 and "backoffLimit" not in bli["spec"]
    assert bli["spec"]["template"]["metadata"]["labels"][behaviour.OUTCOME_LABEL] == "fail"
    assert bli["spec"]["managedBy"] == DEFAULT_CONTROLLER_NAME
    sus = behaviour.manifest(by["suspended-then-resumed"], "multikueue", "r")
    assert sus["spec"]["suspend"] is True and sus["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    plain = behaviour.manifest(by["plain"], "jobmirror", "r")
    assert "suspend" not in plain["spec"]
    assert [c.name for c in behaviour.CASES if c.skew] == ["plain", "failing-backoff"]


def test_behaviour_records_conditions_in_order_of_first_appearance() -> None:
    rec = behaviour.Record()

    def job(*conds: tuple[str, str, str]) -> dict[str, Any]:
        return {"spec": {}, "status": {"conditions": [{"type": t, "status": s, "reason": r} for t, s, r in conds]}}

    rec.on_manager(job(("Suspended", "True", "JobSuspended")), "MODIFIED")
    rec.on_manager(job(("Suspended", "False", "JobResumed")), "MODIFIED")
    rec.on_manager(job(("Suspended", "False", "JobResumed"), ("SuccessCriteriaMet", "True", "CompletionsReached"),
                       ("Complete", "True", "CompletionsReached")), "MODIFIED")
    assert rec.conditions == ["Suspended=True(JobSuspended)", "Suspended=False(JobResumed)",
                              "SuccessCriteriaMet=True(CompletionsReached)", "Complete=True(CompletionsReached)"]
    assert behaviour.terminal(rec.final)
    summary = behaviour.summarize_status(rec.final)
    assert summary is not None and summary["completionTime"] is None and summary["startTime"] is None


@pytest.mark.parametrize(
    ("contenders", "failed", "title"),
    [
        (["bare", "jobmirror"], set(), "the bare-API limit vs jobmirror"),
        (["bare", "floor", "jobmirror"], set(), "the bare-API limit vs the guarantees floor vs jobmirror"),
        (["jobmirror", "jobmirror-5qps"], set(), "jobmirror"),
        (["jobmirror", "multikueue", "multikueue-equal", "bare"], set(),
         "jobmirror vs MultiKueue v0.19.2 vs the bare-API limit"),
        # asked for, but Kueue never started: not named
        (["jobmirror", "multikueue", "multikueue-equal", "bare"], {"multikueue", "multikueue-equal"},
         "jobmirror vs the bare-API limit"),
        (["multikueue"], {"multikueue"}, "nothing ran"),
    ],
    ids=["no-kueue", "floor", "jobmirror-only", "all", "kueue-failed", "all-failed"],
)
def test_the_compare_plot_names_only_what_ran(contenders: list[str], failed: set[str], title: str) -> None:
    from bench.plot import compare_title

    results = {k: {"error": "no Kueue"} if k in failed else {"jobs": 10} for k in contenders}
    result = {"kueueVersion": "0.19.2", "contenders": {k: {} for k in contenders},
              "runs": [{"jobs": 10, "results": results}, {"jobs": 100, "results": {}}]}
    assert compare_title(result).startswith(title + " — ")


def test_latencies_cannot_go_negative_when_a_watch_stream_lags() -> None:
    """The manager stream delivers a Job's ADDED after its copy's, and a worker stream its Complete after the
    manager's: dispatch is timed from the create sent (causal), status is raised to 0 and counted."""
    from bench.mirror_bench import JobTimes, Tracker, _results
    from bench.workload import Submission

    tr = Tracker()
    tr.jobs = {
        "a": JobTimes(mgr_seen=10.30, remote_seen=10.20, remote_done_seen=12.0, mgr_done_seen=11.9, worker="w"),
        "b": JobTimes(mgr_seen=10.05, remote_seen=10.40, remote_done_seen=12.0, mgr_done_seen=12.25, worker="w"),
    }
    sub = Submission(sent={"a": 10.0, "b": 10.0}, acked={"a": 10.01, "b": 10.01})
    res = _results(2, tr, sub, 10.0, 13.0, 13.5)
    assert res["samples"]["dispatchWatch"] == [200.0, 400.0]
    assert res["samples"]["statusWatch"] == [0.0, 250.0]
    assert res["latencySeconds"]["statusPropagation"]["watchRaisedToZero"] == 1


@pytest.mark.parametrize("key", [k for k, c in compare.CONTENDERS.items() if c.config])
def test_a_contenders_config_is_what_jobmirror_reads(key: str) -> None:
    from mirror.config import Config

    c = compare.CONTENDERS[key]
    # extra="forbid": a misspelt key fails here instead of in a benchmark's controller
    cfg = Config.model_validate({"workers": [{"name": "w1", "kubeconfig": "/k"}], **c.config})
    dumped = cfg.model_dump(by_alias=True, mode="json")
    assert {alias: dumped[alias] for alias in c.config} == dict(c.config)


def test_status_latencies_are_split_by_whether_the_copy_finished_while_jobs_were_still_submitted() -> None:
    from bench.mirror_bench import status_by_submission
    split = status_by_submission([2.0, 3.0, 0.5, None, 0.25], [4.0, 9.0, 12.0, 5.0, None], submitting_until=9.0)
    assert split["whileSubmitting"]["count"] == 2 and split["whileSubmitting"]["max"] == 3.0
    assert split["afterSubmission"]["count"] == 1 and split["afterSubmission"]["max"] == 0.5
