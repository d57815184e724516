#!/usr/bin/env bash
# The README's demo command: manager + two workers, sample Jobs mirrored and completed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python scripts/demo.py
