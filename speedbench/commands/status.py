"""``speedbench status RUN``: each arm's point progress, and a submitted run's jobs."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from speedbench.executors.base import JobExecutor
from speedbench.executors.kinds import executor_of_run
from speedbench.report.fit import print_table
from speedbench.results.run import open_run_dir
from speedbench.scenario import validate_data


def register(sub) -> None:
    p = sub.add_parser(
        "status", help="show each arm's point progress (and a submitted run's jobs)",
        description="For each arm: how many of its points are finished (from points.json); for a run "
        "submitted to a cluster also its latest job id, the scheduler's state and the node. A local run "
        "shows 'local' for a job. Exit 0 when no arm stopped short; 1 when one ended without finishing "
        "its points (resume with `speedbench run --resume RUN`).",
    )
    p.add_argument("run", help="run folder")
    p.add_argument("--json", action="store_true", help="print the same as JSON: {run, jobs: [...], gather}")
    p.set_defaults(func=run)


def run(args) -> int:
    console = Console(highlight=False)
    rd = open_run_dir(args.run)
    sc = validate_data(rd.load_scenario(), str(rd.scenario_path))
    executor = executor_of_run(rd)
    jobs = executor.status(rd, sc)
    g = executor.gather(rd) if isinstance(executor, JobExecutor) else None  # a local run ends itself
    if args.json:
        print(json.dumps({"run": str(rd.path),
                          "jobs": [j.shown() for j in jobs],
                          "gather": {"job_id": g[0], "state": g[1]} if g else None}, indent=1))
        return 1 if any(j.died for j in jobs) else 0
    table = Table(title=f"jobs of {rd.path}", title_justify="left")
    for col in ("arm", "job", "state", "node", "points", "details"):
        table.add_column(col, overflow="fold")
    for j in jobs:
        state = f"[bold red]{j.state} (died)[/]" if j.died else j.state
        table.add_row(j.arm, j.job_id, state, j.node, f"{j.points_done}/{j.points_total}", j.reason)
    print_table(console, table)
    if g:
        console.print(f"gather: job {g[0]} {g[1]}")
    died = [j for j in jobs if j.died]
    if died:
        console.print(f"[red]{len(died)} arms ended without finishing their points[/red] "
                      f"({', '.join(j.arm for j in died)}); resume with: speedbench run --resume {rd.path}",
                      soft_wrap=True)  # a command to paste: never wrapped
        return 1
    return 0
