#!/usr/bin/env bash
# jobmirror e2e on kind (make e2e-kind): a Docker engine (started if none answers), locally
# built images, two kind clusters — manager (also a worker, KEP-4368 Story 1) + worker-1, or
# with --workers 2 a manager + two workers — deploy/ applied, and the e2e suite with
# JOBMIRROR_E2E_PROVIDER=kind. Everything it made is deleted at the end, also on failure,
# unless --keep. Details: e2e/kind/README.md.
#
# Usage: e2e/kind/run.sh [--workers 1|2] [--keep] [-- pytest args...]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) export JOBMIRROR_E2E_KIND_WORKERS="${2:-}"; shift 2 ;;
    --keep) export JOBMIRROR_E2E_KEEP=1; shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) printf 'unknown argument: %s (see --help)\n' "$1" >&2; exit 2 ;;
  esac
done
bash scripts/bootstrap.sh
export JOBMIRROR_E2E_PROVIDER=kind
exec .venv/bin/pytest -m e2e e2e "$@"
