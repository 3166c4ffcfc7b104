"""Real nights: a training run's checkpoints compared night after night on real vLLM (CPU),
then read back by `dashboard`, `changes` and `compare --checkpoints` (docs/dashboard.md,
"Real nights").

Each night is one run of scenarios/cpu_checkpoints.yaml (baseline + EAGLE 3 after 150,
300, 450 and 600 training steps; step600 plays production) into one results folder:

- ``--nights`` ordinary nights, the first ``--slurm-nights`` of them as a Slurm matrix
  (`speedbench submit`: sbatch arm jobs, a gather, the dashboard job) on a one-node Slurm
  started here (tests/helpers/slurm_cluster.py), the others with the local executor;
- then ``--swap-nights`` nights on which production's weights are those of step 150: the
  arm keeps its name and its folder, as after a bad upload.

Production is served from a copy of its folder (OUT/store/production), so that the swap
changes nothing but the weights; every night gets the same ``--set``. Then prints: the
served AL and speedup order of the checkpoints against their offline order (Kendall tau,
per concurrency), the night-to-night spread, the pooled intervals, how many nights each
call needed, the regression `changes` found and its cause, and the dry-run's estimates of
what screening and stopping would cost against this fixed-count design. A headless
Chromium screenshot of the dashboard's first screen goes to OUT/dashboard.png.

    .venv/bin/python benchmarks/real_nights.py -o /tmp/real-nights            # ~45 min on 2 cores
    .venv/bin/python benchmarks/real_nights.py -o /tmp/real-nights --analyse  # read back only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCENARIO = ROOT / "scenarios" / "cpu_checkpoints.yaml"
CHECKPOINTS = ROOT / ".fixtures" / "tiny" / "checkpoints"
PRODUCTION, EARLY = "eagle3-step0600", "eagle3-step0150"
ARMS = ("step150", "step300", "step450", "step600")
SB = [sys.executable, "-m", "speedbench.cli"]


def sh(cmd: list[str], env: dict[str, str] | None = None, check: bool = False) -> subprocess.CompletedProcess:
    print("$", " ".join(cmd[2:] if cmd[:2] == SB[:2] else cmd), flush=True)
    done = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True)
    if check and done.returncode not in (0, 1):
        raise SystemExit(f"exit {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done


def prepare(out: Path) -> list[str]:
    """The store's production folder, and the --set every night gets."""
    sh(SB + ["fixtures", "tiny", str(ROOT / ".fixtures" / "tiny")], check=True)
    prod = out / "store" / "production"
    if not prod.exists():
        shutil.copytree(CHECKPOINTS / PRODUCTION, prod)
    return ["--set", f"arms.step600.speculative_config.model={prod}"]


def swap(out: Path) -> None:
    """A bad upload: step 150's weights in production's folder, config and name unchanged."""
    shutil.copyfile(CHECKPOINTS / EARLY / "model.safetensors", out / "store" / "production" / "model.safetensors")


def local_night(results: Path, sets: list[str]) -> int:
    return sh(SB + ["run", str(SCENARIO), "-o", str(results), *sets]).returncode


def slurm_night(out: Path, results: Path, sets: list[str], env: dict[str, str]) -> int:
    """One night as a matrix: `submit` queues the arm jobs (one at a time: each takes both
    cores), the gather and the dashboard job; then wait until Slurm has none of them."""
    matrix = out / "matrix.yaml"
    cells = [s for s in sets if s != "--set"] + ["executor.slurm.cpus_per_task=2", "executor.slurm.time=01:00:00"]
    matrix.write_text(json.dumps({"results": str(results), "dashboard": str(out / "slurm-site"),
                                  "scenarios": [str(SCENARIO)], "checkpoints": [{"name": "nightly", "set": []}],
                                  "set": cells}))
    done = sh(SB + ["submit", str(matrix), "--executor", "slurm"], env=env)
    print(done.stdout[-1500:], done.stderr[-1500:])
    while True:
        q = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], env=env, text=True, capture_output=True).stdout
        if not q.strip():
            return done.returncode
        time.sleep(10)


def run_nights(a: argparse.Namespace) -> None:
    out, results = a.output, a.output / "results"
    # the rehearsal's overrides first: one that replaces `arms` must not undo the store's path
    sets = [x for kv in a.set for x in ("--set", kv)] + prepare(out)
    # Slurm nights first: the night before the swap then ran as the swap nights do (locally),
    # so the swap's only provenance change is the weights (a Slurm night's resolved scenario
    # names its executor)
    plan = ["slurm"] * a.slurm_nights + ["local"] * (a.nights - a.slurm_nights) + ["swap"] * a.swap_nights
    cluster = None
    try:
        for i, kind in enumerate(plan, 1):
            t0 = time.monotonic()
            if kind == "swap" and i == a.nights + 1:
                swap(out)
            if kind == "slurm":
                if cluster is None:
                    from tests.helpers.slurm_cluster import Cluster

                    cluster = Cluster(out / "slurm-cluster", cpus=2, gpus=0)
                    cluster.start()
                rc = slurm_night(out, results, sets, {**os.environ, **cluster.env})
            else:
                rc = local_night(results, sets)
            print(f"night {i} ({kind}): exit {rc} in {time.monotonic() - t0:.0f} s", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, default=Path("/tmp/real-nights"))
    ap.add_argument("--nights", type=int, default=5, help="ordinary nights (default 5: the detector's baseline)")
    ap.add_argument("--slurm-nights", type=int, default=2, help="of the ordinary nights, the first ones on Slurm")
    ap.add_argument("--swap-nights", type=int, default=2, help="nights with production's weights swapped")
    ap.add_argument("--analyse", action="store_true", help="only read back an existing OUT")
    ap.add_argument("--set", action="append", default=[], metavar="K=V",
                    help="one more override for every night (a quick rehearsal: workload.num_prompts=4)")
    a = ap.parse_args(argv)
    a.output = a.output.resolve()
    if not a.analyse:
        run_nights(a)
    from benchmarks.real_nights_report import analyse

    analyse(a.output, a.nights)
    return 0


if __name__ == "__main__":
    sys.exit(main())
