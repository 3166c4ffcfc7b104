"""``speedbench report RUN``: re-render report.md / report.html and print the final table."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from speedbench.report.wrap import print_paste, print_wrapped

from speedbench.report import terminal
from speedbench.report.model import build_report
from speedbench.report.terminal import print_report
from speedbench.results.loader import load_run
from speedbench.results.verify import verify_run


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        help="re-render a run's report.md / report.html and print its results table",
        description="Re-render report.md and report.html of a finished run folder from its summary.json, "
        "records and provenance, and print the speedup tables. Finished rounds are checked against their "
        "records first (as `speedbench verify` does); problems are printed as warnings. Exit 0, or 2 when "
        "the folder is not a readable run.",
    )
    p.add_argument("run", help="run folder, e.g. results/cpu_tiny/20261130T120000Z-1a2b3c")
    p.add_argument("--no-files", action="store_true", help="only print the table; write nothing")
    p.set_defaults(func=run)


def run(args) -> int:
    from speedbench.report.render import write_report  # matplotlib: not at `speedbench --help`

    console = Console(highlight=False)
    r = load_run(args.run)  # first: an empty or non-run folder is exit 2 with what was expected
    assert r.dir is not None  # load_run reads a folder
    # Lost or damaged records would show as fewer requests, or a failed point: say so first.
    v = verify_run(r.dir)
    for problem in v.problems():  # prose wrapped at spaces to the width; a path or command stays whole
        print_wrapped(console, Text("warning: ", style="yellow") + Text(str(problem)))
    if v.damaged_rounds:  # a missing file's warning already carries its own fix
        console.print("re-measure the damaged rounds:", soft_wrap=True)
        print_paste(console, f"speedbench run --resume {v.run.path}")
    # one report model for the terminal and both files (only the terminal's sections with --no-files)
    report = build_report(r, only=terminal.SHOWN if args.no_files else None)
    print_report(report, console)
    if not args.no_files:
        md_path, html_path = write_report(r.dir, run=r, report=report)
        console.print(f"wrote {md_path} and {html_path}", markup=False, soft_wrap=True)
    return 0
