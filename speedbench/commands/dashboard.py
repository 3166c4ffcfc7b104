"""``speedbench dashboard RESULTS_DIR -o SITE_DIR``: a static site over many runs."""

from __future__ import annotations

from rich.console import Console


def register(sub) -> None:
    p = sub.add_parser(
        "dashboard",
        help="build a static HTML dashboard from all run folders under a results directory",
        description="Scan RESULTS_DIR recursively for run folders (summary.json) and build a static site. It "
        "opens with the open regressions (called, not recovered, whatever their age; acknowledged ones with their "
        "reason from RESULTS_DIR/acknowledged.yaml), then last night's verdicts per scenario (regression, "
        "improvement, suspicious, no change, insufficient data; each change with before -> after, its size "
        "against the noise, the night it began "
        "and what changed in the provenance: the same as `speedbench changes`), then the checkpoints side by "
        "side, the checkpoints across nights (pooled, against a reference, with the nights each figure rests on), "
        "the latest runs with links to their reports (copied into the site; an incremental build "
        "copies only new or changed ones), trend charts per draft checkpoint and concurrency with change "
        "points marked, an AL matrix by category and per-position acceptance. Opens from file:// with no "
        "network. See docs/dashboard.md.",
    )
    p.add_argument("results_dir", metavar="RESULTS_DIR", help="folder holding run folders (e.g. results)")
    p.add_argument("-o", "--output", metavar="SITE_DIR", default="site", help="output folder (default: site)")
    p.set_defaults(func=run)


def run(args) -> int:
    from speedbench.report.dashboard import build_dashboard  # matplotlib: not at `speedbench --help`

    console = Console(highlight=False)
    d = build_dashboard(args.results_dir, args.output)
    for p in d.problems:
        console.print(f"warning: {p}", markup=False, soft_wrap=True)
    console.print(f"dashboard: {d.index} ({len(d.runs)} runs)", markup=False, soft_wrap=True)
    return 0
