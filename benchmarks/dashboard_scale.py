"""How long the dashboard takes to build, and how big the site is, for a long nightly
history: NIGHTS nights of SCENARIOS scenarios, each night one run folder made by
tests/helpers/histories.py from the real CPU run (5 arms; the eagle3.1 slot loads the
untrained draft for the last nights, a sixth checkpoint), each with a small report.html
of its own (so the figure is the dashboard's own cost; a run without one costs about
0.5 s more to render once).

    .venv/bin/python benchmarks/dashboard_scale.py --nights 365 --scenarios 3 [--json out.json]

Prints: generating the folders, a full build (empty site), an incremental build after
one new night per scenario (reports of unchanged runs are neither copied nor rendered
again), the verdicts alone (`speedbench changes`), and the site's size.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.histories import START, Plant, write_history  # noqa: E402

from speedbench.report.dashboard import build_dashboard, results_verdicts  # noqa: E402


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nights", type=int, default=365)
    ap.add_argument("--scenarios", type=int, default=3)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--keep", action="store_true", help="keep the generated results and site (printed)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dashboard-scale-"))
    results, site = root / "results", root / "site"
    plants = [Plant("eagle3.1", args.nights - 3, swap_with="eagle3-untrained", size=0.0)]

    def generate(nights: int, start: dt.datetime = START) -> None:
        for k in range(args.scenarios):
            write_history(results, nights, plants, seed=k, scenario=f"scenario{k}", start=start)

    _, t_gen = _timed(lambda: generate(args.nights))
    d, t_full = _timed(lambda: build_dashboard(results, site))
    size_full = _size(site)
    # one new night per scenario: the history again with one more night (same seeds, so
    # the earlier folders are rewritten identically; their reports are older than the site's copies)
    for k in range(args.scenarios):
        write_history(results / "_new", 1, [], seed=100 + k, scenario=f"scenario{k}",
                      start=START + dt.timedelta(days=args.nights))
    _, t_incr = _timed(lambda: build_dashboard(results, site))
    (vs, _), t_verdicts = _timed(lambda: results_verdicts(results))
    out = {"nights": args.nights, "scenarios": args.scenarios, "runs": len(d.runs) + args.scenarios,
           "series": len(vs), "generate_s": round(t_gen, 1), "full_build_s": round(t_full, 1),
           "incremental_build_s": round(t_incr, 1), "verdicts_only_s": round(t_verdicts, 1),
           "site_mb": round(size_full / 1e6, 1), "index_html_mb": round((site / "index.html").stat().st_size / 1e6, 2)}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    if args.keep:
        print(f"kept: {root}")
    else:
        shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
