#!/usr/bin/env bash
# The main job: set up, then run the CPU scenario with real vLLM (or the scenario given).
# Usage: bash scripts/main.sh [SCENARIO] [speedbench run options...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
SCENARIO=${1:-scenarios/cpu_tiny.yaml}
shift || true
exec .venv/bin/speedbench run "$SCENARIO" "$@"
