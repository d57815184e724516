"""Table tests for mirror/config.py: the example file, path resolution, env overrides, errors."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mirror.config import Config, ConfigError, MissingNamespace, PlacementPolicy, load_config
from mirror.naming import DEFAULT_CONTROLLER_NAME

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "jobmirror.yaml"
MINIMAL = "workers:\n  - {name: worker-1, kubeconfig: /k/w1}\n"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No JOBMIRROR_* variable of the calling shell may leak into these tests."""
    for k in list(os.environ):
        if k.upper().startswith("JOBMIRROR_"):
            monkeypatch.delenv(k)


def write(tmp_path: Path, text: str, name: str = "jobmirror.yaml") -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


# -- the example file ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("get", "expected"),
    [
        (lambda c: [w.name for w in c.workers], ["worker-1", "worker-2"]),
        (lambda c: [w.kubeconfig for w in c.workers],
         [Path("/etc/jobmirror/workers/worker-1.kubeconfig"), Path("/etc/jobmirror/workers/worker-2.kubeconfig")]),
        (lambda c: [w.labels for w in c.workers], [{"zone": "a"}, {"zone": "b"}]),
        (lambda c: c.manager_kubeconfig, Path("/etc/jobmirror/manager/kubeconfig")),
        (lambda c: c.controller_name, DEFAULT_CONTROLLER_NAME),
        (lambda c: c.origin, None),  # the legacy origin is for upgraded installs only
        (lambda c: c.namespaces, []),
        (lambda c: c.placement, PlacementPolicy.ROOM_AWARE),
        (lambda c: c.resync_period, 30.0),
        (lambda c: c.worker_lost_timeout, 900.0),
        (lambda c: c.gc_interval, 60.0),
        (lambda c: c.keep_finished_remote, False),
        (lambda c: c.missing_namespace, MissingNamespace.CREATE),
        (lambda c: (c.qps, c.burst), (200.0, 400)),
        (lambda c: c.request_timeout, 10.0),
        (lambda c: c.metrics_address, ":8080"),
        (lambda c: (c.leader_election.enabled, c.leader_election.namespace, c.leader_election.lease_name),
         (False, "jobmirror-system", "jobmirror-controller")),
        (lambda c: c.worker("worker-2").labels if c.worker("worker-2") else None, {"zone": "b"}),
        (lambda c: c.worker("worker-9"), None),
    ],
    ids=["worker-names", "worker-kubeconfigs", "worker-labels", "manager-kubeconfig", "controller-name", "origin",
         "namespaces", "placement", "resync", "worker-lost-timeout", "gc-interval", "keep-finished",
         "missing-namespace", "qps-burst", "request-timeout", "metrics-address", "leader-election",
         "worker-lookup", "worker-lookup-missing"],
)
def test_example_config_loads(get: Callable[[Config], Any], expected: Any) -> None:
    assert get(load_config(EXAMPLE)) == expected


# -- relative paths -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("kc/w1.yaml", "conf/kc/w1.yaml"),
        ("./w1.yaml", "conf/w1.yaml"),
        ("../shared/w1.yaml", "shared/w1.yaml"),
        ("/abs/w1.yaml", None),
    ],
    ids=["subdir", "dot", "parent", "absolute-unchanged"],
)
def test_relative_kubeconfigs_resolve_against_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       written: str, expected: str | None) -> None:
    cfg_file = write(tmp_path, f"managerKubeconfig: {written}\nworkers:\n  - {{name: w1, kubeconfig: {written}}}\n",
                     name="conf/jobmirror.yaml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not the process' working directory
    cfg = load_config(os.path.relpath(cfg_file, elsewhere))
    want = Path(written) if expected is None else (tmp_path / expected).resolve()
    assert cfg.workers[0].kubeconfig.resolve() == want.resolve()
    assert cfg.workers[0].kubeconfig.is_absolute()
    assert cfg.manager_kubeconfig is not None and cfg.manager_kubeconfig.resolve() == want.resolve()


def test_no_manager_kubeconfig_means_in_cluster(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, MINIMAL)).manager_kubeconfig is None


# -- environment overrides ----------------------------------------------------------------

