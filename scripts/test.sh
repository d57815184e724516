#!/usr/bin/env bash
# The whole test suite: static checks, the docs site, unit, integration, conformance, chaos and e2e tiers
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
  bash scripts/bootstrap.sh --test-versions
  .venv/bin/ruff check . && .venv/bin/mypy
  exec .venv/bin/pytest "$@"
fi

# A dockerd this run starts (kindbed.engine records its PID) is stopped however the run ends;
# an engine that was already answering is never touched.
# A background lane (kind tier, chaos tier) still running when the run is cut short is interrupted
# first, so its sessions delete their clusters.
kind_pid=
corners_pid=
build_pid=
lane_stop=$(mktemp -u "${TMPDIR:-/tmp}/jobmirror-lane-stop.XXXXXX")
stop_our_engine() {
  for p in $corners_pid $build_pid; do kill "$p" 2>/dev/null || true; done
  if [ -n "$kind_pid" ] && kill -0 "$kind_pid" 2>/dev/null; then
    touch "$lane_stop"  # the lane starts nothing more
    pkill -INT -P "$kind_pid" 2>/dev/null || true
    for _ in $(seq 120); do kill -0 "$kind_pid" 2>/dev/null || break; sleep 1; done
  fi
  [ -x .venv/bin/python ] && .venv/bin/python -m kindbed engine down >/dev/null 2>&1 || true
  rm -f "$lane_stop"
}
trap stop_our_engine EXIT
# await_build PID LOG WHAT: wait for a build started in the background; if it failed, its log's end and exit 1.
await_build() {
  local brc=0
  wait "$1" || brc=$?
  if [ "$brc" -ne 0 ]; then
    echo "[test] building $3 failed (exit $brc):" >&2
    tail -n 60 "$2" >&2
    exit 1
  fi
}

t=$SECONDS
bash scripts/bootstrap.sh --python-only
phase "python venv (requirements/dev.txt)" "$t"

# kwok follows each log stream with an inotify instance; kube-apiservers and kind's kubelets and
# containerd take more, and all share the kernel's per-user limit (128 by default; kind's known
# issues advise 512): raised when this run may, else said.
inotify=/proc/sys/fs/inotify/max_user_instances
if [ -r "$inotify" ] && [ "$(cat "$inotify")" -lt 512 ]; then
  if [ -w "$inotify" ] && echo 512 >"$inotify" 2>/dev/null; then
    echo "[test] fs.inotify.max_user_instances raised to 512 (log-stream and kind tests need more than 128)"
  else
    echo "[test] warning: fs.inotify.max_user_instances is $(cat "$inotify"); the log-stream and kind tests may fail: sudo sysctl fs.inotify.max_user_instances=512" >&2
  fi
fi

t=$SECONDS
# What builds, and for which tier (docs/contributing.md, "What make test builds"): the default release
# in full (every local tier, the demo), helm; the kind images (node image with the default release's
# kubelet) beside it; then the matrix corners' release, JobSet and helm, before any test.
# The kind tier's images build beside the cluster binaries: their Debian downloads and docker
# work overlap with the Go compilation (a shared lock keeps one build per Go module at a time).
images_log=$(mktemp "${TMPDIR:-/tmp}/jobmirror-kind-images.XXXXXX")
images_rc=$(mktemp "${TMPDIR:-/tmp}/jobmirror-kind-images-rc.XXXXXX")
# Its exit code in a file: the background lane (not this shell) waits for it, so the local tiers
# start as soon as the default release is built, not when the kind images are.
ti=$SECONDS
( rc=0; .venv/bin/python -m kindbed images >"$images_log" 2>&1 || rc=$?; echo "$rc" >"$images_rc" ) &
build_log=$(mktemp "${TMPDIR:-/tmp}/jobmirror-build.XXXXXX")
# Its milestones are printed as they happen (the whole log is shown if it fails).
bash scripts/bootstrap.sh --no-helm > >(tee "$build_log" | grep --line-buffered -E 'building from source|so far|done in|ready:|waiting|error') 2>&1 &
build_pid=$!
# Lint and the docs need only the venv: they run while the binaries build.
echo "[test] ruff"
.venv/bin/ruff check .
echo "[test] mypy"
.venv/bin/mypy
phase "lint (ruff, mypy), beside the build" "$t"
t2=$SECONDS
# The docs site, strictly: a broken link, a missing page or an unlisted page fails the run. That
# the generated references (docs/reference/) match the code is a unit test (test_docs_reference.py).
echo "[test] mkdocs build --strict"
docs_out=$(mktemp -d "${TMPDIR:-/tmp}/jobmirror-site.XXXXXX")
# Not --quiet: it hides the warnings that --strict counts, and the build would pass.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$docs_out"
rm -rf "$docs_out"
phase "docs (mkdocs build --strict), beside the build" "$t2"
await_build "$build_pid" "$build_log" "the cluster binaries"
build_pid=
phase "bootstrap: Kubernetes v$(.venv/bin/python -c 'from clusterbed import versions; print(versions.KUBE_VERSION)') in full, etcd, kwok" "$t"
# The matrix corners' release (v1.33.5), JobSet (the JobSet kind's tests, the chaos tier's jobset-mix)
# and helm with the Prometheus Operator CRDs (the chart and monitoring tests) build before the tests,
# the kind images still beside them: on 2 cores, tests beside a Go build ran 1.8-2.8x slower in a cold
# run (2026-11-27, docs/contributing.md) and timing-bound ones failed. Cached, this takes a second.
t=$SECONDS
corners_log=$(mktemp "${TMPDIR:-/tmp}/jobmirror-corners.XXXXXX")
.venv/bin/python -m clusterbed.build --corners-only --jobset --helm > >(tee "$corners_log" | grep --line-buffered -E 'building from source|so far|done in|waiting|error') 2>&1 &
corners_pid=$!
await_build "$corners_pid" "$corners_log" "the corners' release, JobSet or helm"
corners_pid=
phase "bootstrap: the corners' release, JobSet, helm" "$t"

