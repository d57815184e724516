"""The config loader refuses what it cannot mean: each bad config with its exact message, the env
var named as the source, every documented key accepted under its documented spelling, and the
CLI's one-line errors (issue 33)."""

from __future__ import annotations

import enum
import functools
import os
import socket
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from kruntime import identity as kidentity
from kruntime.client import ApiError
from mirror import cli
from mirror.config import UNLIMITED, Config, ConfigError, load_config
from refdocs import generate as docs

W = "workers:\n  - {name: w1, kubeconfig: /k/w1}\n"
RATE = "is not a rate; write requests per second above 0, or 'unlimited' to turn client throttling off"
ADDRESS = "is not host:port; write e.g. ':8080' or '127.0.0.1:8080', or '' to turn it off"
REQUIRED = "required but missing; add it (see docs/reference/configuration.md)"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages name the file as given: load ``config.yaml`` from its directory; no JOBMIRROR_* leaks in."""
    for k in list(os.environ):
        if k.upper().startswith("JOBMIRROR_"):
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)


def error_of(text: str) -> str:
    Path("config.yaml").write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config("config.yaml")
    return str(err.value)


BAD: dict[str, tuple[str, str]] = {
    "negative-qps": (W + "qps: -200\n", f"config.yaml: qps: -200 {RATE}"),
    "zero-qps": (W + "qps: 0\n", f"config.yaml: qps: 0 {RATE}"),
    "worker-qps": ("workers:\n  - {name: w1, kubeconfig: /k, qps: -5}\n", f"config.yaml: workers[0].qps: -5 {RATE}"),
    "qps-word": (W + "qps: fast\n", f"config.yaml: qps: 'fast' {RATE}"),
    "infinite-qps": (W + "qps: .inf\n", f"config.yaml: qps: inf {RATE}"),
    "nan-qps": (W + "qps: .nan\n", f"config.yaml: qps: nan {RATE}"),
    "negative-burst": (W + "burst: -1\n", "config.yaml: burst: must be at least 1, got -1"),
    "worker-burst": ("workers:\n  - {name: w1, kubeconfig: /k, burst: 0}\n",
                     "config.yaml: workers[0].burst: must be at least 1, got 0"),
    "metrics-address": (W + "metricsAddress: foo\n", f"config.yaml: metricsAddress: 'foo' {ADDRESS}"),
    "inspect-address": (W + "inspectAddress: bar\n", f"config.yaml: inspectAddress: 'bar' {ADDRESS}"),
    "port-too-big": (W + "metricsAddress: ':99999'\n", f"config.yaml: metricsAddress: ':99999' {ADDRESS}"),
    "named-port": (W + "inspectAddress: ':http'\n", f"config.yaml: inspectAddress: ':http' {ADDRESS}"),
    "typo": (W + "workerLostTimout: 60\n",
             "config.yaml: workerLostTimout: unknown key; did you mean 'workerLostTimeout'?"),
    "snake-case": (W + "resync_period: 60\n", "config.yaml: resync_period: unknown key; did you mean 'resyncPeriod'?"),
    "tls-spelling": (W + "inspectTls: {certFile: /c, keyFile: /k}\n",
                     "config.yaml: inspectTls: unknown key; did you mean 'inspectTLS'?"),
    "worker-typo": ("workers:\n  - {name: w1, kubeconfig: /k, labls: {}}\n",
                    "config.yaml: workers[0].labls: unknown key; did you mean 'labels'?"),
    "nested-unknown": (W + "leaderElection: {leaseSeconds: 3}\n",
                       "config.yaml: leaderElection.leaseSeconds: unknown key; the keys are listed in "
                       "docs/reference/configuration.md"),
    "not-yaml": ("workers: [\n  - {name: a\n",
                 "config.yaml: line 2, column 3: not valid YAML: expected the node content, but found '-'"),
    "tab": ("workers:\n\t- name: a\n",
            "config.yaml: line 2, column 1: not valid YAML: found character '\\t' that cannot start any token"),
    "top-level-list": ("- w1\n", "config.yaml: top level must be a mapping of keys, got list"),
    "empty": ("", f"config.yaml: workers: {REQUIRED}"),
    "no-kubeconfig": ("workers:\n  - {name: w1}\n", f"config.yaml: workers[0].kubeconfig: {REQUIRED}"),
    "bad-enum": (W + "placement: Random\n",
                 "config.yaml: placement: must be one of 'RoomAware', 'LeastLoaded' or 'RoundRobin', got 'Random'"),
    "negative-seconds": (W + "resyncPeriod: -5\n", "config.yaml: resyncPeriod: must be greater than 0, got -5"),
    "not-a-number": (W + "workerLostTimeout: soon\n", "config.yaml: workerLostTimeout: must be a number, got 'soon'"),
    "not-a-bool": (W + "workerEvents: maybe\n", "config.yaml: workerEvents: must be true or false, got 'maybe'"),
    "worker-name": ("workers:\n  - {name: Worker_1, kubeconfig: /k}\n",
                    "config.yaml: workers[0].name: 'Worker_1' is not a DNS label (lowercase letters, digits, '-', "
                    "≤ 63 chars)"),
    "origin": (W + "origin: 'not a label!'\n",
               "config.yaml: origin: 'not a label!' is not a valid label value; write at most 63 letters, digits, "
               "'-', '_' or '.', beginning and ending with a letter or digit, or leave origin unset"),
    "lease-timings": (W + "leaderElection: {leaseDuration: 5, renewDeadline: 10}\n",
                      "config.yaml: leaderElection: leaseDuration must be greater than renewDeadline"),
    "every-problem-at-once": (W + "qsp: 1\nburst: 0\n",
                              "config.yaml: qsp: unknown key; did you mean 'qps'?\n"
                              "config.yaml: burst: must be at least 1, got 0"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_config_message(case: str) -> None:
    text, message = BAD[case]
    assert error_of(text) == message


def test_missing_file() -> None:
    with pytest.raises(ConfigError) as err:
        load_config("nope.yaml")
    assert str(err.value) == "nope.yaml: cannot read: No such file or directory"


ENV: dict[str, tuple[dict[str, str], str]] = {
    "rate": ({"JOBMIRROR_QPS": "-200"}, f"environment variable JOBMIRROR_QPS: qps: -200 {RATE}"),
    "nested": ({"JOBMIRROR_LEADER_ELECTION__RETRY_PERIOD": "0"},
               "environment variable JOBMIRROR_LEADER_ELECTION__RETRY_PERIOD: leaderElection.retryPeriod: must be at "
               "least 1, got '0'"),
    "json-list": ({"JOBMIRROR_WORKERS": '[{"name": "w"}]'},
                  f"environment variable JOBMIRROR_WORKERS: workers[0].kubeconfig: {REQUIRED}"),
    "json-unknown-key": ({"JOBMIRROR_WORKERS": '[{"name": "w", "kubeconfig": "/k", "qsp": 1}]'},
                         "environment variable JOBMIRROR_WORKERS: workers[0].qsp: unknown key; did you mean 'qps'?"),
    "not-json": ({"JOBMIRROR_WORKERS": "w1"},
                 "environment variable JOBMIRROR_WORKERS: not valid JSON; a list or map is given as JSON, e.g. "
                 "JOBMIRROR_WORKERS='[{\"name\": \"w1\", \"kubeconfig\": \"/k\"}]'"),
    "address": ({"JOBMIRROR_METRICS_ADDRESS": "foo"},
                f"environment variable JOBMIRROR_METRICS_ADDRESS: metricsAddress: 'foo' {ADDRESS}"),
}


@pytest.mark.parametrize("case", list(ENV))
def test_env_errors_name_the_variable_not_the_file(monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    env, message = ENV[case]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert error_of(W) == message


def test_a_file_value_beside_an_env_override_is_blamed_on_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBMIRROR_LEADER_ELECTION__ENABLED", "true")
    assert error_of(W + "leaderElection: {retryPeriod: 0}\n") == (
        "config.yaml: leaderElection.retryPeriod: must be at least 1, got 0")


# -- what is accepted ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "get", "expected"),
    [
        (W + "qps: unlimited\n", lambda c: c.qps, 0.0),  # the token bucket's "no limit"
        ("workers:\n  - {name: w1, kubeconfig: /k, qps: unlimited}\n", lambda c: c.workers[0].qps, 0.0),
        (W + "qps: 0.5\nburst: 1\n", lambda c: (c.qps, c.burst), (0.5, 1)),
        (W + "metricsAddress: ''\n", lambda c: c.metrics_address, ""),
        (W + "metricsAddress: '127.0.0.1:9090'\n", lambda c: c.metrics_address, "127.0.0.1:9090"),
        (W + "inspectAddress: '[::1]:8443'\n", lambda c: c.inspect_address, "[::1]:8443"),
        (W + "inspectAddress: 'jobmirror.example.com:8443'\n", lambda c: c.inspect_address,
         "jobmirror.example.com:8443"),
        (W + "inspectTLS: {certFile: /c, keyFile: /k}\n", lambda c: str(c.inspect_tls.cert_file), "/c"),
    ],
    ids=["unlimited", "worker-unlimited", "small-rate", "address-off", "host-port", "ipv6", "dns-name", "inspectTLS"],
)
def test_accepted(text: str, get: Any, expected: Any) -> None:
    Path("config.yaml").write_text(text)
    assert get(load_config("config.yaml")) == expected


def test_unlimited_dumps_as_written() -> None:
    Path("config.yaml").write_text(W + "qps: unlimited\n")
    assert load_config("config.yaml").model_dump(by_alias=True)["qps"] == UNLIMITED


def test_every_address_key_is_checked_alike() -> None:
    keys = [k.key for k in docs.config_keys() if k.key.endswith("Address")]
    assert {"metricsAddress", "inspectAddress"} <= set(keys)
    for key in keys:
        assert error_of(W + f"{key}: foo\n") == f"config.yaml: {key}: 'foo' {ADDRESS}"


def _example(field: FieldInfo) -> Any:
    """A valid value for a field: its default when that says something, else one made from its type,
    with every nested key present (lists of objects get one item)."""
    tp = docs._optional_inner(field.annotation) or field.annotation
    default = None if field.is_required() else field.get_default(call_default_factory=True)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return {f.alias or n: _example(f) for n, f in tp.model_fields.items()}
    if typing.get_origin(tp) is list:
        (item,) = typing.get_args(tp)
        return [_example(FieldInfo(annotation=item))] if default in (None, []) else default
    if default is not None and default != {}:
        return default.value if isinstance(default, enum.Enum) else str(default) if isinstance(default, Path) \
            else default
    if typing.get_origin(tp) is dict:
        return {"example": _example(FieldInfo(annotation=typing.get_args(tp)[1]))}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return next(iter(tp)).value
    simple: dict[Any, Any] = {bool: True, int: 1, float: 1.0, Path: "/example"}
    return simple.get(tp, "example")


def _has(data: Any, key: str) -> bool:
    """Whether ``data`` (as written in YAML) holds the reference's ``key`` (``workers[].access.namespaces``)."""
    head, _, rest = key.partition(".")
    many = head.endswith("[]")
    name = head.removesuffix("[]")
    if not isinstance(data, dict) or name not in data:
        return False
    value = data[name]
    if many:
        if not isinstance(value, list) or not value:
            return False
        value = value[0]
    return not rest or _has(value, rest)