FILE_WITH_VALUES = """\
workers:
  - {name: worker-1, kubeconfig: /k/w1}
resyncPeriod: 30
workerLostTimeout: 900
placement: LeastLoaded
leaderElection:
  enabled: false
  leaseName: from-file
  namespace: file-ns
"""


@pytest.mark.parametrize(
    ("env", "get", "expected"),
    [
        ({"JOBMIRROR_WORKER_LOST_TIMEOUT": "42"}, lambda c: c.worker_lost_timeout, 42.0),
        ({"JOBMIRROR_RESYNC_PERIOD": "2.5"}, lambda c: c.resync_period, 2.5),
        ({"JOBMIRROR_PLACEMENT": "RoundRobin"}, lambda c: c.placement, PlacementPolicy.ROUND_ROBIN),
        ({"JOBMIRROR_ORIGIN": "mgr-b"}, lambda c: c.origin, "mgr-b"),
        ({"JOBMIRROR_LEADER_ELECTION__ENABLED": "true"}, lambda c: c.leader_election.enabled, True),
        # A nested override replaces one key; the file's siblings survive.
        ({"JOBMIRROR_LEADER_ELECTION__ENABLED": "true"},
         lambda c: (c.leader_election.lease_name, c.leader_election.namespace), ("from-file", "file-ns")),
        ({"JOBMIRROR_LEADER_ELECTION__LEASE_NAME": "from-env"},
         lambda c: (c.leader_election.lease_name, c.leader_election.enabled), ("from-env", False)),
        ({"JOBMIRROR_WORKER_LOST_TIMEOUT": "42", "JOBMIRROR_LEADER_ELECTION__ENABLED": "true"},
         lambda c: (c.worker_lost_timeout, c.leader_election.enabled, c.resync_period), (42.0, True, 30.0)),
        ({}, lambda c: (c.worker_lost_timeout, c.leader_election.enabled), (900.0, False)),
    ],
    ids=["worker-lost-timeout", "resync-period", "placement", "origin", "nested-enabled", "nested-keeps-siblings",
         "nested-lease-name", "several", "no-env-file-wins"],
)
def test_env_beats_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                        get: Callable[[Config], Any], expected: Any) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert get(load_config(write(tmp_path, FILE_WITH_VALUES))) == expected


def test_env_overrides_the_example_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMIRROR_WORKER_LOST_TIMEOUT", "600")
    monkeypatch.setenv("JOBMIRROR_LEADER_ELECTION__ENABLED", "true")
    cfg = load_config(EXAMPLE)
    assert cfg.worker_lost_timeout == 600.0
    assert cfg.leader_election.enabled is True
    assert cfg.leader_election.lease_name == "jobmirror-controller"


def test_bad_env_value_is_a_config_error_naming_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMIRROR_RESYNC_PERIOD", "-1")
    p = write(tmp_path, FILE_WITH_VALUES)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    # Blamed on the variable that set it, not on the file.
    assert str(err.value) == ("environment variable JOBMIRROR_RESYNC_PERIOD: resyncPeriod: must be greater than 0, "
                              "got '-1'")


# -- bad inputs ---------------------------------------------------------------------------

