"""docs/reference/ is what the code generates now, and `jobmirror config-schema` describes the config file."""

from __future__ import annotations

import json

import pytest

from mirror import docs
from mirror.cli import main
from mirror.config import Config


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
