"""requirements/*.txt lock what pyproject.toml asks for, and the image installs only the controller's lock.

The locks are made by `make lock` (scripts/lock.sh, pip-tools); this checks what can be checked
without PyPI: every dependency pinned within its range, hashed, the two locks agreeing.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)", re.M)
REGENERATE = "make lock"


def pins(name: str) -> dict[str, str]:
    return {canonicalize_name(n): v for n, v in PIN.findall((ROOT / "requirements" / name).read_text())}


def assert_locked(requirements: list[str], locked: dict[str, str], lock: str) -> None:
    for line in requirements:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name in locked, f"{req.name} is not in requirements/{lock}: run `{REGENERATE}`"
        assert req.specifier.contains(locked[name], prereleases=True), (
            f"requirements/{lock} pins {req.name}=={locked[name]}, outside {req.specifier}: run `{REGENERATE}`")


def test_controller_lock_pins_every_dependency() -> None:
    assert_locked(PROJECT["dependencies"], pins("controller.txt"), "controller.txt")


def test_dev_lock_pins_every_extra_and_the_controllers_versions() -> None:
    dev = pins("dev.txt")
    for extra in ("test", "bench", "docs"):
        assert_locked(PROJECT["optional-dependencies"][extra], dev, "dev.txt")
    controller = pins("controller.txt")
    differ = {n: (v, dev.get(n)) for n, v in controller.items() if dev.get(n) != v}
    assert not differ, f"the tests would run other controller dependencies than the image: {differ}"


def test_the_image_lock_holds_no_test_bench_or_docs_package() -> None:
    extras = {canonicalize_name(Requirement(r).name)
              for e in ("test", "bench", "docs") for r in PROJECT["optional-dependencies"][e]}
    assert not extras & set(pins("controller.txt"))


@pytest.mark.parametrize("lock", ["controller.txt", "dev.txt"])
def test_every_pin_is_hashed(lock: str) -> None:
    text = (ROOT / "requirements" / lock).read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text)
    for block in blocks:
        if PIN.match(block):
            assert "--hash=sha256:" in block, f"requirements/{lock}: {block.splitlines()[0]} has no hash"


def test_installers_use_the_locks_with_hashes() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY requirements/controller.txt" in dockerfile
    assert re.search(r"pip install [^\n]*--require-hashes -r /tmp/requirements.txt", dockerfile)
    assert "!requirements/controller.txt" in (ROOT / ".dockerignore").read_text()
    assert "--require-hashes -r requirements/dev.txt" in (ROOT / "scripts/bootstrap.sh").read_text()
