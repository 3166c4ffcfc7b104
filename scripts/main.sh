#!/usr/bin/env bash
# The main job: set up, then run the CPU scenario with real vLLM (or the scenario given).
# Usage: bash scripts/main.sh [SCENARIO] [speedbench run options...]
# With options but no scenario (`bash scripts/main.sh -o out`), the default scenario runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
SCENARIO=scenarios/cpu_tiny.yaml
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then  # a first argument that is not an option
  SCENARIO=$1
  shift
fi
exec .venv/bin/speedbench run "$SCENARIO" "$@"
