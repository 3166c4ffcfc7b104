"""``speedbench data inspect SOURCE``: what a workload source holds, before running it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from speedbench.errors import UsageError
from speedbench.records import Prompt
from speedbench.report.fit import print_table
from speedbench.scenario import WorkloadSpec
from speedbench.workload import filter_prompts, is_placeholder, read_source, tag
from speedbench.workload.chat import load_tokenizer
from speedbench.workload.speed_bench import check_config


def register(sub) -> None:
    p = sub.add_parser(
        "data",
        help="inspect workload data (SPEED-Bench, JSONL, the bundled sample)",
        description="Look at workload data without running anything.",
    )
    actions = p.add_subparsers(dest="data_command", metavar="ACTION", parser_class=type(p))
    i = actions.add_parser(
        "inspect",
        help="counts per category and entropy tier, lengths, multi-turn rows, placeholders",
        description="Show what a workload source holds: rows per category and entropy tier, "
        "multi-turn rows, prompt lengths (tokens with --tokenizer, else characters) and "
        "placeholder rows that must be prepared before benchmarking. Exit 2 on bad input.",
    )
    i.add_argument("source", metavar="SOURCE",
                   help="'sample', a JSONL file, or a SPEED-Bench folder (or one parquet/JSONL file of it)")
    i.add_argument("--config", default="qualitative", help="SPEED-Bench config (default: qualitative)")
    i.add_argument("--tokenizer", metavar="PATH", help="a local tokenizer folder; lengths in tokens")
    i.add_argument("--trust-remote-code", action="store_true", help="allow a tokenizer with custom code")
    i.add_argument("--categories", nargs="+", default=[], metavar="CAT", help="keep only these categories")
    i.add_argument("--entropy-tiers", nargs="+", default=[], metavar="TIER",
                   help="keep only these entropy tiers (throughput configs)")
    i.set_defaults(func=run_inspect)
    p.set_defaults(func=lambda args: _no_action(p))


def _no_action(parser) -> int:
    parser.print_help()
    return 2


def spec_for(source: str, config: str, categories: list[str], tiers: list[str]) -> WorkloadSpec:
    """Map the SOURCE argument to the workload spec a scenario would use."""
    common = {"categories": categories, "entropy_tiers": tiers}
    if source == "sample":
        return WorkloadSpec(source="sample", **common)
    p = Path(source).expanduser()
    if not p.exists():
        raise UsageError(
            f"data inspect: '{source}' is not 'sample' and does not exist -- fix: give 'sample', "
            "a JSONL file, or a SPEED-Bench folder"
        )
    if p.is_file() and p.suffix not in (".jsonl", ".parquet"):
        raise UsageError(f"data inspect: {p} is neither .jsonl nor .parquet")
    if p.is_file() and p.suffix == ".jsonl" and not _speed_bench_schema(p):
        return WorkloadSpec(source="jsonl", path=str(p.resolve()), **common)
    return WorkloadSpec(source="speed_bench", path=str(p.resolve()), config=check_config(config), **common)


def _speed_bench_schema(path: Path) -> bool:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    return False  # the JSONL loader reports the line properly
                return isinstance(row, dict) and "turns" in row and "question_id" in row
    return False


def run_inspect(args) -> int:
    spec = spec_for(args.source, args.config, args.categories, args.entropy_tiers)
    rows, notes = read_source(spec)
    rows = filter_prompts(rows, spec.categories, spec.entropy_tiers)
    tokenizer = None
    if args.tokenizer:
        tokenizer = load_tokenizer(args.tokenizer, trust_remote_code=args.trust_remote_code)
    console = Console(highlight=False)
    what = args.source + (f" (config {spec.config})" if spec.source == "speed_bench" else "")
    n_ph = sum(1 for p in rows if is_placeholder(p))
    n_multi = sum(1 for p in rows if p.multiturn)
    console.print(f"[bold]{what}[/bold]: {len(rows)} rows, {n_multi} multi-turn, {n_ph} placeholders", soft_wrap=True)
    for note in notes:
        console.print(f"[yellow]warning:[/yellow] {note}")
    print_table(console, _group_table("category", rows, lambda p: p.category or "(none)"))
    if any(tag(p, "entropy_tier") for p in rows):
        print_table(console, _group_table("entropy tier", rows, lambda p: tag(p, "entropy_tier") or "(none)"))
    real = [p for p in rows if not is_placeholder(p)]
    if real:
        print_table(console, _length_table(real, tokenizer))
    if n_ph:
        print_table(console, _placeholder_table(rows))
        console.print(
            f"[red]{n_ph} of {len(rows)} rows are placeholders[/red]: a run refuses them. Prepare the "
            "full data from the original sources (docs/workloads.md, 'Placeholders')."
        )
    return 0


def _group_table(title: str, rows: list[Prompt], key) -> Table:
    t = Table(title=f"rows per {title}")
    for col in (title, "rows", "multi-turn", "placeholders"):
        t.add_column(col, justify="left" if col == title else "right")
    groups: dict[str, list[Prompt]] = {}
    for p in rows:
        groups.setdefault(key(p), []).append(p)
    for name in sorted(groups):
        g = groups[name]
        t.add_row(name, str(len(g)), str(sum(p.multiturn for p in g)), str(sum(is_placeholder(p) for p in g)))
    t.add_row("total", str(len(rows)), str(sum(p.multiturn for p in rows)),
              str(sum(is_placeholder(p) for p in rows)), style="bold")
    return t


def _length_table(rows: list[Prompt], tokenizer) -> Table:
    unit = "tokens" if tokenizer is not None else "chars"
    firsts = [p.turns[0] for p in rows]
    alls = ["\n".join(p.turns) for p in rows]
    if tokenizer is not None:
        # one batched call: the Rust tokenizer parallelises it
        first_n = [len(x) for x in tokenizer(firsts, add_special_tokens=False)["input_ids"]]
        all_n = [len(x) for x in tokenizer(alls, add_special_tokens=False)["input_ids"]]
    else:
        first_n = [len(x) for x in firsts]
        all_n = [len(x) for x in alls]
    t = Table(title=f"prompt length ({unit}; placeholders excluded)")
    for col in ("measure", "min", "median", "p90", "max"):
        t.add_column(col, justify="left" if col == "measure" else "right")
    for name, values in (("first turn", first_n), ("all user turns", all_n)):
        a = np.asarray(values, dtype=float)
        t.add_row(name, *(f"{v:.0f}" for v in (a.min(), np.median(a), np.percentile(a, 90), a.max())))
    return t


def _placeholder_table(rows: list[Prompt]) -> Table:
    t = Table(title="placeholder rows by source")
    t.add_column("source")
    t.add_column("rows", justify="right")
    t.add_column("categories")
    by: dict[str, list[Prompt]] = {}
    for p in rows:
        if is_placeholder(p):
            by.setdefault(p.source or "(no source)", []).append(p)
    for src in sorted(by, key=lambda s: (-len(by[s]), s)):
        t.add_row(src, str(len(by[src])), ", ".join(sorted({p.category for p in by[src]})))
    return t
