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
# The locked versions, each file checked against its sha256 (requirements/dev.txt: the controller's
# dependencies plus the test, bench and docs extras; `make lock` updates it), then the project itself.
stamp=.venv/.installed-$(cat pyproject.toml requirements/dev.txt | sha256sum | cut -c1-16)
# A fresh clone reuses the dependencies installed by an earlier one: a copy of that venv, kept
# outside the repo and keyed by the lock file and the interpreter, its paths rewritten to this one
# (pip installs the ~100 locked packages in ~60-80 s on 2 cores; the copy takes seconds).
cache_root=${JOBMIRROR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobmirror}
deps_key=$( (cat requirements/dev.txt; "$PY" -c 'import sys; print(sys.version, sys.executable)') | sha256sum | cut -c1-16)
deps_cache=$cache_root/venv/$deps_key
here=$PWD/.venv
relocate() {  # relocate FROM TO: the venv's own absolute path in its scripts and pyvenv.cfg
  grep -rlIF -- "$1" .venv/bin .venv/pyvenv.cfg 2>/dev/null | while IFS= read -r f; do
    sed -i "s|$1|$2|g" "$f"
  done
}
if [ ! -x .venv/bin/python ] && [ -f "$deps_cache/.complete" ]; then
  echo "[bootstrap] .venv from the dependencies cached by an earlier clone ($deps_cache)"
  cp -a "$deps_cache/venv" .venv
  relocate "$(cat "$deps_cache/.complete")" "$here"
fi
if [ ! -x .venv/bin/python ]; then
  echo "[bootstrap] creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
if [ ! -f "$stamp" ]; then
  echo "[bootstrap] installing Python dependencies (requirements/dev.txt)"
  .venv/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements/dev.txt
  if [ ! -f "$deps_cache/.complete" ]; then  # before the project itself: its editable path is this clone's
    tmp=$(mktemp -d "$cache_root/venv.XXXXXX" 2>/dev/null || { mkdir -p "$cache_root" && mktemp -d "$cache_root/venv.XXXXXX"; })
    cp -a .venv "$tmp/venv" && rm -f "$tmp"/venv/.installed-* && echo "$here" >"$tmp/.complete"
    rm -rf "$deps_cache" && mkdir -p "$(dirname "$deps_cache")" && mv "$tmp" "$deps_cache"
  fi
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
