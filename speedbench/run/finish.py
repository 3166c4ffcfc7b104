"""The end of every run: summary, reports, gates and MLflow.

One function for both places a run can end: in the process that ran its arms
(run/session.py) and in the gather of a run whose arms ran as cluster jobs
(executors/slurm/gathering.py). So a scenario's gates are checked, and decide the exit
code, the same way wherever it ran.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Protocol

from rich.console import Console
from rich.text import Text

from speedbench.errors import SpeedbenchError, UsageError
from speedbench.metrics.table import Requests
from speedbench.report.gate import GateResult, default_gates, evaluate_gates, exit_code, load_gates
from speedbench.report.gate_files import junit_xml
from speedbench.report.model import Report, build_report
from speedbench.report.render import write_report
from speedbench.report.terminal import print_report
from speedbench.report.wrap import print_wrapped
from speedbench.results import Run, RunDir, atomic_write
from speedbench.results.loader import load_run
from speedbench.results.run import RunEngine
from speedbench.results.mlflow_export import track_finished_run
from speedbench.results.summary import summarize_run_dir
from speedbench.scenario import Scenario


class Finish(Protocol):
    """What the end of a run tells its user (run.progress.Progress says it all, too)."""

    def summary(self, report: Report) -> None: ...
    def results(self, path: Path) -> None: ...
    def gates(self, results: list[GateResult]) -> None: ...
    def tracking(self, line: str) -> None: ...


class ConsoleFinish:
    """The end of a run on a rich console. ``every_gate``: a line for each gate checked;
    otherwise the gates are shown only when one fails (then all of them)."""

    def __init__(self, console: Console, *, every_gate: bool = True):
        self.console, self.every_gate = console, every_gate

    def summary(self, report: Report) -> None:
        print_report(report, self.console)

    def results(self, path: Path) -> None:
        self.console.print(f"results: {path}", soft_wrap=True)  # a path to copy, never wrapped

    def gates(self, results: list[GateResult]) -> None:
        if not self.every_gate and exit_code(results) == 0:
            return
        for r in results:
            print_wrapped(self.console, Text(f"gate {r.status.upper()}: {r.gate.metric} {r.bounds} {r.where} "
                                             f"{r.message}"))

    def tracking(self, line: str) -> None:
        print_wrapped(self.console, Text(line))


def finish_run(run_dir: RunDir, sc: Scenario, engine: RunEngine, out: Finish, *, complete: bool = True,
               junit: Path | None = None) -> int:
    """Write summary.json/csv, Parquet and the reports of the run ``engine`` ran (the
    plan's), show the summary, then, for a ``complete`` run, check the scenario's gates
    (JUnit XML to ``junit``) and log the run to MLflow. Returns the gates' exit code: 0
    when all pass or there are none (the default gates, docs/gates.md, count as the
    scenario's own). An interrupted run (not ``complete``) is summarised but neither gated
    nor logged: it will be resumed.
    A full or read-only folder raises OutputError (exit 3)."""
    t0 = time.monotonic()
    run, report = _summarize(run_dir, engine)
    out.summary(report)
    out.results(run_dir.path)
    if not complete:
        return 0
    code = 0
    # the scenario's gates and the default gates the run has data for (lossless: outputs)
    if sc.gates or default_gates(run):
        results = evaluate_gates(run, load_gates(run))
        out.gates(results)
        if junit:
            atomic_write(junit, junit_xml(results, run, time.monotonic() - t0))
        code = exit_code(results)
    track_finished_run(run, sc, out.tracking)
    return code


def _summarize(run_dir: RunDir, engine: RunEngine) -> tuple[Run, Report]:
    """The summary written, then the run read back and its one report model, from which
    report.md, report.html and the terminal are all rendered. The records are read once,
    and their request table built once, for the summary and the report alike."""
    try:
        requests = Requests(run_dir.load_records())
        summarize_run_dir(run_dir, engine, requests=requests)
        run = load_run(run_dir.path, engine, requests)
        report = build_report(run)
        write_report(run_dir, run=run, report=report)
    except SpeedbenchError:
        raise
    except Exception as e:  # the records are safe on disk; say how to re-render
        raise UsageError(f"could not summarise {run_dir.path}: {e}; re-run `speedbench report {run_dir.path}`") from e
    return run, report
