#!/usr/bin/env bash
# All the tests: set up, then three tiers in order, each with its wall time:
#   unit         tests/unit/<package>/  pure and fast
#   integration  tests/integration/     subprocesses, Slurm, Chromium, fake servers
#   e2e          tests/e2e/             a real vLLM on the CPU (the `vllm` marker; tests/conftest.py
#                                       keeps the marker and the folder the same)
# Before the tiers: ruff and mypy on speedbench/ (configured in pyproject.toml).
# A failing tier stops the script. Usage: bash scripts/test.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Headless Chromium renders the dashboard in one test (Debian's package; needs root).
if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "[test] installing Debian's chromium for the dashboard test"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "[test] chromium could not be installed; its test will be skipped"
fi
# A single-node Slurm (Debian's slurm-wlm 22.05 + munge) for the Slurm executor tests;
# tests/integration/test_slurm.py starts and stops its daemons from a temporary folder.
if ! command -v slurmctld >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "[test] installing Debian's slurm-wlm and munge for the Slurm tests"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null) \
    || echo "[test] slurm-wlm could not be installed; the Slurm tests will be skipped"
fi
tier() {  # tier NAME PYTEST-ARGS...: run one tier, print its wall time, pass on its exit code
  local name=$1 t0 rc=0
  shift
  echo "[test] $name tier"
  t0=$(date +%s.%N)
  .venv/bin/python -m pytest "$@" || rc=$?
  awk -v n="$name" -v a="$t0" -v b="$(date +%s.%N)" -v rc="$rc" \
    'BEGIN { printf "[test] %s tier: %.1f s wall (exit %d)\n", n, b - a, rc }'
  return "$rc"
}
echo "[test] lint: ruff and mypy"
.venv/bin/ruff check speedbench
.venv/bin/mypy speedbench
tier unit tests/unit -q "$@"
tier integration tests/integration -q "$@"
tier "end-to-end (real vLLM on the CPU)" tests/e2e -m vllm -q "$@"
