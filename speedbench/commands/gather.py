"""``speedbench gather RUN``: summary, reports and gates of a run whose arms ran as jobs."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from speedbench.results.run import open_run_dir


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
    # function-local: the gather loads pandas and matplotlib, not wanted at `speedbench --help`
    from speedbench.executors.slurm.gathering import gather_run

    rd = open_run_dir(args.run)
    return gather_run(rd, Console(highlight=False), junit=Path(args.junit) if args.junit else None)
