"""The image and the chart run the package's version: neither spells one of its own.

tests/unit/test_version.py ties pyproject, `jobmirror --version` and Chart.yaml together; this
ties the image (built from pyproject by `pip install .`) and the chart's default image tag to them.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_image_takes_its_version_from_the_package() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install --no-cache-dir --no-deps ." in dockerfile
    assert "jobmirror --version" in dockerfile, "the build should print the version it installed"
    spelled = [line for line in dockerfile.splitlines()
               if not line.lstrip().startswith("#") and re.search(r"\bversion\s*=\s*\"?\d", line, re.I)]
    assert not spelled, f"a version spelled in the Dockerfile would drift from pyproject.toml: {spelled}"


def test_the_charts_default_image_tag_is_its_app_version() -> None:
    deployment = (ROOT / "deploy/helm/jobmirror/templates/deployment.yaml").read_text()
    assert "{{ .Values.image.tag | default .Chart.AppVersion }}" in deployment
    values = (ROOT / "deploy/helm/jobmirror/values.yaml").read_text()
    assert re.search(r"^\s+tag: \"\"", values, re.M), "values.yaml should leave image.tag to appVersion"