rc=0
brc=0
t=$SECONDS
# Two lanes. The local tiers run in the foreground; the background lane runs the kind tier, then the
# chaos tier on its own bed. All of them mostly wait on API servers, kubelets and containers (the
# local tiers alone keep 2 cores at a load of ~1.5), so the run takes the longer lane instead of
# the sum. The background lane's output is printed when it ends.
kind_log=$(mktemp "${TMPDIR:-/tmp}/jobmirror-kind-tier.XXXXXX")
chaos_log=$(mktemp "${TMPDIR:-/tmp}/jobmirror-chaos-tier.XXXXXX")
echo "[test] pytest: background lane started: kind tier (engine, images, clusters, deploy/, e2e on kind; log $kind_log), then chaos tier, then the benchmark smoke runs (log $chaos_log)"
(
  # The kind tier needs the kind images: wait for their build (its phase line heads the tier's output).
  irc=
  while [ -z "$irc" ]; do
    [ -e "$lane_stop" ] && exit 1
    irc=$(cat "$images_rc" 2>/dev/null || true)
    [ -n "$irc" ] || sleep 2
  done
  {
    if [ "$irc" -ne 0 ]; then
      echo "[test] building the kind images failed (exit $irc); the kind tier will retry and name the error:"
      tail -n 40 "$images_log"
    fi
    grep -E '^\[kind (images|engine)\]' "$images_log" | tail -n 12 || true
    phase "kind images, built beside the others (rc=$irc; log $images_log)" "$ti"
  } >"$kind_log"
  lt=$SECONDS
  krc=0
  JOBMIRROR_E2E_PROVIDER=kind .venv/bin/pytest -m e2e e2e --junitxml=.test-reports/kind.xml >>"$kind_log" 2>&1 || krc=$?
  echo "[test] lane: kind tier ended (rc=$krc) after $((SECONDS - lt))s" >>"$kind_log"
  [ -e "$lane_stop" ] && exit 1
  lt=$SECONDS
  crc=0
  .venv/bin/pytest -m chaos tests --durations=5 --junitxml=.test-reports/chaos.xml >"$chaos_log" 2>&1 || crc=$?
  echo "[test] lane: chaos tier ended (rc=$crc) after $((SECONDS - lt))s" >>"$chaos_log"
  [ -e "$lane_stop" ] && exit 1
  lt=$SECONDS
  src=0
  .venv/bin/pytest -m "bench_smoke and not kind and not chaos" tests --durations=5 \
    --junitxml=.test-reports/bench-smoke.xml >>"$chaos_log" 2>&1 || src=$?
  echo "[test] lane: benchmark smoke runs ended (rc=$src) after $((SECONDS - lt))s" >>"$chaos_log"
  [ "$krc" -eq 0 ] && [ "$crc" -eq 0 ] && [ "$src" -eq 0 ]
) &
kind_pid=$!
echo "[test] pytest: unit, integration, conformance, security, e2e on local control planes"
.venv/bin/pytest -m "not kind and not chaos and not below_floor and not bench_smoke" --durations=60 \
  --junitxml=.test-reports/local.xml || rc=$?
phase "pytest local tiers (rc=$rc)" "$t"
if kill -0 "$kind_pid" 2>/dev/null; then
  echo "[test] waiting for the background lane, now at: $(grep -hE '^(e2e|tests)/' "$kind_log" "$chaos_log" | tail -n 1)"
fi
wait "$kind_pid" || brc=$?
kind_pid=
echo "[test] ---- kind tier output ----"
cat "$kind_log"
echo "[test] ---- chaos tier and benchmark smoke output ----"
cat "$chaos_log"
phase "pytest background lane: kind tier, then chaos tier (rc=$brc)" "$t"

[ "$rc" -eq 0 ] && [ "$brc" -eq 0 ]
