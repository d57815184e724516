#!/usr/bin/env bash
# Install everything the tests and the demo need on a fresh machine:
# a venv with the Python dependencies, then the cluster-bed binaries
# (built from the Kubernetes/etcd/kwok Go modules, cached in ~/.cache/jobmirror).
#
#   scripts/bootstrap.sh [--python-only] [clusterbed.build args, e.g. --test-versions]
set -euo pipefail
cd "$(dirname "$0")/.."
python_only=0
if [ "${1:-}" = "--python-only" ]; then python_only=1; shift; fi
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[bootstrap] creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
# The locked versions, each file checked against its sha256 (requirements/dev.txt: the controller's
# dependencies plus the test, bench and docs extras; `make lock` updates it), then the project itself.
stamp=.venv/.installed-$(cat pyproject.toml requirements/dev.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "[bootstrap] installing Python dependencies (requirements/dev.txt)"
  .venv/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements/dev.txt
  .venv/bin/pip install -q --disable-pip-version-check --no-deps -e .
  rm -f .venv/.installed-*
  touch "$stamp"
fi
[ "$python_only" = 1 ] && exit 0
if ! command -v go >/dev/null 2>&1; then
  echo "[bootstrap] error: the Go toolchain is required to build the local cluster bed (https://go.dev/dl/)" >&2
  exit 1
fi
echo "[bootstrap] ensuring cluster-bed binaries (first run builds Kubernetes from source: ~10 min on 2 cores)"
.venv/bin/python -m clusterbed.build "$@"
