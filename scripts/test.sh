#!/usr/bin/env bash
# All the tests: set up, lint, then three tiers, each with its wall time and its 10 slowest
# tests:
#   unit         tests/unit/<package>/  pure and fast; 2 workers (pytest-xdist), one per core
#   integration  tests/integration/     subprocesses, Slurm, Chromium, fake servers; 4 workers, since
#                                       most of it waits: each module stays on one worker (--dist loadfile;
#                                       tests/integration/conftest.py)
#   e2e          tests/e2e/             a real vLLM on the CPU, one server at a time (the `vllm`
#                                       marker; tests/conftest.py keeps the marker and the folder the same)
# The e2e tier is the longest and mostly waits on vLLM's single-threaded start-up, so it runs
# beside the others: it starts first, in the background, its output going to
# .test-logs/e2e.log; lint, unit and integration run in the foreground meanwhile; then the
# e2e log is shown from its start and followed to its end. A failing tier stops the script,
# and stops the e2e tier too (SIGINT to its process group: pytest tears its fixtures down
# and speedbench stops its servers, as on Ctrl-C).
# SPEEDBENCH_TEST_WORKERS=N sets the integration tier's workers (0: none, in this process).
# Lint: ruff on speedbench/, tests/ and scripts/, mypy on speedbench/ (pyproject.toml).
# Usage: bash scripts/test.sh [--busy] [extra pytest args, given to every tier]
#
# Random order (pytest-randomly): every tier runs in a random order drawn from one seed,
# printed first ("[test] random order: seed N") and by each tier. To replay a failing order:
#   bash scripts/test.sh -p randomly --randomly-seed=N                       every tier
#   .venv/bin/python -m pytest tests/<tier> -p randomly --randomly-seed=N     one tier
# (the same seed over the same test paths gives the same order); -p no:randomly runs the
# files' own order.
#
# Temporary files: the tiers run with TMPDIR set to one folder of their own,
# /tmp/speedbench-tests.XXXXXX, and each tier its pytest --basetemp inside it (tiers run at
# the same time, and pytest empties its --basetemp when it starts); the folder is removed
# on exit, whatever the outcome. vLLM's files follow TMPDIR (each server's own folder:
# engine/local.py). After the tiers pass, scripts/tmp_check.py fails the run if the suite
# still left anything of its own directly in /tmp. The one entry kept there on purpose is
# /tmp/speedbench-vllm.lock (tests/conftest.py): a fixed path that concurrent suites in
# other checkouts and the benchmarks all see, so they never start two vLLM servers at once.
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
  ${niced[@]+"${niced[@]}"} .venv/bin/python -m pytest "$@" || rc=$?
  # on a line of its own: triton's exit-time "nanobind: leaked ..." message ends without one
  awk -v n="$name" -v a="$t0" -v b="$(date +%s.%N)" -v rc="$rc" -v l="$(cut -d' ' -f1-3 /proc/loadavg)" \
    'BEGIN { printf "\n[test] %s tier: %.1f s wall (exit %d; load average 1/5/15 min: %s)\n", n, b - a, rc, l }'
  return "$rc"
}
# what of the suite's kind is in /tmp before it starts (its own folder not yet made)
tmp_before=$(.venv/bin/python scripts/tmp_check.py snapshot)
suite_tmp=$(mktemp -d /tmp/speedbench-tests.XXXXXX)
# traversable as /tmp is (the Slurm tests' munge and job users); what tempfile and pytest
# make inside is private to this user all the same
chmod 755 "$suite_tmp"
export TMPDIR=$suite_tmp
hog=""
e2e=""
stop_hog() {
  if [ -n "$hog" ]; then
    kill "$hog" 2>/dev/null || true
    wait "$hog" 2>/dev/null || true
    echo "[test] CPU hog (pid $hog) stopped"
    hog=""
  fi
}
stop_e2e() {  # the e2e tier's process group: SIGINT first (teardown), SIGKILL after 90 s
  if [ -n "$e2e" ] && kill -0 "$e2e" 2>/dev/null; then
    echo "[test] stopping the end-to-end tier (process group $e2e); its log: $e2e_log"
    kill -INT -- "-$e2e" 2>/dev/null || true
    for _ in $(seq 1 90); do kill -0 "$e2e" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$e2e" 2>/dev/null || true
  fi
  e2e=""
}
cleanup() { stop_e2e; stop_hog; rm -rf "$suite_tmp"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ "$busy" = 1 ]; then
  # a shell loop holds one core; it checks that this script still lives, so a SIGKILL'd
  # script leaves no hog behind either
  sh -c 'while kill -0 "$1" 2>/dev/null; do :; done' hog $$ &
  hog=$!
  echo "[test] busy host: CPU hog (pid $hog) holds one core while the tiers run"
fi
slowest=(--durations=10 --durations-min=1)
mkdir -p .test-logs
e2e_log=.test-logs/e2e.log
set -m  # the background tier gets a process group of its own, so it can be stopped whole
tier "end-to-end (real vLLM on the CPU)" tests/e2e -m vllm -q "${slowest[@]}" --basetemp "$suite_tmp/e2e" \
  ${args[@]+"${args[@]}"} \
  > "$e2e_log" 2>&1 < /dev/null &
e2e=$!
set +m
echo "[test] end-to-end tier started in the background (process group $e2e); its output: $e2e_log"
# The e2e tier is the critical path and mostly one core's work (vLLM's imports, one process
# after another), so the tiers beside it yield to it. Lint and unit are pure CPU work with no
# clock in them: on a quiet host they take only what the e2e tier leaves (nice 19; it uses
# about 0.7 of the 2 cores on average). On a busy host the hog already takes a core, and
# at nice 19 they would get almost nothing and outlast the e2e tier, so there they yield
# less (nice 5). The integration tier runs fake servers whose timing its tests read: nice 5
# in both. (The Ctrl-C, watchdog and start-up death tests took 81, 73 and 60 s beside the
# tiers at nice 5, and 54, 44 and 43 s alone, with scikit-learn gone: scripts/setup.sh.)
niced=(nice -n 19)
[ "$busy" = 1 ] && niced=(nice -n 5)
echo "[test] lint: ruff and mypy"
"${niced[@]}" .venv/bin/ruff check .  # the files [tool.ruff] include names
"${niced[@]}" .venv/bin/mypy speedbench
tier unit tests/unit -q -n 2 "${slowest[@]}" --basetemp "$suite_tmp/unit" ${args[@]+"${args[@]}"}
niced=(nice -n 5)
tier integration tests/integration -q -n "${SPEEDBENCH_TEST_WORKERS:-4}" --dist loadfile "${slowest[@]}" \
  --basetemp "$suite_tmp/integration" ${args[@]+"${args[@]}"}
echo "[test] end-to-end tier, from its start (still running: followed to its end)"
tail -n +1 -f --pid="$e2e" "$e2e_log"
e2e_rc=0
wait "$e2e" || e2e_rc=$?
e2e=""
[ "$e2e_rc" = 0 ] || exit "$e2e_rc"
rm -rf "$suite_tmp"
if ! printf '%s\n' "$tmp_before" | .venv/bin/python scripts/tmp_check.py compare; then
  echo "[test] the suite left files in /tmp (above): a test or a server writes there directly"
  exit 1
fi
awk -v a="$t_start" -v b="$(date +%s.%N)" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
  'BEGIN { printf "[test] all tiers passed: %.1f min in all, set-up included (load average now %s)\n", (b - a) / 60, l }'
