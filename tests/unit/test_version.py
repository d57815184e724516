"""One version everywhere (mirror.__version__): the package, ``jobmirror --version``, the plugin's, the chart."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml

import mirror
from mirror.cli import main, package_version

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_the_chart_and_the_commands_say_the_same_version(capsys: pytest.CaptureFixture[str]) -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["dynamic"] == ["version"], "one source: mirror.__version__"
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "mirror.__version__"}
    declared = mirror.__version__
    chart = yaml.safe_load((ROOT / "deploy/helm/jobmirror/Chart.yaml").read_text())
    assert package_version() == declared == chart["version"] == chart["appVersion"]
    for prog in ("jobmirror", "kubectl jobmirror"):
        with pytest.raises(SystemExit) as exit_:
            main(["--version"], prog=prog)
        assert exit_.value.code == 0
        assert capsys.readouterr().out.strip() == f"{prog} {declared}"
