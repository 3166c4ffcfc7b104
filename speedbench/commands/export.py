"""``speedbench export RUN... --format ...``: a run in other tools' shapes."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console

from speedbench.commands import warn_damaged
from speedbench.errors import UsageError
from speedbench.report.fit import print_table
from speedbench.results.loader import load_run
from speedbench.results.category_matrix import category_order, checkpoints, export_matrix, rich_table
from speedbench.results.exports import export_run
from speedbench.results.mlflow_export import export_mlflow

HELP = """\
Write a finished run in another shape:
  vllm                 one JSON per point with the keys of `vllm bench serve --save-result`
                       (vLLM 0.32), recomputed from the records with vLLM's definitions;
                       docs/results.md lists each key and where it differs from ours
  csv                  summary.csv and categories.csv in speedbench's schema (docs/metrics.md)
  parquet              summary.parquet, categories.parquet and records.parquet
  json                 summary.json
  speculation-profile  specdec_bench's speculation_profile.json per speculative point
  category-matrix      category x checkpoint over one or more runs: AIPerf speed-bench-report
                       CSVs, our category_matrix.csv with CIs, and a console table
  mlflow               one MLflow run per arm on --tracking-uri (pip install 'speedbench[mlflow]');
                       exporting again updates those runs

Files go to -o/--output (default: RUN/export/<format>/; category-matrix: the first RUN's).
"""

ALL_FORMATS = ("vllm", "csv", "parquet", "json", "speculation-profile", "category-matrix", "mlflow")


def register(sub) -> None:
    p = sub.add_parser("export", help="write a run as vLLM bench-serve JSON, CSV, Parquet, JSON, a speculation "
                       "profile, a category matrix, or to MLflow",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", nargs="+", help="run folder, e.g. results/cpu_tiny/20261130T120000Z-1a2b3c "
                   "(several only with --format category-matrix)")
    p.add_argument("--format", required=True, choices=ALL_FORMATS)
    p.add_argument("-o", "--output", metavar="DIR", help="output folder (default: RUN/export/<format>)")
    p.add_argument("--out", dest="output", help=argparse.SUPPRESS)  # the old spelling, kept working
    p.add_argument("--tracking-uri", metavar="URI", help="mlflow: the tracking server (or $MLFLOW_TRACKING_URI)")
    p.add_argument("--experiment", metavar="NAME", help="mlflow: experiment name (default: speedbench/<scenario>)")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="category-matrix: the concurrency to read (default: each run's lowest)")
    p.add_argument("--variant", default="", help="category-matrix: the workload variant (default: none)")
    p.set_defaults(func=run)


def run(args) -> int:
    if len(args.run) > 1 and args.format != "category-matrix":
        raise UsageError(f"--format {args.format} exports one run; several runs only with --format category-matrix")
    runs = [load_run(p) for p in args.run]
    warn_damaged(runs)
    first = runs[0]
    assert first.path is not None and first.engine is not None  # load_run reads a folder, with its engine
    out = Path(args.output) if args.output else first.path / "export" / args.format
    if args.format == "mlflow":
        uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            raise UsageError("--format mlflow needs --tracking-uri URI (or $MLFLOW_TRACKING_URI)")
        for line in export_mlflow(first, uri, args.experiment):
            print(line)
        return 0
    if args.format == "category-matrix":
        return _matrix(runs, out, args.concurrency, args.variant)

    for p in export_run(first, args.format, out, first.engine.spec_counters):
        print(p)
    return 0


def _matrix(runs, out, concurrency: int | None, variant: str) -> int:
    written = export_matrix(runs, out, concurrency, variant)
    cps = checkpoints(runs, concurrency, variant)
    print_table(Console(), rich_table(cps, category_order(cps)))
    for p in written:
        print(p)
    return 0
