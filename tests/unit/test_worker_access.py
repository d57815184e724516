"""Per-tenant worker access (issue 32 item 9): which namespaces may use which workers, as configured
(mirror/config.py WorkerAccess) and enforced before placement (mirror/access.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mirror.access import Access, WorkerNotAllowed, allowed_workers, describe_rule, refusal
from mirror.config import Config, ConfigError, WorkerAccess, load_config
from mirror.placement import LeastLoaded, NoWorker, WorkerView
from mirror.placer import Placer


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.upper().startswith("JOBMIRROR_"):
            monkeypatch.delenv(k)


def rule(**kw: Any) -> WorkerAccess:
    return WorkerAccess.model_validate(kw)


ACCESS: Access = {
    "open": None,
    "named": rule(namespaces=["team-a"]),
    "pattern": rule(namespaces=["ml-*", "team-[bc]"]),
    "gpu": rule(namespaceSelector={"matchLabels": {"gpu": "yes"}}),
    "prod": rule(namespaceSelector={"matchExpressions": [
        {"key": "env", "operator": "In", "values": ["prod", "staging"]},
        {"key": "frozen", "operator": "DoesNotExist"}]}),
    "either": rule(namespaces=["team-z"], namespaceSelector={"matchExpressions": [
        {"key": "tier", "operator": "NotIn", "values": ["free"]}, {"key": "tier", "operator": "Exists"}]}),
    "everyone-labelled": rule(namespaceSelector={}),
}


@pytest.mark.parametrize(
    ("namespace", "labels", "expected"),
    [
        ("team-a", {}, {"open", "named", "everyone-labelled"}),
        ("team-aa", {}, {"open", "everyone-labelled"}),  # a name is not a prefix
        ("ml-vision", {}, {"open", "pattern", "everyone-labelled"}),
        ("team-c", {}, {"open", "pattern", "everyone-labelled"}),
        ("team-d", {}, {"open", "everyone-labelled"}),
        ("x", {"gpu": "yes"}, {"open", "gpu", "everyone-labelled"}),
        ("x", {"gpu": "no"}, {"open", "everyone-labelled"}),
        ("x", {"env": "prod"}, {"open", "prod", "everyone-labelled"}),
        ("x", {"env": "staging", "frozen": ""}, {"open", "everyone-labelled"}),  # DoesNotExist: present, even empty
        ("x", {"env": "dev"}, {"open", "everyone-labelled"}),
        ("x", {"tier": "paid"}, {"open", "either", "everyone-labelled"}),
        ("x", {"tier": "free"}, {"open", "everyone-labelled"}),
        ("team-z", {"tier": "free"}, {"open", "either", "everyone-labelled"}),  # by name, whatever the labels
        # labels not known (namespace cache not synced): only names and patterns admit, never a selector
        ("x", None, {"open"}),
        ("team-z", None, {"open", "either"}),
        ("ml-a", None, {"open", "pattern"}),
    ],
)
def test_allowed_workers(namespace: str, labels: dict[str, str] | None, expected: set[str]) -> None:
    assert allowed_workers(namespace, labels, ACCESS) == expected


def test_no_access_anywhere_keeps_the_default_every_namespace_every_worker() -> None:
    assert allowed_workers("anything", None, {"w1": None, "w2": None}) == {"w1", "w2"}


TWO: Access = {"worker-1": None, "worker-2": rule(namespaces=["team-a"])}
ONLY_A: Access = {"worker-1": rule(namespaces=["team-a"]), "worker-2": rule(namespaces=["team-a"])}
BY_LABEL: Access = {"worker-1": rule(namespaceSelector={"matchLabels": {"gpu": "yes"}})}


@pytest.mark.parametrize(
    ("namespace", "labels", "access", "pin", "selected", "expected"),
    [
        ("team-b", {}, TWO, "worker-2", None,
         "worker access: namespace team-b may not use worker 'worker-2' named by jobmirror.dev/pin-cluster: "
         "workers[worker-2].access admits only namespaces [team-a]"),
        ("team-a", {}, TWO, "worker-2", None, None),
        ("team-b", {}, TWO, "worker-1", None, None),
        ("team-b", {}, TWO, "worker-9", None, None),  # not configured: placement says so
        ("team-b", {}, TWO, None, None, None),  # worker-1 is open
        ("team-b", {}, TWO, None, {"worker-2"},
         "worker access: jobmirror.dev/worker-selector matches only workers namespace team-b may not use: "
         "workers[worker-2].access admits only namespaces [team-a]"),
        ("team-b", {}, TWO, None, {"worker-1", "worker-2"}, None),
        ("team-b", {}, TWO, None, set(), None),  # matches nothing configured: placement says so
        ("team-b", {}, ONLY_A, None, None,
         "worker access: namespace team-b may use no configured worker: workers[worker-1].access admits only "
         "namespaces [team-a]; workers[worker-2].access admits only namespaces [team-a]"),
        ("x", None, BY_LABEL, None, None,
         "worker access: namespace x may use no configured worker: workers[worker-1].access admits only "
         "namespaceSelector {gpu=yes} (the labels of namespace x are not known yet)"),
        ("x", {"gpu": "yes"}, BY_LABEL, None, None, None),
    ],
    ids=["pin-refused", "pin-allowed", "pin-open", "pin-unknown", "unpinned-open-left", "selector-refused",
         "selector-partly-allowed", "selector-matches-none", "no-worker", "labels-unknown", "labels-match"],
)
def test_refusal_names_the_rule(namespace: str, labels: dict[str, str] | None, access: Access, pin: str | None,
                                selected: set[str] | None, expected: str | None) -> None:
    assert refusal(namespace, labels, access, pin=pin, selected=selected) == expected


def test_describe_rule_reads_like_the_config() -> None:
    assert describe_rule(ACCESS["either"]) == ("namespaces [team-z] or namespaceSelector {tier NotIn (free), "
                                               "tier Exists}")
    assert describe_rule(None) == "every namespace"


W = "workers:\n  - name: w\n    kubeconfig: /k\n"


@pytest.mark.parametrize(
    ("access", "fragments"),
    [
        ("{}", ["access", "lists no namespaces and no namespaceSelector", "leave access unset"]),
        ("{namespaces: []}", ["access", "lists no namespaces and no namespaceSelector"]),
        ("{namespaces: [Team_A, ok]}", ["namespaces", "'Team_A'", "not a namespace name"]),
        ("{namespaces: [team/a]}", ["namespaces", "'team/a'"]),
        ("{namespace: [a]}", ["access", "namespace"]),
        ("{namespaceSelector: {matchLabels: {a: b}, matchFields: {}}}",
         ["namespaceSelector", "matchFields"]),
        ("{namespaceSelector: {matchExpressions: [{key: a, operator: In}]}}",
         ["matchExpressions", "operator In needs at least one value"]),
        ("{namespaceSelector: {matchExpressions: [{key: a, operator: Exists, values: [x]}]}}",
         ["matchExpressions", "operator Exists takes no values"]),
        ("{namespaceSelector: {matchExpressions: [{key: a, operator: Equals, values: [x]}]}}",
         ["operator", "DoesNotExist"]),
    ],
    ids=["empty", "empty-list", "bad-name", "slash", "typo-key", "unknown-selector-key", "in-without-values",
         "exists-with-values", "unknown-operator"],
)
def test_bad_access_is_a_config_error_naming_the_field(tmp_path: Path, access: str, fragments: list[str]) -> None:
    p = tmp_path / "c.yaml"
    p.write_text(W + f"    access: {access}\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    for frag in fragments:
        assert frag in str(err.value), f"{frag!r} not in {err.value}"


def test_access_loads(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text(W + "    access:\n      namespaces: [team-a, 'ml-*']\n      namespaceSelector:\n"
                 "        matchLabels: {gpu: 'yes'}\n  - {name: v, kubeconfig: /k2}\n")
    cfg = load_config(p)
    w, v = cfg.workers
    assert w.access is not None and w.access.namespaces == ["team-a", "ml-*"]
    assert w.access.namespace_selector is not None and w.access.namespace_selector.match_labels == {"gpu": "yes"}
    assert v.access is None


# -- the reconciler applies it before the pin, the selector and room -------------------------------

CFG = {"workers": [{"name": "worker-1", "kubeconfig": "/k1", "labels": {"pool": "a"}},
                   {"name": "worker-2", "kubeconfig": "/k2", "labels": {"pool": "b"},
                    "access": {"namespaces": ["team-b"], "namespaceSelector": {"matchLabels": {"gpu": "yes"}}}}]}
VIEWS = [WorkerView("worker-1", True, 0, {"pool": "a"}), WorkerView("worker-2", True, 0, {"pool": "b"})]


def job_in(namespace: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": "j", "uid": "u"}}


@pytest.mark.parametrize(
    ("namespace", "labels", "pin", "selector", "left", "refused"),
    [
        ("team-a", {}, None, None, ["worker-1"], None),
        ("team-b", {}, None, None, ["worker-1", "worker-2"], None),
        ("team-a", {"gpu": "yes"}, None, None, ["worker-1", "worker-2"], None),
        ("team-a", {}, "worker-1", None, ["worker-1"], None),
        ("team-a", {}, "worker-2", None, None, "may not use worker 'worker-2' named by jobmirror.dev/pin-cluster"),
        ("team-a", {}, None, "pool=b", None, "jobmirror.dev/worker-selector matches only workers namespace team-a"),
        ("team-a", {}, None, "pool in (a, b)", ["worker-1"], None),
        ("team-b", {}, None, "pool=b", ["worker-2"], None),
        ("team-a", {}, None, "pool=c", None, "no configured worker has labels matching"),  # placement's own word
    ],
    ids=["open-only", "named", "labelled", "pin-open", "pin-refused", "selector-refused", "selector-narrowed",
         "selector-allowed", "selector-matches-nothing"],
)
def test_the_placer_places_only_within_access(namespace: str, labels: dict[str, str], pin: str | None,
                                                  selector: str | None, left: list[str] | None,
                                                  refused: str | None) -> None:
    r = Placer(Config.model_validate(CFG), {}, LeastLoaded(), namespace_labels=lambda ns: labels if ns == namespace
               else None)
    if refused is None:
        views = r.within_access(job_in(namespace), list(VIEWS), pin, selector)
        assert [v.name for v in views if v.healthy] == left
        return
    with pytest.raises(NoWorker) as exc:
        r.within_access(job_in(namespace), list(VIEWS), pin, selector)
    assert refused in str(exc.value)
    assert isinstance(exc.value, WorkerNotAllowed) == ("worker access" in str(exc.value))
