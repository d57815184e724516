#!/usr/bin/env bash
# The whole test suite: static checks, unit, integration, conformance, chaos and e2e tiers
# against real kube-apiservers (local control planes), then the kind tier: the e2e suite
# again on kind clusters with the controller deployed as a Deployment and real containers.
# Tests start (and stop) every cluster and engine they use; nothing is left running.
#
#   scripts/test.sh              # everything, one timing line per phase
#   scripts/test.sh ARGS...      # bootstrap + lint, then only `pytest ARGS...`
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$SECONDS
phase() { printf '[test] phase %-44s %5ds   (total %ds)\n' "$1" "$((SECONDS - $2))" "$((SECONDS - T0))"; }

t=$SECONDS
bash scripts/bootstrap.sh --with-old
phase "bootstrap (venv, cluster binaries)" "$t"

t=$SECONDS
echo "[test] ruff"
.venv/bin/ruff check .
echo "[test] mypy"
.venv/bin/mypy
phase "lint (ruff, mypy)" "$t"

if [ $# -gt 0 ]; then
  exec .venv/bin/pytest "$@"
fi

rc=0
t=$SECONDS
echo "[test] pytest: unit, integration, conformance, chaos, e2e on local control planes"
.venv/bin/pytest -m "not kind" || rc=$?
phase "pytest local tiers (rc=$rc)" "$t"

t=$SECONDS
echo "[test] pytest: kind tier (engine, images, clusters, deploy/, e2e on kind)"
krc=0
JOBMIRROR_E2E_PROVIDER=kind .venv/bin/pytest -m e2e e2e || krc=$?
phase "pytest kind tier (rc=$krc)" "$t"

[ "$rc" -eq 0 ] && [ "$krc" -eq 0 ]
