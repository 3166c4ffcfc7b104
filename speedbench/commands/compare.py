"""``speedbench compare RUN...``: runs side by side, or two arms of one run (--arms A B)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from rich.console import Console

from speedbench.commands import warn_damaged
from speedbench.errors import UsageError
from speedbench.results import atomic_write
from speedbench.results.loader import load_run

HELP = """\
Compare runs side by side: speedup per concurrency for every speculative arm (matched
by name across runs), AL per category and per-position acceptance. The first run is
the reference; for each other run the difference in speedup and in per-user TPS is
given with a 95% bootstrap interval computed from the stored per-request records
(runs resampled independently), and called significant when it excludes zero. Without
records, non-overlapping 95% CIs count as significant.

With --arms A B, compare two arms within each run (e.g. eagle3 vs eagle3.1): a paired
bootstrap over the prompts both arms saw.

With --checkpoints RESULTS_DIR, compare checkpoints across nights: every run folder under
RESULTS_DIR is a night of its scenario; each checkpoint's speedup (per concurrency) and AL
(pooled and per category) are pooled over the nights it ran, and compared with the
reference checkpoint (--reference: an arm name, a draft path or a full checkpoint name;
default the first checkpoint seen) night by night: the ratio's 95% interval is a t
interval over the nights both ran, so night-to-night variation is in it. Calls (better,
worse, no difference; insufficient nights below 3) are controlled over every checkpoint x
concurrency x category comparison with Benjamini-Hochberg at q=0.05. See docs/dashboard.md.
"""


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare runs, or two arms of a run, with significance tests",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="*", metavar="RUN", help="run folders; the first is the reference")
    p.add_argument("--arms", nargs=2, metavar=("A", "B"), help="compare arm B against arm A within each run")
    p.add_argument("--checkpoints", metavar="RESULTS_DIR",
                   help="compare checkpoints across the nights (run folders) under RESULTS_DIR")
    p.add_argument("--reference", metavar="NAME", help="with --checkpoints: the reference checkpoint (arm, draft "
                   "path or full name; default the scenario's checkpoint_reference, else the first seen)")
    p.add_argument("--json", action="store_true", help="with --checkpoints: print JSON")
    p.add_argument("-o", "--output", "--html", dest="html", metavar="OUT",
                   help="also write a self-contained HTML comparison to this file (--html: the old spelling)")
    p.set_defaults(func=run)


def run(args) -> int:
    # matplotlib (its HTML and the dashboard have plots): loaded when a comparison runs, not at `speedbench --help`
    from speedbench.report import checkpoints, compare, dashboard

    console = Console(highlight=False)
    if args.checkpoints:
        return _checkpoints(args, console, checkpoints, dashboard.scan)
    if args.reference or args.json:
        raise UsageError("--reference and --json go with --checkpoints RESULTS_DIR")
    if not args.runs:
        raise UsageError("compare needs run folders, or --checkpoints RESULTS_DIR")
    runs = [load_run(p) for p in args.runs]
    warn_damaged(runs)
    if args.arms:
        comparisons = [compare.compare_arms(r, *args.arms) for r in runs]
    else:
        if len(runs) < 2:
            raise UsageError("compare needs two or more runs, or --arms A B to compare two arms of one run")
        comparisons = [compare.compare_runs(runs)]
    for cmp in comparisons:
        compare.print_comparison(cmp, console)
    if args.html:
        atomic_write(Path(args.html), compare.render_comparison_html(compare.merge(comparisons)))
        console.print(f"wrote {args.html}", markup=False, soft_wrap=True)
    return 0


def _checkpoints(args, console: Console, checkpoints: ModuleType, scan: Callable) -> int:
    """``checkpoints``: report.checkpoints; ``scan``: report.dashboard.scan (both loaded by run())."""
    if args.runs or args.arms or args.html:
        raise UsageError("--checkpoints RESULTS_DIR takes no run folders, --arms or --html")
    results = Path(args.checkpoints)
    if not results.is_dir():
        raise UsageError(f"results folder not found: {results}")
    runs, problems = scan(results.resolve())
    for p in problems:
        console.print(f"warning: {p}", markup=False, soft_wrap=True)
    by_scenario: dict = {}
    for sr in runs:
        by_scenario.setdefault(sr.run.scenario_name, []).append(sr.run)
    found = checkpoints.compare_all(by_scenario, args.reference)
    if args.json:
        out = json.dumps(checkpoints.as_json(found), indent=1, ensure_ascii=False)
    else:
        out = "\n".join(checkpoints.text_lines(found) or ["no speculative arms under " + str(results)])
    console.print(out, markup=False, soft_wrap=True)
    return 0
