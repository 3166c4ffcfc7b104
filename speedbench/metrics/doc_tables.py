"""The tables of summary keys in docs/metrics.md, rendered from metrics/registry.py (the
columns' declarations are in metrics/row_*.py).

The registry is the one list of metrics; the docs' tables are its output, so the two
cannot drift apart. Each table sits between a begin marker naming a registry ``section``
and an end marker; the prose around the tables stays hand-written and is left alone.

    python -m speedbench.metrics.doc_tables           # exit 1 and print a diff when the docs are stale
    python -m speedbench.metrics.doc_tables --write   # regenerate docs/metrics.md in place
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

from speedbench.metrics.registry import LATENCY, ROW_METRICS, SUMMARY_METRICS, Metric

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
COMMAND = "python -m speedbench.metrics.doc_tables --write"
BEGIN = f'<!-- generated table "{{section}}" by {COMMAND}: do not edit; edit speedbench/metrics/row_*.py -->'
END = "<!-- end of generated table -->"
_BLOCK = re.compile(r'<!-- generated table "(?P<section>\w+)"[^\n]*-->\n.*?' + re.escape(END), re.DOTALL)
# the last column's header, where "formula" would mislead
_LAST_COLUMN = {"point": "formula / meaning", "latency": "values the statistics are taken over"}


def _documented() -> list[tuple[str, Metric]]:
    """(name as a table writes it, metric) in declaration order. Identity keys describe the
    point and measure nothing, so they get no row; a latency family stands for its
    `_mean`, `_std` and `_p<P>` keys (the percentiles are the scenario's, so not listed)."""
    return ([(f"`{m.key}`", m) for m in ROW_METRICS if m.section != "identity"]
            + [(f"`{m.key}_*`", m) for m in LATENCY]
            + [(f"`{m.key}`", m) for m in SUMMARY_METRICS])


def sections() -> list[str]:
    return list(dict.fromkeys(m.section for _, m in _documented()))


def table(section: str) -> str:
    """One section's Markdown table. Neighbouring keys declared alike (an interval's two
    ends) share a row, as a reader would write them."""
    rows: list[list[str]] = []
    for name, m in _documented():
        if m.section != section:
            continue
        cells = [m.unit or "—", m.better or "—", m.formula.replace("|", "\\|")]
        if rows and rows[-1][1:] == cells:
            rows[-1][0] += f", {name}"
        else:
            rows.append([name, *cells])
    if not rows:
        raise ValueError(f"no metric in metrics/registry.py has section {section!r}")
    lines = [f"| name | unit | better | {_LAST_COLUMN.get(section, 'formula')} |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def render(text: str) -> str:
    """``text`` (docs/metrics.md) with every generated table replaced by the registry's.
    Every section must have exactly one table, so a new section cannot go undocumented."""
    found = [m["section"] for m in _BLOCK.finditer(text)]
    missing = [s for s in sections() if s not in found]
    twice = sorted({s for s in found if found.count(s) > 1})
    if missing or twice:
        raise ValueError(f"docs/metrics.md: sections without a generated table {missing}, with several {twice}; "
                         f"add a marker pair ({BEGIN.format(section='NAME')} ... {END}) where the table belongs")
    return _BLOCK.sub(lambda m: f"{BEGIN.format(section=m['section'])}\n{table(m['section'])}\n{END}", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render docs/metrics.md's tables from metrics/registry.py.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="regenerate the file in place")
    mode.add_argument("--check", action="store_true", help="exit 1 with a diff when it is stale (the default)")
    parser.add_argument("path", nargs="?", type=Path, default=DOC)
    args = parser.parse_args(argv)
    old = args.path.read_text(encoding="utf-8")
    new = render(old)
    if new == old:
        return 0
    if args.write:
        args.path.write_text(new, encoding="utf-8")
        print(f"rewrote {args.path}")
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                               f"{args.path} (committed)", f"{args.path} (from the registry)"))
    print(f"{args.path} is stale: run {COMMAND}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
