"""``speedbench doctor SCENARIO``: pre-flight checks, printed as a table.

Exit 0 when nothing fails (warnings allowed), 1 when a check fails, and with
``--strict`` warnings fail too. The table itself is doctor/table.py (``speedbench run``
prints it too).
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from speedbench.doctor import exit_code, run_checks
from speedbench.doctor.table import print_checks
from speedbench.run.cost import output_bytes
from speedbench.run.plan import build_plan
from speedbench.scenario import load_scenario


def register(sub) -> None:
    p = sub.add_parser(
        "doctor",
        help="check that this machine can run a scenario, without starting anything",
        description="Pre-flight checks: vLLM package, version and launch command; draft checkpoints "
        "and their EAGLE version; GPUs (count, model, memory in use, NVFP4 needs Blackwell); port, "
        "disk, room for the run folder, HF token; docker; the workload data. Nothing is started or downloaded. "
        "Exit 0 when nothing fails, 1 when a check fails (--strict: warnings fail too).",
    )
    p.add_argument("scenario", help="path to a scenario YAML file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a value before checking (repeatable)")
    p.add_argument("--strict", action="store_true", help="treat warnings as failures")
    p.add_argument("--output", "-o", default="results", metavar="DIR",
                   help="the results root the run would write under: its free space is checked (default: results)")
    p.set_defaults(func=run)


def run(args) -> int:
    sc = load_scenario(args.scenario, args.overrides)
    plan = build_plan(sc)
    checks = run_checks(plan, output=Path(args.output), output_need=output_bytes(plan))
    console = Console()
    code = exit_code(checks, strict=args.strict)
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("ok", "warn", "fail")}
    tally = (f"{counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail"
             f"{' (--strict: warnings fail)' if args.strict else ''}")
    verdict = "ready" if code == 0 else "not ready"
    # the verdict first (a log is read from the top), and again under the table (and from the bottom)
    console.print(f"speedbench doctor: scenario '{sc.name}' ({args.scenario}): {verdict} ({tally})",
                  markup=False, highlight=False, soft_wrap=True)
    print_checks(checks, console)
    console.print(f"{tally} -> {verdict}", markup=False, highlight=False)
    return code
