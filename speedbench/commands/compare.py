"""``speedbench compare RUN...``: runs side by side, or two arms of one run (--arms A B)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from speedbench.commands import warn_damaged
from speedbench.errors import UsageError
from speedbench.results import atomic_write, load_run

HELP = """\
Compare runs side by side: speedup per concurrency for every speculative arm (matched
by name across runs), AL per category and per-position acceptance. The first run is
the reference; for each other run the difference in speedup and in per-user TPS is
given with a 95% bootstrap interval computed from the stored per-request records
(runs resampled independently), and called significant when it excludes zero. Without
records, non-overlapping 95% CIs count as significant.

With --arms A B, compare two arms within each run (e.g. eagle3 vs eagle3.1): a paired
bootstrap over the prompts both arms saw.
"""


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare runs, or two arms of a run, with significance tests",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders; the first is the reference")
    p.add_argument("--arms", nargs=2, metavar=("A", "B"), help="compare arm B against arm A within each run")
    p.add_argument("-o", "--output", "--html", dest="html", metavar="OUT",
                   help="also write a self-contained HTML comparison to this file (--html: the old spelling)")
    p.set_defaults(func=run)


def run(args) -> int:
    # matplotlib (its HTML has plots): loaded when a comparison runs, not at `speedbench --help`
    from speedbench.report.compare import (compare_arms, compare_runs, merge, print_comparison,
                                           render_comparison_html)

    runs = [load_run(p) for p in args.runs]
    warn_damaged(runs)
    console = Console(highlight=False)
    if args.arms:
        comparisons = [compare_arms(r, *args.arms) for r in runs]
    else:
        if len(runs) < 2:
            raise UsageError("compare needs two or more runs, or --arms A B to compare two arms of one run")
        comparisons = [compare_runs(runs)]
    for cmp in comparisons:
        print_comparison(cmp, console)
    if args.html:
        atomic_write(Path(args.html), render_comparison_html(merge(comparisons)))
        console.print(f"wrote {args.html}", markup=False, soft_wrap=True)
    return 0
