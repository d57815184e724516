"""describe's worker-side details need the right to read pods (issue 32 item 9): the review asked, and
what the plugin prints for the inspect API's summary."""

from __future__ import annotations

from datetime import UTC, datetime

from mirror.inspect import plugin
from mirror.inspect.api import describe_access, pod_read_access, withheld

JOB = {"metadata": {"namespace": "ns1", "name": "j", "uid": "u",
                    "annotations": {"jobmirror.dev/cluster": "worker-1"}}, "status": {"active": 1}}
COPY = {"name": "j", "namespace": "ns1", "uid": "c", "status": {"active": 1}}


def test_details_are_reviewed_as_pod_reads_in_the_namespace() -> None:
    attrs = pod_read_access("ns1")
    assert attrs == {"verb": "get", "group": "", "version": "v1", "resource": "pods", "namespace": "ns1"}
    assert describe_access(attrs) == "get pods in namespace ns1"
    assert withheld(attrs) == ("pods, their nodes and the events of the copy and its pods are shown to users who "
                               "may get pods in namespace ns1 on the manager")


def test_a_summary_prints_no_pod_table_and_says_why() -> None:
    summary = {"worker": "worker-1", "copy": COPY, "withheld": withheld(pod_read_access("ns1"))}
    text = plugin.format_describe(JOB, summary, None, [], datetime.now(UTC))
    assert "Copy:        ns1/j on worker-1" in text
    assert "Pods and events of the copy: withheld (pods, their nodes" in text
    assert "NODE" not in text and "Events of the copy and its pods" not in text


def test_full_details_print_the_pods_and_their_nodes() -> None:
    pod = {"name": "j-x", "phase": "Running", "node": "node-7", "restarts": 0, "index": None, "last": None}
    full = {"worker": "worker-1", "copy": COPY, "pods": [pod], "events": []}
    text = plugin.format_describe(JOB, full, None, [], datetime.now(UTC))
    assert "node-7" in text and "withheld" not in text
