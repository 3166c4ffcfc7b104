#!/usr/bin/env bash
# All the tests: set up, then the fast unit tier, then the real-vLLM end-to-end tier.
# Usage: bash scripts/test.sh [extra pytest args]
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
# tests/test_slurm.py starts and stops its daemons from a temporary folder.
if ! command -v slurmctld >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "[test] installing Debian's slurm-wlm and munge for the Slurm tests"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null) \
    || echo "[test] slurm-wlm could not be installed; the Slurm tests will be skipped"
fi
echo "[test] unit tier"
.venv/bin/python -m pytest -m "not vllm" -q "$@"
echo "[test] end-to-end tier (real vLLM on the CPU)"
.venv/bin/python -m pytest -m vllm -q "$@"
