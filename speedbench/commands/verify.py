"""``speedbench verify RUN``: check a run folder's finished rounds against their records."""

from __future__ import annotations

import argparse

from speedbench.results.run import open_run_dir
from speedbench.results.verify import verify_run

HELP = """\
Check a run folder without changing it: every finished round in points.json is compared
with its records (how many lines were written and their digest), and every record line
must be a whole record. Lists each problem: records lost, changed or duplicated, damaged
lines, unreadable files. `speedbench run --resume RUN` repairs what it lists: damaged
lines move to records.damaged.jsonl and the rounds that lost records are measured again.
A run folder without a file it must hold by now (scenario.resolved.yaml; points.json once
it has records or a summary; the records once a round finished) is a problem too, exit 1,
with the fix for that file: nothing could be checked without it.
A path that is not a run folder, or a summary.json that does not parse, is exit 2.
"""


def register(sub) -> None:
    p = sub.add_parser("verify", help="check a run folder's records against points.json (changes nothing)",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="run folder, e.g. results/cpu_tiny/20261130T120000Z-1a2b3c")
    p.set_defaults(func=run)


def run(args) -> int:
    rd = open_run_dir(args.run)  # a missing, empty or non-run folder: exit 2, never "ok, 0 rounds"
    if rd.summary_path.exists():
        rd.load_summary()  # a garbage summary is exit 2 here too, as in report and gate
    v = verify_run(rd)
    note = f" ({v.unverifiable} rounds from before record counts were kept: not checked)" if v.unverifiable else ""
    kept = f"; {v.quarantined} lines kept in {rd.damaged_path.name}" if v.quarantined else ""
    if v.ok:
        print(f"{rd.path}: ok, {v.checked} finished rounds match their records{note}{kept}")
        return 0
    problems = v.problems()
    print(f"{rd.path}: {len(problems)} problems{note}{kept}")
    for p in problems:
        print(f"  {p}")
    if v.damaged_rounds:  # a missing file's own line already says how to repair it
        print(f"fix: speedbench run --resume {rd.path}  (re-measures the damaged rounds)")
    return 1