def test_every_documented_key_loads_under_its_documented_spelling() -> None:
    """A file with every key docs/reference/configuration.md names, spelled as it names them, loads."""
    data = {f.alias or n: _example(f) for n, f in Config.model_fields.items()}
    data["controllerName"] = Config.model_fields["controller_name"].default
    data["scheduling"]["tenants"][0]["quota"] = {"cpu": "8", "jobs": 3}  # quantities, not any string
    missing = [k.key for k in docs.config_keys() if not _has(data, k.key)]
    assert not missing, missing
    Path("config.yaml").write_text(yaml.safe_dump(data))
    cfg = load_config("config.yaml")
    assert cfg.inspect_tls is not None and cfg.workers[0].context == "example"
    assert "`inspectTLS`" in docs.configuration_page()  # the spelling the guides use


# -- the CLI --------------------------------------------------------------------------------


def _unreachable_kubeconfig() -> Path:
    path = Path("dead.kubeconfig")
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "dead",
        "clusters": [{"name": "dead", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}}]}))
    return path


def test_run_with_an_unreachable_manager_is_one_line_and_exit_1(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The real start-up path up to the identity read, with one attempt instead of six (no back-off wait)."""
    import mirror.controller

    monkeypatch.setattr(mirror.controller, "read_identity", functools.partial(kidentity.read_identity, attempts=1))
    kc = _unreachable_kubeconfig()
    Path("config.yaml").write_text(f"managerKubeconfig: {kc}\nmetricsAddress: ''\n" + W)
    assert cli.main(["run", "--config", "config.yaml"]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: cannot read the identity (kube-system namespace UID) of cluster manager"), err
    assert lines[0].endswith("(check every cluster with: jobmirror check-config config.yaml)"), err
    assert "Traceback" not in err


@pytest.mark.parametrize("exc", [OSError(2, "No such file or directory"), kidentity.IdentityUnavailable("no\nway")],
                         ids=["missing-file", "identity"])
def test_run_never_prints_a_traceback_for_a_cause_the_user_fixes(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 exc: Exception) -> None:
    import mirror.controller

    async def fail(self: Any, *, health: bool = True) -> None:
        raise exc

    monkeypatch.setattr(mirror.controller.MirrorController, "run", fail)
    Path("config.yaml").write_text(W)
    assert cli.main(["run", "--config", "config.yaml"]) == 1
    err = capsys.readouterr().err
    assert err == f"error: {cli.one_line(exc)} (check every cluster with: jobmirror check-config config.yaml)\n"


def test_a_bad_config_is_one_error_line_per_problem(capsys: pytest.CaptureFixture[str]) -> None:
    Path("config.yaml").write_text(W + "qps: -1\nmetricsAddress: foo\n")
    assert cli.main(["check-config", "config.yaml"]) == 2
    assert capsys.readouterr().err == (f"error: config.yaml: qps: -1 {RATE}\n"
                                       f"error: config.yaml: metricsAddress: 'foo' {ADDRESS}\n")


@pytest.mark.parametrize(
    ("configured", "manager", "expected"),
    [
        ("team-a", "uid-1", "team-a (set in the config)"),
        (None, "uid-1", "jobmirror-uid-1 (the default: jobmirror-<manager cluster identity>)"),
        (None, None, "unknown: the default is derived from the manager cluster's identity, which could not be read"),
    ],
    ids=["configured", "default", "manager-unreadable"],
)
def test_check_config_says_the_origin_it_would_use(configured: str | None, manager: str | None,
                                                   expected: str) -> None:
    assert cli.origin_line(configured, manager) == expected


def test_builtin_with_its_metrics_port_taken_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    from builtin_controller import cli as builtin_cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(SystemExit) as ended:
            builtin_cli.main(["--kubeconfig", str(_unreachable_kubeconfig()), "--metrics-address", address])
    assert ended.value.code == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "address already in use" in errors[0], err
    assert "Traceback" not in err


class _Cluster:
    """A stand-in for a ClusterClient: /version, the kube-system namespace (its UID, or a 403), no copies."""

    def __init__(self, name: str, uid: str | None) -> None:
        self.name, self.uid, self.host = name, uid, f"https://{name}.example:6443"

    async def request(self, method: str, path: str) -> dict[str, Any]:
        return {"gitVersion": "v1.33.5"}

    async def get(self, resource: Any, namespace: str | None, name: str) -> dict[str, Any]:
        if self.uid is None:
            raise ApiError(403, "Forbidden", "namespaces \"kube-system\" is forbidden", cluster=self.name)
        return {"metadata": {"uid": self.uid}}

    async def list(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {"items": []}

    async def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("origin", "uids", "stdout", "rc"),
    [
        ("", {"manager": "m-uid", "w1": "w-uid"},
         ["  manager      ok  v1.33.5  https://manager.example:6443  identity m-uid",
          "  w1           ok  v1.33.5  https://w1.example:6443  identity w-uid",
          "  origin       jobmirror-m-uid (the default: jobmirror-<manager cluster identity>)"], 0),
        ("origin: team-a\n", {"manager": "m-uid", "w1": "w-uid"},
         ["  origin       team-a (set in the config)"], 0),
        ("", {"manager": None, "w1": "w-uid"},
         ["  manager      ok  v1.33.5  https://manager.example:6443  identity unreadable",
          "  origin       unknown: the default is derived from the manager cluster's identity, which could not be "
          "read"], 1),
    ],
    ids=["default-origin", "configured-origin", "manager-identity-unreadable"],
)
def test_check_config_prints_each_identity_and_the_origin(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str], origin: str,
                                                          uids: dict[str, str | None], stdout: list[str],
                                                          rc: int) -> None:
    async def kubeconfig(path: Any, context: Any = None) -> str:
        return Path(path).stem

    monkeypatch.setattr(cli, "load_kubeconfig", kubeconfig)
    monkeypatch.setattr(cli.ClusterClient, "from_configuration",
                        staticmethod(lambda name, kc, **kw: _Cluster(name, uids[name])))
    Path("config.yaml").write_text(origin + "managerKubeconfig: /k/manager\n" + W)  # kubeconfig stems name the clusters
    assert cli.main(["check-config", "config.yaml"]) == rc
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "config.yaml: configuration valid (1 workers); checking clusters:"
    for line in stdout:
        assert line in out, "\n".join(out)


def test_run_with_a_broken_manager_kubeconfig_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    Path("manager.kubeconfig").write_text("clusters: [\n")
    Path("config.yaml").write_text("managerKubeconfig: manager.kubeconfig\nmetricsAddress: ''\n" + W)
    assert cli.main(["run", "--config", "config.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: kubeconfig ") and "manager.kubeconfig" in err, err
