"""One module per CLI subcommand; each exposes ``register(subparsers)``.

``EXIT_CODES`` is every command's exit codes, written once in one shape; cli.py puts it
at the end of each command's ``--help``, so the commands cannot drift apart.
"""

import sys

# 3 (the output folder cannot be written) applies to every command that writes files.
EXIT_CODES = {
    "validate": "0 valid, 2 invalid scenario or bad usage",
    "run": "0 ok, 1 an arm failed or a scenario gate failed, 2 invalid input or bad usage, 3 output folder not "
           "writable (disk full, read-only; resume once fixed), 130 interrupted (Ctrl-C / SIGTERM)",
    "fixtures": "0 built (or already built), 2 bad usage, 3 output folder not writable",
    "data": "0 ok, 2 bad input or usage",
    "doctor": "0 nothing fails (warnings allowed), 1 a check fails (--strict: a warning too), 2 bad usage",
    "report": "0 written, 2 not a readable run or bad usage, 3 output folder not writable",
    "compare": "0 compared, 2 unreadable run or bad usage, 3 output folder not writable",
    "gate": "0 all gates pass, 1 a gate failed (or the records are damaged, or the run folder lost points.json, "
            "its records or its scenario), 2 bad usage or unreadable data, an invalid gates file, or every check "
            "skipped (nothing checked), 3 output folder not writable",
    "dashboard": "0 written, 2 no run folders or bad usage, 3 output folder not writable",
    "changes": "0 no regression began in the recent nights, 1 one did, 2 no run folders or bad usage, "
               "3 output file not writable",
    "export": "0 written, 2 unreadable run or bad usage (mlflow: a bad tracking URI, a server that does not "
              "answer), 3 output folder not writable (mlflow: a store that cannot be written or refuses you)",
    "job": "0 ok, 1 the arm failed, 3 output folder not writable, 130 stopped by SIGTERM (time limit, "
           "preemption, cancel)",
    "gather": "0 all arms finished and all gates pass, 1 a gate failed or a point is unfinished or failed, "
              "2 bad usage, 3 output folder not writable",
    "status": "0 no job died, 1 a job ended without finishing its points, 2 not a run folder",
    "cancel": "0 cancelled (or none active), 2 not a run folder",
    "submit": "0 submitted (locally: all cells ok), else the worst cell's `run` exit code; 2 bad usage",
    "verify": "0 clean, 1 problems found (listed; a missing points.json, records or scenario too), 2 not a run "
              "folder or its summary.json does not parse",
    "calibrate": "0 calibration stored, 1 the measurement failed, 2 bad usage or invalid scenario, "
                 "3 output folder not writable",
}


def exit_codes_epilog(command: str) -> str:
    return f"exit codes: {EXIT_CODES[command]}"


def warn_damaged(runs) -> bool:
    """Say on stderr when a run's records fail ``speedbench verify``'s per-round digests
    (commands that read records must not pass over it silently); True when any did."""
    damaged = False
    for run in runs:
        problems = run.record_problems
        damaged = damaged or bool(problems)
        for p in problems[:5]:
            print(f"speedbench: warning: {run.path}: records damaged: {p}", file=sys.stderr)
        if problems:
            more = f" ({len(problems) - 5} more)" if len(problems) > 5 else ""
            print(f"speedbench: warning: figures from these records are incomplete{more} -- "
                  f"`speedbench verify {run.path}` lists every problem, `speedbench run --resume {run.path}` "
                  "re-measures them", file=sys.stderr)
    return damaged
