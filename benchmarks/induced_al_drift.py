"""Real AL drift within a run, on the CPU with the tiny fixtures, and whether the
within-run warning (analysis/al_trend.py) sees it.

The CPU runs' acceptance does not drift, so the warning had only met simulated drift.
Here two arms of one `speedbench run` serve the trained EAGLE 3 draft through
benchmarks/draft_swap_server.py:

- ``swapped``: after the c=1 point (its warmup and measured requests), the server swaps
  its draft for the untrained one, so the same prompts sent again at c=4 are accepted
  far less: a server that lost acceptance mid-life;
- ``steady``: the same relay, never swapped: the control, which must not be called a drift.

Usage (one vLLM server at a time: it takes the project's vLLM lock):

    .venv/bin/python benchmarks/induced_al_drift.py [--save tests/data/induced_al_drift] [RUN ...]

RUN: other run folders with records (the main job's) to check for false warnings.
"""

from __future__ import annotations

import argparse
import fcntl
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from speedbench.analysis.al_trend import al_trends  # noqa: E402
from speedbench.fixtures.assemble import ensure_tiny  # noqa: E402
from speedbench.results import RunDir  # noqa: E402

LOCK = "/tmp/speedbench-vllm.lock"  # the lock the test suite's real-vLLM tier holds
PROMPTS, WARMUP = 16, 2


def scenario(fixtures: Path) -> dict:
    eagle3, untrained = str(fixtures / "eagle3"), str(fixtures / "eagle-random")
    spec = {"method": "eagle3", "model": eagle3, "num_speculative_tokens": 3}
    return {
        "name": "induced_al_drift",
        "description": "trained EAGLE 3 through a relay; 'swapped' swaps in the untrained draft after its c=1 point",
        "server": {
            "launcher": "local", "model": str(fixtures / "target"), "model_arg": "flag",
            "command": [sys.executable, str(REPO / "benchmarks" / "draft_swap_server.py")],
            "args": {"dtype": "float16", "enforce-eager": True, "max-model-len": 1024, "max-num-seqs": 16},
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "0"},
            "ready_timeout_s": 400,
        },
        "arms": [
            {"name": "steady", "speculative_config": spec,
             "args": {"swap-draft": eagle3, "swap-after": 10**6}},
            # its c=1 point's warmup and measured requests are served by the trained draft
            {"name": "swapped", "speculative_config": spec,
             "args": {"swap-draft": untrained, "swap-after": WARMUP + PROMPTS}},
        ],
        "workload": {"source": "sample", "categories": ["coding"], "num_prompts": PROMPTS, "temperature": 0,
                     "max_tokens": 64, "warmup": WARMUP, "request_timeout_s": 300},
        "concurrency": [1, 4],
        "repeats": 1,
    }


def run(out: Path) -> Path:
    fixtures = ensure_tiny(REPO / ".fixtures" / "tiny")
    work = Path(tempfile.mkdtemp(prefix="sb-drift-"))
    path = work / "induced_al_drift.yaml"
    path.write_text(yaml.safe_dump(scenario(fixtures), sort_keys=False))
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run([sys.executable, "-m", "speedbench.cli", "run", str(path), "-o", str(out),
                               "--skip-doctor"], cwd=REPO)
    shutil.rmtree(work)
    if proc.returncode != 0:
        raise SystemExit(f"speedbench run exited {proc.returncode}")
    (folder,) = [p for p in (out / "induced_al_drift").iterdir() if p.is_dir()]
    return folder


def report(folder: Path) -> None:
    records = RunDir.open(folder).load_records()
    trends = al_trends(records)
    print(f"{folder}: {len(trends)} arm(s) checked")
    for t in trends:
        verdict = "DRIFT" if t.significant else "no drift"
        print(f"  {t.arm:<24} {verdict:<8} n={t.n:<3} AL {t.al:.2f}  change {100 * t.change:+.1f}% over "
              f"{t.span_min:.1f} min  slope {100 * t.slope:+.2f}%/min [{100 * t.low:+.2f}, {100 * t.high:+.2f}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", type=Path, help="copy the run folder here (without server logs)")
    ap.add_argument("runs", nargs="*", type=Path, help="other run folders to check for false warnings")
    args = ap.parse_args()
    folder = run(Path(tempfile.mkdtemp(prefix="sb-drift-out-")))
    report(folder)
    for other in args.runs:
        report(other)
    if args.save:
        shutil.rmtree(args.save, ignore_errors=True)
        shutil.copytree(folder, args.save, ignore=shutil.ignore_patterns("logs", "report.html", "*.parquet"))
        print(f"saved to {args.save}")


if __name__ == "__main__":
    main()
