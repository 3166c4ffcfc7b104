"""``speedbench job RUN --arm ARM``: what one cluster job runs (the batch scripts call it)."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from speedbench.results.run import open_run_dir


def register(sub) -> None:
    p = sub.add_parser(
        "job", help="run one arm of a submitted run folder (called by the generated batch scripts)",
        description="Measure one arm's unfinished points into RUN, writing only this job's own files "
        "(records-<tag>.jsonl, points-<tag>.json; the tag is $SLURM_JOB_ID unless --tag is given). "
        "Records of the arm's unfinished points are moved aside first, so a requeued or resubmitted job "
        "repeats no finished point. No summary: `speedbench gather RUN` writes it. "
        "Exit 0 ok, 1 the arm failed, 130 stopped by SIGTERM (time limit, preemption, cancel).",
    )
    p.add_argument("run", help="run folder written by `speedbench run --executor slurm`")
    p.add_argument("--arm", required=True, help="the arm this job measures")
    p.add_argument("--tag", help="writer tag for the per-job files (default: $SLURM_JOB_ID, else the pid)")
    p.add_argument("--skip-doctor", action="store_true", help="do not run the pre-flight checks first")
    p.set_defaults(func=run)


def run(args) -> int:
    # function-local: the whole run path (pandas, the doctor, the engine), only when a job runs
    from speedbench.run.session import ConsoleProgress, resume_run

    open_run_dir(args.run)  # a missing, empty or non-run folder: exit 2 before anything starts
    tag = args.tag or os.environ.get("SLURM_JOB_ID") or f"pid{os.getpid()}"
    return resume_run(Path(args.run), overrides=[], skip_doctor=args.skip_doctor,
                      progress=ConsoleProgress(Console(highlight=False)), arms=[args.arm], tag=tag, summarize=False)
