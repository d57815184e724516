"""The phases of a copy on its worker and the causes named past their deadlines (issue 36)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kruntime.resources import Obj
from mirror.progress import (
    Phase,
    ProgressConfig,
    controller_acted,
    no_controller,
    nothing_ran,
    progress,
    stalled_reason,
    stuck_message,
    worth_a_look,
)

NOW = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
CFG = ProgressConfig.model_validate({})  # podsCreatedTimeout 120, containerStartTimeout 300
UNSCHED = 300.0


def ts(ago: float) -> str:
    return (NOW - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def copy(age: float = 500, status: Obj | None = None, **spec: Any) -> Obj:
    return {"metadata": {"name": "j", "namespace": "ns", "uid": "c1", "creationTimestamp": ts(age)},
            "spec": dict(spec), **({"status": status} if status is not None else {})}


def pod(name: str = "j-abcde", *, age: float = 400, node: str | None = None, bound_ago: float | None = None,
        phase: str = "Pending", statuses: list[Obj] | None = None, conditions: list[Obj] | None = None,
        **spec: Any) -> Obj:
    conds = list(conditions or [])
    if node and bound_ago is not None:
        conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(bound_ago)})
    return {"metadata": {"name": name, "namespace": "ns", "creationTimestamp": ts(age)},
            "spec": {**({"nodeName": node} if node else {}), **spec},
            "status": {"phase": phase, "conditions": conds,
                       **({"containerStatuses": statuses} if statuses is not None else {})}}


def waiting(reason: str, message: str = "", name: str = "main") -> Obj:
    return {"name": name, "ready": False, "restartCount": 0, "started": False,
            "state": {"waiting": {"reason": reason, **({"message": message} if message else {})}}}


def event(reason: str, message: str, kind: str = "Job", name: str = "j") -> Obj:
    return {"type": "Warning", "reason": reason, "message": message,
            "involvedObject": {"kind": kind, "namespace": "ns", "name": name}}


UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/2 nodes are available: 2 Insufficient cpu."}
QUOTA = ('pods "j-abcde" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=0, limited: pods=0')


@pytest.mark.parametrize(
    ("c", "pods", "events", "phase", "stuck"),
    [
        # created: no pod yet
        (copy(age=60), [], [], Phase.CREATED, None),
        (copy(age=121), [], [], Phase.CREATED, "no pod and no status from this worker's Job controller"),
        (copy(age=121, status={"startTime": ts(120)}), [], [], Phase.CREATED,
         "no pod from this worker's Job controller"),
        (copy(status={"startTime": ts(400)}), [], [event("FailedCreate", QUOTA)], Phase.CREATED,
         f"FailedCreate: {QUOTA}"),
        (copy(), [], [event("FailedCreate", "old"), event("FailedCreate", 'pods "j-x" is forbidden: maximum cpu '
                                                                           "usage per Container is 1, but limit is 2")],
         Phase.CREATED, 'FailedCreate: pods "j-x" is forbidden: maximum cpu usage per Container is 1, but limit is 2'),
        (copy(), [], [event("FailedCreate", 'Error creating: admission webhook "deny.example.com" denied the '
                                            "request: no")], Phase.CREATED,
         'FailedCreate: Error creating: admission webhook "deny.example.com" denied the request: no'),
        (copy(), [], [event("FailedCreate", 'Error creating: pods "j-1" is forbidden: error looking up service '
                                            'account ns/runner: serviceaccount "runner" not found')], Phase.CREATED,
         'FailedCreate: Error creating: pods "j-1" is forbidden: error looking up service account ns/runner: '
         'serviceaccount "runner" not found'),
        (copy(), [], [event("FailedCreate", 'Error creating: pods "j-1" is forbidden: no PriorityClass with name '
                                            "high was found")], Phase.CREATED,
         'FailedCreate: Error creating: pods "j-1" is forbidden: no PriorityClass with name high was found'),
        # a pod's FailedScheduling is not the controller's FailedCreate
        (copy(), [], [event("FailedScheduling", "x", kind="Pod", name="j-abcde")], Phase.CREATED,
         "no pod and no status from this worker's Job controller"),
        # only failed pods (rejected by a kubelet before any container): back to created
        (copy(), [pod(phase="Failed", node="n1", bound_ago=300)], [], Phase.CREATED,
         "no pod and no status from this worker's Job controller"),
        # pods created, none bound
        (copy(), [pod(age=100, conditions=[UNSCHEDULABLE])], [], Phase.PODS_CREATED, None),
        (copy(), [pod(age=301, conditions=[UNSCHEDULABLE])], [], Phase.PODS_CREATED,
         "pod j-abcde not bound: 0/2 nodes are available: 2 Insufficient cpu."),
        (copy(), [pod(age=301)], [], Phase.PODS_CREATED,
         "pod j-abcde not bound: no node was chosen for it (is a scheduler running?)"),
        (copy(), [pod(age=900, schedulingGates=[{"name": "kueue"}])], [], Phase.PODS_CREATED, None),
        # bound, no container started
        (copy(), [pod(node="n1", bound_ago=200, statuses=[waiting("ErrImagePull", "not found")])], [],
         Phase.PODS_BOUND, None),
        (copy(), [pod(node="n1", bound_ago=301, statuses=[waiting("ImagePullBackOff", 'Back-off pulling image '
                                                                  '"reg.example/app:1"')])], [], Phase.PODS_BOUND,
         'container main of pod j-abcde: ImagePullBackOff: Back-off pulling image "reg.example/app:1"'),
        (copy(), [pod(node="n1", bound_ago=301, statuses=[waiting("ErrImagePull", "manifest unknown")])], [],
         Phase.PODS_BOUND, "container main of pod j-abcde: ErrImagePull: manifest unknown"),
        (copy(), [pod(node="n1", bound_ago=301, statuses=[waiting("InvalidImageName", 'couldn\'t parse "A:b"')])], [],
         Phase.PODS_BOUND, 'container main of pod j-abcde: InvalidImageName: couldn\'t parse "A:b"'),
        (copy(), [pod(node="n1", bound_ago=301, statuses=[waiting("CreateContainerConfigError",
                                                                  'secret "creds" not found')])], [],
         Phase.PODS_BOUND, 'container main of pod j-abcde: CreateContainerConfigError: secret "creds" not found'),
        (copy(), [pod(node="n1", bound_ago=301, statuses=[waiting("CreateContainerError", "no such device")])], [],
         Phase.PODS_BOUND, "container main of pod j-abcde: CreateContainerError: no such device"),
        # a Secret volume missing on this worker: ContainerCreating, the kubelet's FailedMount says why
        (copy(), [pod(node="n1", bound_ago=301, statuses=[waiting("ContainerCreating")])],
         [event("FailedMount", 'MountVolume.SetUp failed for volume "creds" : secret "creds" not found', "Pod",
                "j-abcde")], Phase.PODS_BOUND,
         'pod j-abcde: FailedMount: MountVolume.SetUp failed for volume "creds" : secret "creds" not found'),
        # an image still pulling is progress, however long
        (copy(), [pod(node="n1", bound_ago=900, statuses=[waiting("ContainerCreating")])], [], Phase.PODS_BOUND,
         None),
        # a node whose kubelet never reports
        (copy(), [pod(node="n1", bound_ago=301)], [], Phase.PODS_BOUND,
         "no container status from the kubelet of node n1"),
        # no PodScheduled time: the pod's age stands in
        (copy(), [pod(node="n1", age=301, statuses=[waiting("ErrImagePull", "x")])], [], Phase.PODS_BOUND,
         "container main of pod j-abcde: ErrImagePull: x"),
        # started
        (copy(), [pod(node="n1", bound_ago=900, statuses=[
            {**waiting("CrashLoopBackOff"), "restartCount": 3}])], [], Phase.CONTAINER_STARTED, None),
        (copy(), [pod(node="n1", bound_ago=900, phase="Running", statuses=[
            {"name": "main", "started": True, "state": {"running": {"startedAt": ts(800)}}}])], [], Phase.RUNNING,
         None),
        (copy(status={"succeeded": 1, "active": 0}), [], [], Phase.RUNNING, None),
    ],
    ids=["created-young", "created-no-controller", "created-status-no-pod", "quota", "limitrange-newest",
         "webhook", "serviceaccount", "priorityclass", "pod-event-not-failedcreate", "only-failed-pods",
         "unbound-young", "unschedulable", "unbound-no-scheduler", "gated", "bound-young", "imagepullbackoff",
         "errimagepull", "invalidimagename", "createcontainerconfigerror", "createcontainererror", "failedmount",
         "still-pulling", "silent-kubelet", "no-bind-time", "crashloop-started", "running", "succeeded"],
)
def test_phase_and_cause(c: Obj, pods: list[Obj], events: list[Obj], phase: Phase, stuck: str | None) -> None:
    p = progress(c, pods, events, NOW, CFG, unschedulable_timeout=UNSCHED)
    assert (p.phase, p.stuck) == (phase, stuck)


def test_deadlines_are_the_configured_ones() -> None:
    cfg = ProgressConfig.model_validate({"podsCreatedTimeout": 30, "containerStartTimeout": 60})
    assert progress(copy(age=31), [], [], NOW, cfg, unschedulable_timeout=UNSCHED).deadline == "podsCreatedTimeout"
    p = progress(copy(), [pod(node="n1", bound_ago=61, statuses=[waiting("ErrImagePull")])], [], NOW, cfg,
                 unschedulable_timeout=UNSCHED)
    assert (p.deadline, p.seconds, p.stuck) == ("containerStartTimeout", 60, "container main of pod j-abcde: "
                                                "ErrImagePull")
    p = progress(copy(), [pod(age=11)], [], NOW, cfg, unschedulable_timeout=10)
    assert (p.phase, p.deadline) == (Phase.PODS_CREATED, "unschedulableTimeout")


def test_another_controller_is_named() -> None:
    p = progress(copy(), [], [event("FailedCreate", "x", kind="Job")], NOW, CFG, unschedulable_timeout=UNSCHED,
                 controller="JobSet")
    assert p.stuck == "no pod and no status from this worker's JobSet controller"


def test_stuck_message_names_worker_phase_deadline_and_cause() -> None:
    p = progress(copy(), [], [], NOW, CFG, unschedulable_timeout=UNSCHED)
    assert stuck_message("w2", copy(), p) == ("the copy ns/j on worker w2 is stuck in phase created past "
                                              "podsCreatedTimeout (120s): no pod and no status from this worker's "
                                              "Job controller")


RUNNING = {"name": "main", "state": {"running": {"startedAt": ts(10)}}}


@pytest.mark.parametrize(
    ("c", "pods", "safe"),
    [
        (copy(), [], True),
        (copy(), [pod(node="n1", bound_ago=10, statuses=[waiting("ImagePullBackOff")])], True),
        (copy(), [pod(node="n1", statuses=[waiting("CreateContainerConfigError")])], True),
        (copy(), [pod(conditions=[UNSCHEDULABLE])], True),
        (copy(), [pod(node="n1", phase="Running", statuses=[RUNNING])], False),
        (copy(), [pod(node="n1", statuses=[{"name": "main", "state": {"terminated": {"exitCode": 1}}}])], False),
        (copy(), [pod(node="n1", statuses=[{"name": "main", "lastState": {"terminated": {"exitCode": 1}},
                                            "state": {"waiting": {"reason": "CrashLoopBackOff"}}}])], False),
        (copy(), [pod(node="n1", statuses=[{**waiting("ImagePullBackOff"), "restartCount": 1}])], False),
        (copy(), [pod(node="n1", statuses=[{**waiting("PodInitializing"), "started": True}])], False),
        (copy(), [{**pod(node="n1"), "status": {"phase": "Pending", "initContainerStatuses": [RUNNING]}}], False),
        (copy(), [pod(node="n1", phase="Succeeded")], False),
        (copy(status={"failed": 1}), [], False),
        (copy(status={"succeeded": 1}), [], False),
        (copy(status={"ready": 1, "active": 1}), [], False),
        (copy(status={"uncountedTerminatedPods": {"failed": ["u1"]}}), [], False),
        (copy(status={"active": 1, "startTime": ts(9)}), [pod(node="n1", statuses=[waiting("ErrImagePull")])], True),
    ],
    ids=["no-pod", "imagepullbackoff-bound", "configerror", "unschedulable", "running", "terminated",
         "last-terminated", "restarted", "started-flag", "init-ran", "pod-succeeded", "counted-failed",
         "counted-succeeded", "ready", "uncounted", "active-not-ready"],
)
def test_nothing_ran(c: Obj, pods: list[Obj], safe: bool) -> None:
    assert nothing_ran(c, pods) is safe


@pytest.mark.parametrize(
    ("c", "look"),
    [
        (copy(age=119), False),
        (copy(age=120), True),
        (copy(age=900, suspend=True), False),
        (copy(age=900, status={"succeeded": 1}), False),
        (copy(age=900, status={"ready": 1, "active": 1}), False),
        (copy(age=200, status={"active": 1}), False),
        (copy(age=300, status={"active": 1}), True),
    ],
    ids=["young", "at-deadline", "suspended", "finished", "ready", "active-young", "active-old"],
)
def test_worth_a_look(c: Obj, look: bool) -> None:
    assert worth_a_look(c, NOW, CFG, unschedulable_timeout=UNSCHED) is look


def test_stalled_counts_only_silent_copies() -> None:
    silent = progress(copy(), [], [], NOW, CFG, unschedulable_timeout=UNSCHED)
    refused = progress(copy(), [], [event("FailedCreate", QUOTA)], NOW, CFG, unschedulable_timeout=UNSCHED)
    assert no_controller(silent) and not no_controller(refused)
    assert not no_controller(progress(copy(age=10), [], [], NOW, CFG, unschedulable_timeout=UNSCHED))
    assert stalled_reason("w1", 2, CFG) is None
    assert stalled_reason("w1", 3, CFG) == ("3 copies on worker w1 have had no pod for longer than podsCreatedTimeout "
                                            "(120s) and its Job controller says nothing (no FailedCreate): is it "
                                            "running?")


def test_controller_acted_clears_the_stall() -> None:
    since = NOW - timedelta(seconds=60)
    assert not controller_acted(copy(age=10), set(), since)  # new, but no status yet
    assert controller_acted(copy(age=10, status={"startTime": ts(9)}), set(), since)
    assert not controller_acted(copy(age=900, status={"active": 1}), set(), since)  # ran before the stall
    assert controller_acted(copy(age=900, status={"startTime": ts(5)}), {"c1"}, since)  # a counted one moved on
