"""``speedbench gather RUN``: summary, reports and gates of a run whose arms ran as jobs."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from speedbench.report.gate import evaluate_gates, exit_code, junit_xml, load_gates
from speedbench.report.terminal import print_summary
from speedbench.results import atomic_write, load_run
from speedbench.results.run import open_run_dir
from speedbench.results.mlflow_export import track_finished_run
from speedbench.run.plan import build_plan
from speedbench.scenario import validate_data


def register(sub) -> None:
    p = sub.add_parser(
        "gather", help="summarise a run folder written by cluster jobs; exit code of its gates",
        description="Merge every job's records and points in RUN, write summary.json/csv, Parquet and the "
        "reports, and check the scenario's gates. Runs as the dependent job of a Slurm submission, or by hand. "
        "Exit 0 all arms finished and all gates pass; 1 a gate failed or a point is unfinished or failed; "
        "2 unreadable folder.",
    )
    p.add_argument("run", help="run folder")
    p.add_argument("--junit", metavar="FILE", help="write the gate results as JUnit XML")
    p.set_defaults(func=run)


def run(args) -> int:
    from speedbench.report.render import write_report  # matplotlib: not at `speedbench --help`

    t0 = time.monotonic()
    console = Console(highlight=False)
    rd = open_run_dir(args.run)
    # pandas: only when a gather runs, not at `speedbench --help`
    from speedbench.results.summary import summarize_run_dir
    summary = summarize_run_dir(rd)
    write_report(rd)
    print_summary(summary, console, run_dir=rd)
    sc = validate_data(rd.load_scenario(), str(rd.scenario_path))
    plan, rounds = build_plan(sc), rd.finished_rounds()
    unfinished = plan.unfinished(rounds)
    code = 0
    if unfinished:
        code = 1
        console.print(f"[red]{len(unfinished)} points unfinished or failed[/red]: "
                      + escape(", ".join(k.label for k in unfinished[:8])) + (" ..." if len(unfinished) > 8 else ""))
        console.print(f"  `speedbench status {rd.path}` shows the jobs; `speedbench run --resume {rd.path}` "
                      "submits the unfinished arms again", soft_wrap=True)  # commands to paste: never wrapped
    if sc.gates:
        run = load_run(rd.path)
        gates = load_gates(run)
        results = evaluate_gates(run, gates)
        for r in results:
            console.print(f"gate {r.status.upper()}: {r.gate.metric} {r.bounds} {r.where} {r.message}",
                          markup=False, soft_wrap=True)
        if args.junit:
            atomic_write(Path(args.junit), junit_xml(results, run, time.monotonic() - t0))
        code = max(code, exit_code(results))

    track_finished_run(rd.path, sc, lambda line: console.print(line, markup=False, soft_wrap=True))
    console.print(f"gathered: {rd.path}", markup=False, soft_wrap=True)
    return code
