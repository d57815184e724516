"""The pure parts of operating a mirrored Job: mirroring worker events, placement reasons, the
inspect API's request handling and the plugin's formatting (issue 15)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kruntime.names import InvalidName
from kruntime.resources import Obj
from mirror.inspect import plugin, reads
from mirror.inspect.api import (
    TOKEN_HEADER,
    StreamGate,
    access_review,
    describe_access,
    is_the_authorised_job,
    job_access,
    log_request,
    pod_log_access,
    target_of,
    token_from,
)
from mirror.jobs.pods import job_name_candidates
from mirror.placement import WorkerView, explain
from mirror.worker_events import (
    event_time,
    is_news,
    mirrored_message,
    unschedulable_since,
)

NOW = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)


def ts(delta: float) -> str:
    return (NOW + timedelta(seconds=delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def ev(*, count: int = 1, last: float = -1, etype: str = "Warning", **extra: Any) -> Obj:
    return {"type": etype, "count": count, "lastTimestamp": ts(last), "reason": "BackOff",
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "job-abcde"}, "message": "m", **extra}


# -- worker events --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"series": {"lastObservedTime": "2026-11-23T12:00:05.000000Z"}, "eventTime": "2026-11-23T11:00:00.000000Z"},
         datetime(2026, 11, 23, 12, 0, 5, tzinfo=UTC)),
        ({"lastTimestamp": ts(-3), "firstTimestamp": ts(-60)}, NOW - timedelta(seconds=3)),
        ({"lastTimestamp": None, "eventTime": "2026-11-23T11:59:00.000000Z"}, NOW - timedelta(seconds=60)),
        ({"metadata": {"creationTimestamp": ts(-9)}}, NOW - timedelta(seconds=9)),
        ({}, None),
    ],
    ids=["series", "core-last", "events-api-eventTime", "creation-only", "none"],
)
def test_event_time_reads_either_events_api(event: Obj, expected: datetime | None) -> None:
    assert event_time(event) == expected


@pytest.mark.parametrize(
    ("etype", "old", "new", "news"),
    [
        ("ADDED", None, ev(), True),
        ("MODIFIED", ev(count=1), ev(count=2), True),
        ("MODIFIED", ev(count=2), ev(count=2), False),  # a metadata-only update: nothing new happened
        ("ADDED", None, ev(last=-3600), False),  # history from a relist after a restart
        ("ADDED", None, ev(etype="Normal"), False),
        ("DELETED", None, ev(), False),
        ("MODIFIED", ev(series={"count": 3}), ev(series={"count": 4}), True),
    ],
    ids=["new", "count-grew", "same-count", "old", "normal", "deleted", "series-grew"],
)
def test_is_news(etype: str, old: Obj | None, new: Obj, news: bool) -> None:
    assert is_news(etype, old, new, NOW) is news


@pytest.mark.parametrize(
    ("pod", "candidates"),
    [
        ("train-x7k2p", [("train", False)]),
        ("train-3-x7k2p", [("train-3", False), ("train", True)]),
        ("a-b-c-12345", [("a-b-c", False)]),
        ("nosuffix", []),
        ("train-X7K2P", []),  # generated suffixes are lowercase
    ],
    ids=["nonindexed", "indexed-or-dashed", "digits-suffix", "no-suffix", "not-generated"],
)
def test_job_name_candidates(pod: str, candidates: list[tuple[str, bool]]) -> None:
    assert job_name_candidates(pod) == candidates


def test_mirrored_message_names_worker_and_object() -> None:
    e = ev(message="Back-off restarting failed container main")
    assert mirrored_message("worker-2", e) == ("on worker worker-2, Pod ns/job-abcde: Back-off restarting failed "
                                               "container main")


def _pod(node: str = "", cond: Obj | None = None) -> Obj:
    return {"metadata": {"name": "p", "namespace": "ns", "creationTimestamp": ts(-100)},
            "spec": {"nodeName": node} if node else {}, "status": {"conditions": [cond] if cond else []}}


UNSCHED = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": ts(-40)}


@pytest.mark.parametrize(
    ("pod", "since"),
    [
        (_pod(cond=UNSCHED), NOW - timedelta(seconds=40)),
        (_pod(cond={**UNSCHED, "lastTransitionTime": None}), NOW - timedelta(seconds=100)),
        (_pod(node="n1", cond=UNSCHED), None),
        (_pod(cond={**UNSCHED, "reason": "SchedulingGated"}), None),  # gated on purpose, not failing
        (_pod(), None),
    ],
    ids=["unschedulable", "no-transition-time", "bound", "gated", "no-condition"],
)
def test_unschedulable_since(pod: Obj, since: datetime | None) -> None:
    assert unschedulable_since(pod) == since


# -- placement reason -----------------------------------------------------------------------------


def test_placement_reason_lists_each_workers_load_or_the_pin() -> None:
    views = [WorkerView("w2", True, 3, {}), WorkerView("w1", True, 1, {}), WorkerView("w3", False, 0, {})]
    assert explain("LeastLoaded", views, "w1", None) == \
        "LeastLoaded: chose w1; unfinished copies per worker then: w1=1, w2=3, w3=excluded"
    assert explain("LeastLoaded", views, "w2", "w2") == "pinned: annotation jobmirror.dev/pin-cluster=w2"


# -- inspect ------------------------------------------------------------------------------------


def _jpod(name: str, created: str, index: str | None = None, **status: Any) -> Obj:
    ann = {"batch.kubernetes.io/job-completion-index": index} if index is not None else {}
    return {"metadata": {"name": name, "creationTimestamp": created, "annotations": ann}, "spec": {"nodeName": "n"},
            "status": status}


def test_pick_pod_newest_or_by_index() -> None:
    pods = [_jpod("a", ts(-10), "0"), _jpod("b", ts(-5), "1"), _jpod("c", ts(-1), "0")]
    assert reads.pick_pod(pods, None)["metadata"]["name"] == "c"  # type: ignore[index]
    assert reads.pick_pod(pods, 1)["metadata"]["name"] == "b"  # type: ignore[index]
    assert reads.pick_pod(pods, 7) is None
    assert reads.pick_pod([], None) is None


def test_pod_summary_last_termination_and_restarts() -> None:
    pod = _jpod("p", ts(0), phase="Running", containerStatuses=[
        {"name": "main", "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"reason": "Error", "exitCode": 3}}},
        {"name": "side", "restartCount": 1, "state": {"running": {}}}])
    s = reads.pod_summary(pod)
    assert (s["phase"], s["node"], s["restarts"]) == ("Running", "n", 3)
    assert s["last"] == {"container": "main", "reason": "Error", "exitCode": 3}
    waiting = _jpod("q", ts(0), phase="Pending", containerStatuses=[
        {"name": "main", "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}])
    assert reads.pod_summary(waiting)["last"] == {"container": "main", "reason": "ImagePullBackOff",
                                                    "exitCode": None}


# -- inspect API request handling -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "token"),
    [
        ({TOKEN_HEADER: "t1", "Authorization": "Bearer t2"}, "t1"),  # ours first: the proxy strips the other
        ({"Authorization": "Bearer t2"}, "t2"),
        ({"Authorization": "bearer  t3 "}, "t3"),
        ({"Authorization": "Basic dXNlcg=="}, None),
        ({}, None),
    ],
    ids=["own-header", "bearer", "case-and-space", "basic", "none"],
)
def test_token_from(headers: dict[str, str], token: str | None) -> None:
    assert token_from(headers) == token


def test_access_review_asks_get_on_that_job_for_that_user() -> None:
    user = {"username": "alice", "uid": "u1", "groups": ["g1", "system:authenticated"], "extra": {"k": ["v"]}}
    body = access_review(user, job_access("ns1", "job1"))
    assert body["spec"] == {"user": "alice", "uid": "u1", "groups": ["g1", "system:authenticated"],
                            "extra": {"k": ["v"]},
                            "resourceAttributes": {"verb": "get", "group": "batch", "version": "v1",
                                                   "resource": "jobs", "namespace": "ns1", "name": "job1"}}


def test_logs_are_reviewed_as_pod_log_reads_in_the_namespace() -> None:
    attrs = pod_log_access("ns1")
    assert attrs == {"verb": "get", "group": "", "version": "v1", "resource": "pods", "subresource": "log",
                     "namespace": "ns1"}
    assert describe_access(attrs) == "get pods/log in namespace ns1"
    assert describe_access(job_access("ns1", "j")) == "get jobs.batch ns1/j"


@pytest.mark.parametrize(("namespace", "name", "bad"), [
    ("ns1", "job1", None),
    ("ns1", "job.with.dots", None),
    ("ns1", "../../other/jobs/x", "job name"),
    ("ns1", "..", "job name"),
    ("ns1", "a%2Fb", "job name"),
    ("..", "job1", "namespace"),
    ("ns.1", "job1", "namespace"),
    ("NS", "job1", "namespace"),
    ("", "job1", "namespace"),
])
def test_request_targets_are_validated_before_any_review(namespace: str, name: str, bad: str | None) -> None:
    if bad is None:
        assert target_of({"namespace": namespace, "name": name}) == (namespace, name)
    else:
        with pytest.raises(InvalidName, match=bad):
            target_of({"namespace": namespace, "name": name})


def test_only_the_authorised_job_is_shown() -> None:
    job = {"metadata": {"namespace": "ns1", "name": "j"}}
    assert is_the_authorised_job(job, "ns1", "j")
    assert not is_the_authorised_job(job, "ns2", "j")
    assert not is_the_authorised_job({"metadata": {"namespace": "ns1", "name": "k"}}, "ns1", "j")


def test_stream_gate_caps_per_user_and_in_total() -> None:
    gate = StreamGate.of(total=3, per_user=2)
    assert gate.enter("alice") is None and gate.enter("alice") is None
    assert "per-user limit" in (gate.enter("alice") or "")
    assert gate.enter("bob") is None
    assert "3 log streams open" in (gate.enter("carol") or "")
    gate.leave("alice")
    assert gate.enter("carol") is None
    gate.leave("alice"), gate.leave("bob"), gate.leave("carol")
    assert not gate.open


def test_log_request_parsing() -> None:
    r = log_request({"container": "c", "index": "2", "follow": "true", "previous": "1", "tailLines": "10"})
    assert r == reads.LogRequest(container="c", index=2, follow=True, previous=True, tail_lines=10)
    assert log_request({}) == reads.LogRequest()
    with pytest.raises(ValueError, match="index='x' is not an integer"):
        log_request({"index": "x"})


# -- plugin formatting ----------------------------------------------------------------------------


def test_status_filters() -> None:
    rows = [{"worker": "w1", "state": "Running"}, {"worker": "w2", "state": "Complete"}, {"worker": "-",
                                                                                        "state": "Pending"}]
    assert plugin.select_rows(rows, "w1", None) == rows[:1]
    assert plugin.select_rows(rows, None, "complete") == rows[1:2]
    assert plugin.select_rows(rows, "w1", "Complete") == []
    assert plugin.select_rows(rows, None, None) == rows


def test_side_by_side_shows_both_statuses_and_conditions() -> None:
    m = {"status": {"active": 1, "conditions": [{"type": "Suspended", "status": "False", "reason": "Resumed"}]}}
    c = {"status": {"active": 0, "failed": 1, "conditions": [{"type": "Failed", "status": "True",
                                                              "reason": "BackoffLimitExceeded"}]}}
    lines = plugin.side_by_side(m, c)
    assert lines[1].split() == ["active", "1", "0"]
    assert lines[2].split() == ["failed", "-", "1"]
    assert [ln.split()[:2] for ln in lines[3:]] == [["condition", "Failed"], ["condition", "Suspended"]]
    assert "True BackoffLimitExceeded" in lines[3]
    assert plugin.side_by_side(m, None)[1].split() == ["active", "1", "(no", "copy)"]


def test_last_events_ordered_by_time_whatever_the_precision() -> None:
    evs = [{"type": "Warning", "reason": "B", "eventTime": "2026-11-23T12:00:00.500000Z"},
           {"type": "Normal", "reason": "A", "lastTimestamp": "2026-11-23T12:00:00Z"},
           {"type": "Normal", "reason": "C", "lastTimestamp": "2026-11-23T12:00:01Z"}]
    assert [e["reason"] for e in reads.last_events(evs)] == ["A", "B", "C"]
    assert [e["reason"] for e in reads.last_events(evs, 2)] == ["B", "C"]


def test_unschedulable_message_has_no_changing_duration() -> None:
    from mirror.worker_events import unschedulable_message

    pod = _pod(cond={**UNSCHED, "message": "0/2 nodes are available: 2 Insufficient cpu."})
    msg = unschedulable_message("w1", pod, NOW - timedelta(seconds=40), 30)
    assert msg == ("the copy's pod ns/p on worker w1 has been unschedulable since 2026-11-23T11:59:20Z, longer than "
                   "unschedulableTimeout (30s): 0/2 nodes are available: 2 Insufficient cpu.")
