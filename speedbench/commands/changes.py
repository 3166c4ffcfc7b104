"""``speedbench changes RESULTS_DIR``: the dashboard's verdicts for a terminal, a CI job
or an alert hook; exit 1 for an open, unacknowledged regression (whatever its age)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from rich.console import Console

from speedbench.errors import UsageError
from speedbench.results import atomic_write

HELP = """\
Judge every nightly series under RESULTS_DIR (speedup and per-user TPS at each
concurrency, AL pooled and per category, per-position acceptance; per scenario and arm)
with the dashboard's detector: change points over nights, each checked against the
night-to-night noise of the nights before it, the nights' own 95% intervals and the A/A
noise floor. A change held for 2 or more nights is a regression or an improvement; one
seen on the last night only is suspicious (never merged into a longer change). Each
change names what else differed in the provenance of the nights on either side. Only
changes that began on or after --since (default: within the last 7 runs of the scenario)
are listed as news.

Open regressions (called and not recovered, whatever their age) are listed first. One
can be acknowledged with a reason in RESULTS_DIR/acknowledged.yaml (entries with series,
since, reason; scenario optional). Exit 1 for an open, unacknowledged regression (and,
with --strict, for a suspicious last night), 0 otherwise. See docs/dashboard.md.
"""


def register(sub) -> None:
    p = sub.add_parser("changes", help="what changed over the nights, is it real, and why (exit 1: open regression)",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results_dir", metavar="RESULTS_DIR", help="folder holding run folders (e.g. results)")
    p.add_argument("--since", metavar="DATE", help="only changes that began on or after DATE (YYYY-MM-DD, UTC)")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON (every series, changes first)")
    p.add_argument("--strict", action="store_true", help="exit 1 for a suspicious last night too")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the output (text or JSON) to FILE")
    p.set_defaults(func=run)


def _since(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError as e:
        raise UsageError(f"--since: not a date (YYYY-MM-DD): {text!r}") from e
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def run(args) -> int:
    # function-local: the dashboard's renderers load matplotlib; only when this command
    # runs, not at `speedbench --help`
    from speedbench.report import dashboard, verdicts

    console = Console(highlight=False)
    vs, problems = dashboard.results_verdicts(args.results_dir, _since(args.since))
    for p in problems:
        console.print(f"warning: {p}", markup=False, soft_wrap=True)
    if args.json:
        out = json.dumps(verdicts.as_json(vs), indent=1, ensure_ascii=False) + "\n"
    else:
        out = "\n".join(verdicts.text_lines(vs) or ["no nightly series to judge"]) + "\n"
    console.print(out, markup=False, soft_wrap=True, end="")
    if args.output:
        atomic_write(Path(args.output), out)
    return verdicts.exit_code(vs, args.strict)
