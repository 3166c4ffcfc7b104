"""``speedbench report RUN``: re-render report.md / report.html and print the final table."""

from __future__ import annotations

from rich.console import Console


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        help="re-render a run's report.md / report.html and print its results table",
        description="Re-render report.md and report.html of a finished run folder from its summary.json, "
        "records and provenance, and print the speedup tables. Exit 0, or 2 when the folder is not a "
        "readable run.",
    )
    p.add_argument("run", help="run folder, e.g. results/cpu_tiny/20261130T120000Z-1a2b3c")
    p.add_argument("--no-files", action="store_true", help="only print the table; write nothing")
    p.set_defaults(func=run)


def run(args) -> int:
    from speedbench.report.render import write_report
    from speedbench.report.terminal import print_report
    from speedbench.results import load_run

    console = Console(highlight=False)
    r = load_run(args.run)
    print_report(r, console)
    if not args.no_files:
        assert r.dir is not None  # load_run reads a folder
        md_path, html_path = write_report(r.dir)
        console.print(f"wrote {md_path} and {html_path}", markup=False, soft_wrap=True)
    return 0
