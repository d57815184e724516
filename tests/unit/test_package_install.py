"""The package installs on its own: a wheel and an sdist built from the source, the wheel installed into a
fresh venv, and its three commands run there (``--version``, ``--help``, ``check-config`` on a sample).

Offline and quick: the PEP 517 hooks of the venv's own setuptools (what ``python -m build --no-isolation``
calls), the wheel installed with ``pip --no-index --no-deps``, and the runtime dependencies reached through
a ``.pth`` line naming this venv's site-packages (whose jobmirror is an editable finder, not loaded there:
``mirror`` comes from the wheel, as the test checks).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import yaml

import mirror

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("jobapi", "mirror", "builtin_controller", "kruntime")
COMMANDS = ("jobmirror", "jobmirror-builtin", "kubectl-jobmirror")


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=180, cwd=cwd)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist and wheel, built from a copy of what the package is made of (the shared tree stays clean)."""
    tmp = tmp_path_factory.mktemp("package")
    src, out = tmp / "src", tmp / "dist"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    for pkg in (*PACKAGES, "clusterbed", "kindbed", "testkit"):  # the test beds too: the wheel must leave them
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    hooks = (f"import setuptools.build_meta as b; b.build_sdist({str(out)!r}); "
             f"b.build_wheel({str(out)!r})")
    proc = run(sys.executable, "-c", hooks, cwd=src)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def venv(dist: Path) -> Path:
    """A fresh venv with the wheel installed and nothing else of the project."""
    env = dist.parent / "venv"
    assert run(sys.executable, "-m", "venv", "--without-pip", env, cwd=dist).returncode == 0
    py = env / "bin" / "python"
    wheel = next(dist.glob("jobmirror-*.whl"))
    proc = run(sys.executable, "-m", "pip", "--python", py, "install", "--no-index", "--no-deps",
               "--disable-pip-version-check", "--no-warn-script-location", wheel, cwd=dist)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = run(py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=dist).stdout.strip()
    (Path(site) / "jobmirror-test-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return env


def test_sdist_and_wheel_carry_the_version_the_license_and_only_the_controller_packages(dist: Path) -> None:
    v = mirror.__version__
    assert sorted(p.name for p in dist.iterdir()) == [f"jobmirror-{v}-py3-none-any.whl", f"jobmirror-{v}.tar.gz"]
    with zipfile.ZipFile(dist / f"jobmirror-{v}-py3-none-any.whl") as whl:
        names = whl.namelist()
        meta = whl.read(f"jobmirror-{v}.dist-info/METADATA").decode()
        scripts = whl.read(f"jobmirror-{v}.dist-info/entry_points.txt").decode()
    assert {n.split("/")[0] for n in names} == {*PACKAGES, f"jobmirror-{v}.dist-info"}
    assert f"jobmirror-{v}.dist-info/licenses/LICENSE" in names
    assert "License-Expression: Apache-2.0" in meta and f"Version: {v}" in meta
    assert all(f"{c} = " in scripts for c in COMMANDS) and "jobmirror-bed" not in scripts


def test_the_chart_carries_the_package_version() -> None:
    chart = yaml.safe_load((ROOT / "deploy/helm/jobmirror/Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == mirror.__version__, "one version: mirror/__init__.py"


def test_installed_commands_run(venv: Path, tmp_path: Path) -> None:
    bin_ = venv / "bin"
    where = run(bin_ / "python", "-c", "import mirror; print(mirror.__file__)", cwd=tmp_path).stdout
    assert where.startswith(str(venv)), f"mirror imported from {where}, not the wheel"
    beds = "import importlib.util as u; print([m for m in ('clusterbed', 'kindbed', 'testkit') if u.find_spec(m)])"
    assert run(bin_ / "python", "-c", beds, cwd=tmp_path).stdout.strip() == "[]", "a test bed was installed"
    for cmd, prog in (("jobmirror", "jobmirror"), ("jobmirror-builtin", "jobmirror-builtin"),
                      ("kubectl-jobmirror", "kubectl jobmirror")):
        version = run(bin_ / cmd, "--version", cwd=tmp_path)
        assert (version.returncode, version.stdout.strip()) == (0, f"{prog} {mirror.__version__}"), version
        help_ = run(bin_ / cmd, "--help", cwd=tmp_path)
        assert help_.returncode == 0 and "usage:" in help_.stdout and "(default: " in help_.stdout, help_
    kubeconfig = tmp_path / "unreachable.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    sample = tmp_path / "config.yaml"
    sample.write_text(yaml.safe_dump({"managerKubeconfig": str(kubeconfig), "requestTimeout": 2,
                                      "workers": [{"name": "w1", "kubeconfig": str(kubeconfig)}]}))
    check = run(bin_ / "jobmirror", "check-config", sample, cwd=tmp_path)
    # Valid file, unreachable clusters: it says both, and exits 1.
    assert check.returncode == 1 and "valid" in check.stdout and "manager" in check.stderr, check
