"""``speedbench cancel RUN``: cancel every job of a submitted run."""

from __future__ import annotations

from rich.console import Console

from speedbench.executors.kinds import jobs_of_run
from speedbench.results.run import open_run_dir


def register(sub) -> None:
    p = sub.add_parser(
        "cancel", help="cancel every Slurm job of a run (its arms and its gather)",
        description="Cancel the run's arm jobs and gather job, and wait until none is left in the queue. "
        "The jobs stop their servers on SIGTERM, mark the running point interrupted and are not requeued. "
        "`speedbench run --resume RUN` continues later.",
    )
    p.add_argument("run", help="run folder")
    p.add_argument("--wait", type=float, default=120, metavar="S", help="seconds to wait for the queue to empty")
    p.set_defaults(func=run)


def run(args) -> int:
    rd = open_run_dir(args.run)
    ids = jobs_of_run(rd, "to cancel").cancel(rd, wait_s=args.wait)
    Console(highlight=False).print(f"cancelled {len(ids)} jobs: {' '.join(ids) or '(none active)'}")
    return 0
