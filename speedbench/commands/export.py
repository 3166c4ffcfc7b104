"""``speedbench export RUN --format vllm|csv|parquet|json``: a run in other tools' shapes."""

from __future__ import annotations

import argparse

HELP = """\
Write a finished run in another shape:

  vllm     one JSON per point with the keys of `vllm bench serve --save-result`
           (vLLM 0.32), recomputed from the records with vLLM's definitions;
           docs/results.md lists each key and where it differs from ours
  csv      summary.csv and categories.csv in speedbench's schema (docs/metrics.md)
  parquet  summary.parquet, categories.parquet and records.parquet
  json     summary.json

Files go to -o/--output (default: RUN/export/<format>/).
"""


def register(sub) -> None:
    from speedbench.results.exports import FORMATS

    p = sub.add_parser("export", help="write a run as vLLM bench-serve JSON, CSV, Parquet or JSON",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="run folder, e.g. results/cpu_tiny/20261130T120000Z-1a2b3c")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("-o", "--output", metavar="DIR", help="output folder (default: RUN/export/<format>)")
    p.add_argument("--out", dest="output", help=argparse.SUPPRESS)  # the old spelling, kept working
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from speedbench.results.exports import export_run
    from speedbench.results import load_run

    r = load_run(args.run)
    assert r.path is not None  # load_run reads a folder
    out = Path(args.output) if args.output else r.path / "export" / args.format
    for p in export_run(r, args.format, out):
        print(p)
    return 0
