import pytest

from mirror.tenancy import created_namespace_labels, may_use, worker_namespace

BASELINE = {"pod-security.kubernetes.io/enforce": "baseline"}


@pytest.mark.parametrize(("ns", "allowed", "ok"), [
    ("team-a", [], True),
    ("team-a", ["team-a"], True),
    ("team-a", ["team-*"], True),
    ("team-a", ["team-b", "other-*"], False),
    ("kube-system", ["team-*"], False),
    ("team-a", ["TEAM-*"], False),  # names are lower case; patterns match exactly
])
def test_worker_namespace_allow_list(ns: str, allowed: list[str], ok: bool) -> None:
    assert may_use(ns, allowed) is ok


@pytest.mark.parametrize(("manager_labels", "extra", "defaults", "expected"), [
    # Pod Security labels always travel, every mode and version.
    ({"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "v1.30",
      "pod-security.kubernetes.io/audit": "restricted", "other": "x"}, [], BASELINE,
     {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "v1.30",
      "pod-security.kubernetes.io/audit": "restricted"}),
    # None on the manager: the defaults, so never an unlabelled (privileged) namespace.
    ({}, [], BASELINE, BASELINE),
    (None, [], BASELINE, BASELINE),
    # The manager may say privileged on purpose: that is what the tenant has there.
    ({"pod-security.kubernetes.io/enforce": "privileged"}, [], BASELINE,
     {"pod-security.kubernetes.io/enforce": "privileged"}),
    # Only warn on the manager: the default enforce stays.
    ({"pod-security.kubernetes.io/warn": "restricted"}, [], BASELINE,
     {**BASELINE, "pod-security.kubernetes.io/warn": "restricted"}),
    # Extra keys by name or pattern.
    ({"team": "a", "cost.example.com/center": "42", "other": "x"}, ["team", "cost.example.com/*"], {},
     {"team": "a", "cost.example.com/center": "42"}),
    ({}, [], {}, {}),
])
def test_created_namespaces_take_the_managers_posture(manager_labels: dict[str, str] | None, extra: list[str],
                                                      defaults: dict[str, str], expected: dict[str, str]) -> None:
    ns = {"metadata": {"name": "team-a", "labels": manager_labels}}
    assert created_namespace_labels(ns, extra=extra, defaults=defaults) == expected


def test_the_namespace_body() -> None:
    ns = {"metadata": {"name": "team-a", "uid": "u", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    assert worker_namespace("team-a", ns, extra=[], defaults=BASELINE) == {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team-a", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
