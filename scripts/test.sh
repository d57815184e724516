#!/usr/bin/env bash
# The whole test suite: static checks, unit, integration, conformance, e2e and chaos
# tiers, against real kube-apiservers started (and stopped) by the tests themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --with-old
echo "[test] ruff"
.venv/bin/ruff check .
echo "[test] mypy"
.venv/bin/mypy
echo "[test] pytest (all tiers)"
exec .venv/bin/pytest "$@"
