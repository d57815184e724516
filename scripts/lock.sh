#!/usr/bin/env bash
# Re-resolve the lock files from pyproject.toml, with every file's sha256 (pip-tools' pip-compile).
#
#   scripts/lock.sh                              # after editing dependencies: keeps every other pin
#   scripts/lock.sh --upgrade                    # everything to the newest allowed version
#   scripts/lock.sh --upgrade-package pydantic   # one package (repeatable)
#
# requirements/controller.txt: what the controller imports (the image installs only this).
# requirements/dev.txt: that plus the test, bench and docs extras (bootstrap, CI), resolved with
# controller.txt as constraints, so the image and the tests run the same controller dependencies.
# Run it on Python 3.11 (the image's): markers are resolved for the interpreter that runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP_TOOLS=pip-tools==7.6.2
bash scripts/bootstrap.sh --python-only
.venv/bin/pip install -q --disable-pip-version-check "$PIP_TOOLS"
# Hashes are PyPI's: a local --find-links directory must not stand in for it.
compile() { env -u PIP_FIND_LINKS .venv/bin/pip-compile --quiet --generate-hashes --strip-extras \
  --no-emit-find-links "$@"; }
compile "$@" --output-file requirements/controller.txt pyproject.toml
# --allow-unsafe: setuptools is pinned too (the package install test builds the wheel with it, offline).
compile "$@" --allow-unsafe --extra test --extra bench --extra docs --constraint requirements/controller.txt \
  --output-file requirements/dev.txt pyproject.toml
echo "[lock] requirements/controller.txt: $(grep -c '^[A-Za-z0-9]' requirements/controller.txt) packages," \
  "requirements/dev.txt: $(grep -c '^[A-Za-z0-9]' requirements/dev.txt); run scripts/bootstrap.sh to install them"
