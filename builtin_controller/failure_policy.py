"""``spec.podFailurePolicy``: which failures fail the Job, fail an index, or do not count.

Rules are tried in order and the first match decides. A rule matches either a terminated
container's non-zero exit code (regular containers first, then init containers) or a pod
condition (type and status). The verdict carries three things the controller needs
separately: the FailJob message (for the ``FailureTarget`` condition), whether the failure
counts against ``backoffLimit`` / ``backoffLimitPerIndex``, and the action (for metrics).
"""

from __future__ import annotations

from dataclasses import dataclass

from builtin_controller import fields
from kruntime.resources import Obj


@dataclass(frozen=True)
class FailurePolicyVerdict:
    fail_job_message: str | None = None
    count_failed: bool = True
    action: str | None = None


NO_MATCH = FailurePolicyVerdict()


def _exit_code_matches(code: int, req: Obj) -> bool:
    values = req.get("values") or []
    op = req.get("operator")
    if op == "In":
        return code in values
    if op == "NotIn":
        return code not in values
    return False


def _matching_container(statuses: list[Obj], req: Obj) -> Obj | None:
    want = req.get("containerName")
    for cs in statuses:
        term = (cs.get("state") or {}).get("terminated")
        if term is None:
            continue  # still running or terminating: no exit code yet
        if want is not None and want != cs.get("name"):
            continue
        code = int(term.get("exitCode") or 0)
        if code != 0 and _exit_code_matches(code, req):
            return cs
    return None


def match_on_exit_codes(pod: Obj, req: Obj) -> Obj | None:
    st = pod.get("status") or {}
    return _matching_container(st.get("containerStatuses") or [], req) or _matching_container(
        st.get("initContainerStatuses") or [], req
    )


def match_on_pod_conditions(pod: Obj, patterns: list[Obj]) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        for pat in patterns:
            if cond.get("type") == pat.get("type") and cond.get("status") == pat.get("status"):
                c: Obj = cond
                return c
    return None


def _verdict(action: str | None, fail_msg: str) -> FailurePolicyVerdict | None:
    if action == fields.ACTION_IGNORE:
        return FailurePolicyVerdict(None, False, fields.ACTION_IGNORE)
    if action == fields.ACTION_FAIL_INDEX:
        return FailurePolicyVerdict(None, True, fields.ACTION_FAIL_INDEX)
    if action == fields.ACTION_COUNT:
        return FailurePolicyVerdict(None, True, fields.ACTION_COUNT)
    if action == fields.ACTION_FAIL_JOB:
        return FailurePolicyVerdict(fail_msg, True, fields.ACTION_FAIL_JOB)
    return None  # an action this controller does not know: try the next rule


def match(policy: Obj | None, pod: Obj) -> FailurePolicyVerdict:
    """Match a failed pod against the policy's rules (first match wins)."""
    if policy is None:
        return NO_MATCH
    ns, pname = fields.namespace(pod), fields.name(pod)
    for i, rule in enumerate(policy.get("rules") or []):
        action = rule.get("action")
        if rule.get("onExitCodes") is not None:
            cs = match_on_exit_codes(pod, rule["onExitCodes"])
            if cs is None:
                continue
            code = cs["state"]["terminated"].get("exitCode")
            msg = (f"Container {cs.get('name')} for pod {ns}/{pname} failed with exit code {code} "
                   f"matching {action} rule at index {i}")
        elif rule.get("onPodConditions") is not None:
            cond = match_on_pod_conditions(pod, rule["onPodConditions"])
            if cond is None:
                continue
            msg = f"Pod {ns}/{pname} has condition {cond.get('type')} matching {action} rule at index {i}"
        else:
            continue
        v = _verdict(action, msg)
        if v is not None:
            return v
    return NO_MATCH


def is_pod_failed(pod: Obj, job: Obj) -> bool:
    """Failed phase, or — unless replacements wait for ``Failed`` — deleted before succeeding.

    Counting deleted pods as failures accounts for pods that are removed (by a user, the
    pod GC, eviction) without ever reaching a terminal phase.
    """
    if fields.phase(pod) == fields.FAILED_PHASE:
        return True
    if fields.only_replace_failed_pods(job):
        return False
    return fields.deletion_timestamp(pod) is not None and fields.phase(pod) != fields.SUCCEEDED


def fail_job_message(job: Obj, pods: list[Obj]) -> str | None:
    """The first FailJob match among the Job's failed pods, if any."""
    policy = fields.pod_failure_policy(job)
    if policy is None:
        return None
    for p in pods:
        if is_pod_failed(p, job):
            v = match(policy, p)
            if v.fail_job_message is not None:
                return v.fail_job_message
    return None


def counts_as_failure(job: Obj, pod: Obj) -> bool:
    return match(fields.pod_failure_policy(job), pod).count_failed
