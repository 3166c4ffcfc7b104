"""A load change between arms, on purpose: the evidence behind the confounding rule.

Runs the README's four-minute command (scenarios/cpu_tiny.yaml, one round, no A/A twin)
and, once the baseline arm's last point is marked in points.json, starts CPU hogs (busy
Python loops, one per --hogs) that run until the run ends: the speculative arms are then
measured under a load the baseline never saw. Without --hogs it is the quiet run. Prints,
per point, each arm's conditions, the headline speedup, and whether speedbench called the
comparison confounded; the run folder keeps everything (docs/metrics.md, "Conditions").

    .venv/bin/python benchmarks/confound_hog.py --hogs 1 -o /tmp/hog-runs
    .venv/bin/python benchmarks/confound_hog.py --hogs 0 -o /tmp/quiet-runs

Every hog is stopped by its PID when the run ends, fails or is interrupted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a busy loop for `duty` of every 100 ms (1.0: all the time), for at most an hour
HOG = ("import sys, time\nduty = float(sys.argv[1])\nend = time.time() + 3600\nwhile time.time() < end:\n"
       "    t = time.time()\n    while time.time() - t < 0.1 * duty:\n        pass\n"
       "    time.sleep(0.1 * (1 - duty))\n")


def _baseline_done(results: Path, last_c: int) -> bool:
    for pts in results.glob("*/*/points*.json"):
        try:
            marks = json.loads(pts.read_text())
        except (OSError, ValueError):
            continue
        if any(p.get("arm") == "baseline" and p.get("concurrency") == last_c for p in marks):
            return True
    return False


def _report(results: Path) -> None:
    summary = next(results.glob("*/*/summary.json"), None)
    if summary is None:
        print("no summary.json: the run did not finish")
        return
    s = json.loads(summary.read_text())
    print(f"run folder: {summary.parent}")
    confounded = {(e["arm"], e["concurrency"]): e for e in s.get("conditions", {}).get("points", [])}
    for r in s["rows"]:
        e = confounded.get((r["arm"], r["concurrency"])) or {}
        print(f"{r['arm']:>17} c={r['concurrency']:<3} speedup {r.get('speedup_headline_mean') or float('nan'):.2f}x "
              f"[{r.get('speedup_headline_ci_low') or float('nan'):.2f}, "
              f"{r.get('speedup_headline_ci_high') or float('nan'):.2f}] ({r.get('speedup_headline_clock')})"
              f" confounded={e.get('confounded')}\n      arm: {e.get('arm_conditions')}\n"
              f"      baseline: {e.get('baseline_conditions')}")
    for f in s.get("controls", {}).get("failed", []):
        print("controls failed:", f["why"])


def _start(args: argparse.Namespace) -> list[subprocess.Popen]:
    # each hog in a session of its own, as an independent job is: with the kernel's autogroup
    # scheduling, CPU is shared between sessions first, so hogs sharing one session would
    # take one session's share between them (measured: two such hogs left vLLM 1.85 cores)
    hogs = [subprocess.Popen([sys.executable, "-c", HOG, str(args.duty)], start_new_session=True)
            for _ in range(args.hogs)]
    print(f"[confound_hog] {args.hogs} hog(s) started, pids {[h.pid for h in hogs]}", flush=True)
    return hogs


def _stop(hogs: list[subprocess.Popen]) -> None:
    """Stop every hog by its PID (and wait for it), once; the list is emptied."""
    for h in hogs:
        h.kill()
        h.wait()
        print(f"[confound_hog] hog {h.pid} stopped", flush=True)
    hogs.clear()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hogs", type=int, default=1, help="busy loops started after the baseline (0: quiet run)")
    ap.add_argument("-o", "--output", type=Path, required=True, help="results folder (must not exist)")
    ap.add_argument("--phase", choices=("after", "baseline"), default="after",
                    help="after: hogs from the baseline's end to the run's; baseline: hogs while the baseline runs "
                         "only (the speculative arms then run after the load eased, as in issue 54)")
    ap.add_argument("--duty", type=float, default=1.0, help="each hog's busy share of every 100 ms")
    ap.add_argument("--aa", action="store_true",
                    help="the baseline and its A/A twin only: the twin runs under the hogs, so its 'speedup' is "
                         "what the load change alone does to a ratio")
    ap.add_argument("--set", action="append", default=[], help="more --set overrides for the run")
    args = ap.parse_args()
    sets = ["repeats=1", "aa_check=false"] if not args.aa else [
        "repeats=1", "aa_check=true", "arms=[{name: baseline}]", "gates=[]"]
    argv = [str(ROOT / ".venv/bin/speedbench"), "run", str(ROOT / "scenarios/cpu_tiny.yaml"),
            "--output", str(args.output)] + [x for s in sets + args.set for x in ("--set", s)]
    run = subprocess.Popen(argv, cwd=ROOT)
    hogs: list[subprocess.Popen] = []
    started = False
    try:
        if args.phase == "baseline":
            hogs, started = _start(args), True
        while run.poll() is None:
            done = _baseline_done(args.output, 16)
            if args.phase == "after" and args.hogs and not started and done:
                hogs, started = _start(args), True
            if args.phase == "baseline" and hogs and done:
                _stop(hogs)
            time.sleep(1.0)
    finally:
        _stop(hogs)
        if run.poll() is None:
            run.terminate()
            run.wait()
    _report(args.output)
    return run.returncode or 0


if __name__ == "__main__":
    raise SystemExit(main())
