"""``speedbench gate RUN``: check a run against CI gates; exit 1 on a regression."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from speedbench.report.fit import print_table
from speedbench.report.headlines import arm_headlines
from speedbench.report.gate import GateResult, evaluate_gates, exit_code, load_gates, nothing_checked
from speedbench.report.gate_files import junit_xml, summary_markdown
from speedbench.errors import UsageError
from speedbench.results import atomic_write
from speedbench.results.loader import load_run
from speedbench.results.run import Run
from speedbench.results.files import output_error

HELP = """\
Check a run against gates from its scenario (`gates:`) or from --gates FILE (a YAML
list of the same shape). Absolute gates bound the point estimate (min/max). Relative
gates (max_regression) need --baseline-run and fail only when the value dropped by more
than max_regression AND the 95% confidence interval says the drop is real (with
repeats, that interval covers fresh server starts too); with --history RESULTS_DIR and
at least 3 earlier runs of the scenario, the drop must also exceed 2 night-to-night
standard deviations. See docs/gates.md. A gate that refers to a missing or failed arm fails,
and every gate fails when the records no longer match their rounds or the run folder lost
points.json, its records or its scenario (`speedbench verify`). When every check is skipped
(relative gates without a usable --baseline-run) nothing was checked: exit 2, saying why.
A gates file is read as a scenario is: errors give file:line, the closest key, metric or arm.
"""


def register(sub) -> None:
    p = sub.add_parser("gate", help="fail CI when a run misses its gates or regressed",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="run folder to check")
    p.add_argument("--gates", metavar="FILE", help="YAML list of gates (default: the scenario's gates)")
    p.add_argument("--baseline-run", metavar="RUN", help="earlier run folder for relative (max_regression) gates")
    p.add_argument("--history", metavar="RESULTS_DIR",
                   help="earlier runs (a results folder) whose night-to-night spread a regression must exceed")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML (one testcase per gate and row)")
    p.add_argument("--summary-md", metavar="FILE",
                   help="write a markdown summary (also appended to $GITHUB_STEP_SUMMARY when set)")
    p.set_defaults(func=run)


def _append_step_summary(path: Path, md: str) -> None:
    """GitHub's step summary is appended to, not replaced; a write error there is exit 3 too."""
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(md + "\n")
    except OSError as e:
        raise output_error(e, path) from None


def run(args) -> int:
    t0 = time.monotonic()
    current = load_run(args.run)
    baseline = load_run(args.baseline_run) if args.baseline_run else None
    gates = load_gates(current, args.gates)
    history = None
    if args.history:
        from speedbench.report.dashboard import scan  # matplotlib: not at `speedbench --help`

        history = [sr.run for sr in scan(Path(args.history), required=True)[0]]
    results = evaluate_gates(current, gates, baseline, history)

    console = Console(highlight=False)
    code = exit_code(results)
    unchecked = nothing_checked(results, baseline)
    n_fail = sum(r.status == "fail" for r in results)
    verdict = ("[bold red]gate FAILED[/]" if code else "[bold red]NOTHING CHECKED[/]" if unchecked
               else "[bold green]gates passed[/]",
               f"({len(results)} checks, {n_fail} failed, {sum(r.status == 'skip' for r in results)} skipped)")
    console.print(*verdict)  # the verdict first, each arm's headline, the gates; the verdict again last
    for line in arm_headlines(current, results):
        console.print(line, markup=False, soft_wrap=True)
    print_table(console, _gates_table(current, results))
    console.print(*verdict)

    if args.junit:
        atomic_write(Path(args.junit), junit_xml(results, current, time.monotonic() - t0))
    md = summary_markdown(results, current, baseline)
    if args.summary_md:
        atomic_write(Path(args.summary_md), md)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        _append_step_summary(Path(step_summary), md)
    if unchecked:  # after the files: CI keeps the skipped testcases that say why
        raise UsageError(unchecked)
    return code


def _gates_table(current: Run, results: list[GateResult]) -> Table:
    """One row per gate checked: its result, metric, rule, where, value and why."""
    table = Table(title=f"gates for {escape(current.scenario_name)} {escape(current.run_id)}", title_justify="left")
    for col in ("result", "metric", "rule", "where", "value", "details"):
        table.add_column(col, overflow="fold")
    style = {"pass": "green", "fail": "bold red", "skip": "yellow"}
    for r in results:
        value = "–" if r.value != r.value else f"{r.value:.4g}"
        table.add_row(f"[{style[r.status]}]{r.status.upper()}[/]", r.gate.metric, escape(r.bounds), escape(r.where),
                      value, escape(r.message))
    return table
