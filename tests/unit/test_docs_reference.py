"""docs/reference/ is what the code generates now, and `jobmirror config-schema` describes the config file."""

from __future__ import annotations

import json

import pytest

from mirror.cli import main
from mirror.config import Config
from refdocs import generate as docs


def test_committed_reference_pages_match_the_code() -> None:
    stale = [str(p.relative_to(docs.ROOT)) for p in docs.stale_pages()]
    assert not stale, f"{', '.join(stale)} differ from the code: regenerate with `{docs.REGENERATE}` and commit"


def test_every_config_key_is_documented_with_a_description() -> None:
    keys = list(docs.config_keys())
    assert {k.key for k in keys} >= {"workers", "workers[].name", "leaderElection.leaseDuration", "placement"}
    assert all(k.description for k in keys), [k.key for k in keys if not k.description]


def test_every_metric_is_documented() -> None:
    from mirror import metrics

    page = docs.metrics_page()
    for m in docs.collectors(metrics):
        assert f"`{m.name}`" in page and m.help, m.name


def test_config_schema_command_prints_the_models_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config-schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == Config.model_json_schema(by_alias=True)
    assert schema["required"] == ["workers"]
    assert {"workerLostTimeout", "leaderElection", "placement"} <= set(schema["properties"])
    assert schema["properties"]["resyncPeriod"]["description"]


def test_chart_schema_checks_config_with_the_models_schema() -> None:
    """values.schema.json: `config` is the controller's schema (minus what the chart sets), every top-level
    value is typed and nothing else is allowed at the top level"""
    import yaml

    from refdocs import helm_values

    schema = helm_values.values_schema()
    model = Config.model_json_schema(by_alias=True)
    config = schema["properties"]["config"]
    assert config["properties"] == model["properties"] and config["additionalProperties"] is False
    assert "required" not in config, "workers come from the chart's own values"
    assert schema["$defs"] == model["$defs"]
    values = yaml.safe_load((helm_values.CHART / "values.yaml").read_text())
    assert set(schema["properties"]) == {*values, "global"} and schema["additionalProperties"] is False


def test_chart_readme_lists_every_value_with_its_comment() -> None:
    from refdocs import helm_values

    rows = {v.key: v for v in helm_values.chart_values()}
    assert {"networkPolicy.podCIDRs", "config.placement", "inspect.port", "workerKubeconfigs.kubeconfigs"} <= set(rows)
    assert "Pod CIDR" in rows["networkPolicy.podCIDRs"].description
    assert "replicas" in rows and "leader election" in rows["replicas"].description
    assert "grafanaDashboard.labels" in rows, "a map of free-form keys is one value"


def test_cli_reference_names_every_option_and_help_shows_defaults() -> None:
    from builtin_controller.cli import build_parser as builtin_parser
    from kruntime.helpformat import subcommands
    from mirror.cli import build_parser

    page = (docs.REFERENCE / "cli.md").read_text()
    parsers = [build_parser(), builtin_parser()]
    parsers += [sub for p in parsers for sub in subcommands(p).values()]
    for parser in parsers:
        text = " ".join(parser.format_help().split())
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in ("-h", "--help", "--version") or f"`{flag}`" in page, flag
            if action.option_strings and action.default not in (None, False, "==SUPPRESS==") and action.help:
                assert f"(default: {action.default})" in text or "default" in action.help, (parser.prog, action.dest)
