#!/usr/bin/env bash
# All the tests: set up, then three tiers in order, each with its wall time and its 10
# slowest tests:
#   unit         tests/unit/<package>/  pure and fast; 2 workers (pytest-xdist), one per core
#   integration  tests/integration/     subprocesses, Slurm, Chromium, fake servers; 4 workers, since
#                                       most of it waits: each module stays on one worker (--dist loadfile;
#                                       tests/integration/conftest.py)
#   e2e          tests/e2e/             a real vLLM on the CPU, one server at a time (the `vllm`
#                                       marker; tests/conftest.py keeps the marker and the folder the same)
# SPEEDBENCH_TEST_WORKERS=N sets the integration tier's workers (0: none, in this process).
# Before the tiers: ruff on speedbench/, tests/ and scripts/, mypy on speedbench/ (configured in
# pyproject.toml).
# A failing tier stops the script. Usage: bash scripts/test.sh [--busy] [extra pytest args]
#
# Random order (pytest-randomly): every tier runs in a random order drawn from one seed,
# printed first ("[test] random order: seed N") and by each tier. To replay a failing order:
#   bash scripts/test.sh -p randomly --randomly-seed=N                       every tier
#   .venv/bin/python -m pytest tests/<tier> -p randomly --randomly-seed=N     one tier
# (the same seed over the same test paths gives the same order); -p no:randomly runs the
# files' own order.
#
# --busy (or SPEEDBENCH_TEST_BUSY=1): the tiers run while a CPU hog holds one core, as on
# a shared CI host. The script starts it, prints its PID, and stops it by that PID on exit,
# failure or Ctrl-C; the hog also ends by itself once this script is gone.
set -euo pipefail
cd "$(dirname "$0")/.."
busy=${SPEEDBENCH_TEST_BUSY:-0}
seeded=0
args=()
for a in "$@"; do
  case $a in
    --busy) busy=1 ;;  # ours, not pytest's
    --randomly-seed*|*no:randomly) seeded=1; args+=("$a") ;;
    *) args+=("$a") ;;
  esac
done
if [ "$seeded" = 0 ]; then
  seed=$(( (RANDOM << 15) | RANDOM ))
  echo "[test] random order: seed $seed (replay: bash scripts/test.sh -p randomly --randomly-seed=$seed)"
  args=(-p randomly --randomly-seed="$seed" ${args[@]+"${args[@]}"})
fi
t_start=$(date +%s.%N)
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
  # on a line of its own: triton's exit-time "nanobind: leaked ..." message ends without one
  awk -v n="$name" -v a="$t0" -v b="$(date +%s.%N)" -v rc="$rc" -v l="$(cut -d' ' -f1-3 /proc/loadavg)" \
    'BEGIN { printf "\n[test] %s tier: %.1f s wall (exit %d; load average 1/5/15 min: %s)\n", n, b - a, rc, l }'
  return "$rc"
}
echo "[test] lint: ruff and mypy"
.venv/bin/ruff check .  # the files [tool.ruff] include names
.venv/bin/mypy speedbench
hog=""
stop_hog() {
  if [ -n "$hog" ]; then
    kill "$hog" 2>/dev/null || true
    wait "$hog" 2>/dev/null || true
    echo "[test] CPU hog (pid $hog) stopped"
    hog=""
  fi
}
if [ "$busy" = 1 ]; then
  trap stop_hog EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # a shell loop holds one core; it checks that this script still lives, so a SIGKILL'd
  # script leaves no hog behind either
  sh -c 'while kill -0 "$1" 2>/dev/null; do :; done' hog $$ &
  hog=$!
  echo "[test] busy host: CPU hog (pid $hog) holds one core while the tiers run"
fi
slowest=(--durations=10 --durations-min=1)
tier unit tests/unit -q -n 2 "${slowest[@]}" ${args[@]+"${args[@]}"}
tier integration tests/integration -q -n "${SPEEDBENCH_TEST_WORKERS:-4}" --dist loadfile "${slowest[@]}" \
  ${args[@]+"${args[@]}"}
tier "end-to-end (real vLLM on the CPU)" tests/e2e -m vllm -q "${slowest[@]}" ${args[@]+"${args[@]}"}
awk -v a="$t_start" -v b="$(date +%s.%N)" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
  'BEGIN { printf "[test] all tiers passed: %.1f min in all, set-up included (load average now %s)\n", (b - a) / 60, l }'
