"""``speedbench dashboard RESULTS_DIR -o SITE_DIR``: a static site over many runs."""

from __future__ import annotations

from rich.console import Console


def register(sub) -> None:
    p = sub.add_parser(
        "dashboard",
        help="build a static HTML dashboard from all run folders under a results directory",
        description="Scan RESULTS_DIR recursively for run folders (summary.json) and build a static site: "
        "trend charts per draft checkpoint and concurrency, an AL matrix by category, per-position "
        "acceptance, and the latest runs with links to their reports (copied into the site). "
        "Opens from file:// with no network. See docs/dashboard.md.",
    )
    p.add_argument("results_dir", metavar="RESULTS_DIR", help="folder holding run folders (e.g. results)")
    p.add_argument("-o", "--output", metavar="SITE_DIR", default="site", help="output folder (default: site)")
    p.set_defaults(func=run)


def run(args) -> int:
    from speedbench.report.dashboard import build_dashboard

    console = Console(highlight=False)
    d = build_dashboard(args.results_dir, args.output)
    for p in d.problems:
        console.print(f"warning: {p}", markup=False, soft_wrap=True)
    console.print(f"dashboard: {d.index} ({len(d.runs)} runs)", markup=False, soft_wrap=True)
    return 0
