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
phase() { printf '[test] phase %-52s %5ds   (total %ds)\n' "$1" "$((SECONDS - $2))" "$((SECONDS - T0))"; }

if [ $# -gt 0 ]; then
  bash scripts/bootstrap.sh --with-old
  .venv/bin/ruff check . && .venv/bin/mypy
  exec .venv/bin/pytest "$@"
fi

# A dockerd this run starts (kindbed.engine records its PID) is stopped however the run ends;
# an engine that was already answering is never touched.
stop_our_engine() { [ -x .venv/bin/python ] && .venv/bin/python -m kindbed engine down >/dev/null 2>&1 || true; }
trap stop_our_engine EXIT

t=$SECONDS
bash scripts/bootstrap.sh --python-only
# The kind tier's images build beside the cluster binaries: their Debian downloads and docker
# work overlap with the Go compilation (a shared lock keeps one build per Go module at a time).
images_log=$(mktemp "${TMPDIR:-/tmp}/jobmirror-kind-images.XXXXXX")
.venv/bin/python -m kindbed images >"$images_log" 2>&1 &
images_pid=$!
bash scripts/bootstrap.sh --with-old
phase "bootstrap (venv, cluster binaries)" "$t"
irc=0
wait "$images_pid" || irc=$?
if [ "$irc" -ne 0 ]; then
  echo "[test] building the kind images failed (exit $irc); the kind tier will retry and name the error:" >&2
  tail -n 40 "$images_log" >&2
fi
grep -E '^\[kind (images|engine)\]' "$images_log" | tail -n 12 || true
phase "kind images, built beside it (rc=$irc; log $images_log)" "$t"

t=$SECONDS
echo "[test] ruff"
.venv/bin/ruff check .
echo "[test] mypy"
.venv/bin/mypy
phase "lint (ruff, mypy)" "$t"

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