W = "workers:\n  - {name: worker-1, kubeconfig: /k/w1}\n"


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("origin: jobmirror\n", ["workers", "required but missing"]),
        ("workers: []\n", ["workers", "at least one worker"]),
        ("workers:\n  - {name: w, kubeconfig: /a}\n  - {name: w, kubeconfig: /b}\n",
         ["workers", "duplicate worker names: w"]),
        ("workers:\n  - {name: Worker_1, kubeconfig: /a}\n", ["workers[0].name", "Worker_1", "DNS label"]),
        ("workers:\n  - {name: ok, kubeconfig: /a}\n  - {name: " + "x" * 64 + ", kubeconfig: /b}\n",
         ["workers[1].name", "DNS label"]),
        ("workers:\n  - {name: w}\n", ["workers[0].kubeconfig", "required but missing"]),
        ("workers:\n  - {name: w, kubeconfig: /a, colour: red}\n", ["workers[0].colour", "unknown key"]),
        (W + "resyncPeriod: -5\n", ["resyncPeriod", "greater than 0"]),
        (W + "resyncPeriod: 0\n", ["resyncPeriod", "greater than 0"]),
        (W + "workerLostTimeout: soon\n", ["workerLostTimeout"]),
        (W + "gcInterval: -1\n", ["gcInterval"]),
        (W + "unschedulableTimeout: 0\n", ["unschedulableTimeout", "greater than 0"]),
        (W + "inspectAddress: localhost\n", ["inspectAddress", "host:port"]),
        (W + "inspectAddress: ':http'\n", ["inspectAddress", "host:port"]),
        (W + "bogusKey: 1\n", ["bogusKey", "unknown key"]),
        (W + "placement: Random\n", ["placement", "LeastLoaded", "RoundRobin"]),
        (W + "missingNamespace: Ignore\n", ["missingNamespace", "Create", "Report"]),
        (W + "controllerName: kubernetes.io/job-controller\n", ["controllerName", "reserved"]),
        (W + "controllerName: nodomain\n", ["controllerName", "domain-prefixed"]),
        (W + "origin: 'not a label!'\n", ["origin", "label value"]),
        (W + "leaderElection: {leaseDuration: 5, renewDeadline: 10}\n",
         ["leaderElection", "leaseDuration must be greater than renewDeadline"]),
        (W + "leaderElection: {leaseDuration: 15, renewDeadline: 10, retryPeriod: 9}\n",
         ["leaderElection", "renewDeadline must be greater than 1.2 x retryPeriod"]),
        (W + "leaderElection: {retryPeriod: 0}\n", ["leaderElection.retryPeriod"]),
        (W + "leaderElection: {enabled: true, leaseDuration: 15, renewDeadline: 10}\n",
         ["leaderElection", "leaseDuration (15s) - renewDeadline (10s) must be at least requestTimeout (10s)",
          "raise leaseDuration to 20"]),
        (W + "requestTimeout: 30\nleaderElection: {enabled: true}\n",
         ["leaderElection", "requestTimeout (30s)", "raise leaseDuration to 40"]),
        (W + "leaderElection: {enabled: true, leaseSeconds: 3}\n", ["leaderElection.leaseSeconds", "unknown key"]),
        ("workers: [\n  - {name: a\n", ["not valid YAML", "line 2"]),
        ("workers:\n\t- name: a\n", ["not valid YAML"]),
        ("- worker-1\n- worker-2\n", ["top level must be a mapping", "list"]),
        ("just a string\n", ["top level must be a mapping", "str"]),
        ("", ["workers", "required but missing"]),
    ],
    ids=["missing-workers", "empty-workers", "duplicate-workers", "bad-worker-name", "long-worker-name",
         "worker-without-kubeconfig", "unknown-worker-key", "negative-resync", "zero-resync",
         "non-numeric-timeout", "negative-gc", "zero-unschedulable-timeout", "inspect-address-no-port",
         "inspect-address-named-port", "unknown-key", "bad-placement", "bad-missing-namespace",
         "reserved-controller-name", "controller-name-without-domain", "bad-origin", "lease-not-above-renew",
         "renew-not-above-retry", "retry-zero", "lease-shorter-than-writes",
         "lease-shorter-than-long-writes", "unknown-leader-election-key", "not-yaml", "tab-indent",
         "top-level-list", "top-level-scalar", "empty-file"],
)
def test_bad_config_names_file_and_field(tmp_path: Path, text: str, fragments: list[str]) -> None:
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}:"), msg
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"


def test_every_bad_field_is_listed_at_once(tmp_path: Path) -> None:
    p = write(tmp_path, W + "resyncPeriod: -5\nbogusKey: 1\ncontrollerName: kubernetes.io/job-controller\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    for field in ("resyncPeriod", "bogusKey", "controllerName"):
        assert f": {field}:" in str(err.value)
    assert all(line.startswith(f"{p}: ") for line in str(err.value).splitlines())


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_unreadable_file(tmp_path: Path, kind: str) -> None:
    p = tmp_path / "nope.yaml"
    if kind == "directory":
        p.mkdir()
    with pytest.raises(ConfigError) as err:
        load_config(p)
    assert str(err.value).startswith(f"{p}: cannot read")


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)
