"""Every config the repo ships loads through the CLI's own loader, and none sets the legacy origin.

A fresh install must not run with the upgrade setting ``origin: jobmirror`` (docs/install.md keeps
it in the upgrade notes): two releases on one manager cluster would share an origin. Found by
content, not by a list, so a new config file or chart default is checked too (issue 33).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mirror.config import load_config
from mirror.naming import LEGACY_DEFAULT_ORIGIN

ROOT = Path(__file__).resolve().parents[2]
CHART_VALUES = ROOT / "deploy" / "helm" / "jobmirror" / "values.yaml"
SKIPPED = {"node_modules", "site", "build", "dist", "__pycache__", "venv"}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.upper().startswith("JOBMIRROR_"):
            monkeypatch.delenv(k)


def _is_config(path: Path) -> bool:
    """A controller config file: a top-level mapping with ``workers`` that is no Kubernetes object."""
    try:
        text = path.read_text()
        if not any(line.startswith("workers:") for line in text.splitlines()):
            return False
        docs = list(yaml.safe_load_all(text))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return False  # Helm templates and the like; the YAML of real configs is checked by loading them
    return len(docs) == 1 and isinstance(docs[0], dict) and "workers" in docs[0] and "kind" not in docs[0]


def _yaml_files(top: Path) -> Iterator[Path]:
    """The repo's YAML files, without git (an sdist has none): hidden, virtualenv and build dirs skipped."""
    for here, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED]
        yield from (Path(here) / f for f in files if f.endswith((".yaml", ".yml")))


def shipped_configs() -> list[Path]:
    return sorted(p for p in _yaml_files(ROOT) if p != CHART_VALUES and _is_config(p))


def test_the_known_configs_are_found() -> None:
    found = {str(p.relative_to(ROOT)) for p in shipped_configs()}
    assert {"config/jobmirror.yaml", "deploy/manager/files/config.yaml",
            "deploy/manager-as-worker/config.yaml"} <= found, found


@pytest.mark.parametrize("path", shipped_configs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_config_loads_without_the_legacy_origin(path: Path) -> None:
    cfg = load_config(path)  # raises ConfigError on any key or value the CLI would refuse
    assert cfg.origin != LEGACY_DEFAULT_ORIGIN, f"{path}: sets the legacy origin; leave origin unset"


def chart_config(values: dict[str, Any]) -> dict[str, Any]:
    """The config file the chart's default values make, as its template builds it ("jobmirror.config" in
    templates/_helpers.tpl): ``config`` plus the workers (kubeconfig defaulting to the mounted Secret's
    key), the metrics and inspect addresses and leader election."""
    workers = [{"kubeconfig": f"/etc/jobmirror/workers/{w['name']}.kubeconfig", **w} for w in values["workers"]]
    election = {"namespace": "jobmirror-system", **values["leaderElection"]}
    cfg = {**values["config"], "workers": workers, "metricsAddress": f":{values['metricsPort']}",
           "leaderElection": election}
    if values["inspect"]["enabled"]:
        cfg["inspectAddress"] = f":{values['inspect']['port']}"
    return cfg


def test_chart_default_config_loads_without_the_legacy_origin(tmp_path: Path) -> None:
    values = yaml.safe_load(CHART_VALUES.read_text())
    assert "origin" not in values["config"], "the chart's values set an origin; leave it unset"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(chart_config(values)))
    cfg = load_config(path)
    assert cfg.origin is None and [w.name for w in cfg.workers] == [w["name"] for w in values["workers"]]
