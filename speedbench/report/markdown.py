"""report.md: the report model (model.py) as Markdown; the same content as report.html,
minus the plots, the failures and the per-question tables.

Every string from a run (arm and model names, failure messages) is escaped for Markdown,
with backslashes only: many Markdown renderers pass raw HTML through, so ``<`` and an
``&`` that would start an entity are escaped too, but the file stays plain Markdown that
reads as text (no ``&#x27;`` or ``&gt;``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from speedbench.report import tables
from speedbench.report.model import REPORT_TITLE, Lines, Report, Section, Speedups, Table

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~<]|&(?=#?\w+;))")


def md(s: Any) -> str:
    """Escape one inline Markdown string: punctuation that forms links, code, table cells,
    HTML tags or entities is backslash-escaped (CommonMark shows it as itself); newlines
    become spaces."""
    text = " ".join(_CONTROL.sub("?", str(s)).split())
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """Headers and cells are escaped here; pass raw strings."""
    align = align or "l" + "r" * (len(headers) - 1)
    sep = ["---:" if a == "r" else ":---" for a in align]
    lines = ["| " + " | ".join(md(h) for h in headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def speedup_table_md(t: tables.SpeedupTable, baseline: str | None) -> str:
    headers, has_ref = tables.speedup_headers(t, baseline)
    rows = []
    for r in t.rows:
        if r.status == "failed":
            row = [r.concurrency, tables.fmt(r.base_tps, 1), "failed", "–", "–", "–"] + ["–"] * t.has_other
        else:
            al = tables.fmt(r.al, 2) + (" (Prometheus)" if r.al_source == "prometheus" else "")
            row = [r.concurrency, tables.fmt(r.base_tps, 1), tables.fmt(r.spec_tps, 1),
                   r.speedup_cell, r.outputs]
            row += [r.other_cell] * t.has_other + [al]
        if has_ref:
            row.append(tables.fmt(r.reference, 2, "×"))
        if t.has_predicted:
            row.append(r.predicted_cell)
        rows.append(row)
    return md_table(headers, rows)


def render_markdown(report: Report, drift_md: str = "") -> str:
    parts = [f"# {REPORT_TITLE}: {md(report.scenario)}", "",
             f"Run `{md(report.run_id)}`" + (f", created {md(report.created)}" if report.created else "")
             + f", hardware: {md(report.hardware)}.", ""]
    parts += [f"**{md(line)}**  " for line in report.noise] + [""]
    for s in report.sections:
        if s.key in SHOWN:
            parts += _section(s, report.baseline)
    if drift_md:
        parts += [drift_md.rstrip(), ""]
    return "\n".join(parts)


# The sections report.md shows (the plots, failures and per-question tables are report.html's).
SHOWN = ("speedup", "outputs", "screening", "warnings", "measured", "rate", "points", "latency", "category_al",
         "category", "positions")


def _section(s: Section, baseline: str | None) -> list[str]:
    """One section's lines: its title, its content, then its note where it has no content."""
    parts = [f"## {s.title}", ""]
    c = s.content
    if isinstance(c, Speedups):
        for t in c.tables:
            parts += [f"### {md(t.title)}", ""]
            if t.draft:
                parts += [f"Draft: {md(t.draft)}", ""]
            parts += [speedup_table_md(t, baseline), ""]
        return parts + ([s.note, ""] if s.note else [])
    if s.note:
        parts += [s.note, ""]
    if isinstance(c, Table):
        parts += [md_table(c.headers, c.rows, c.align), ""]
    elif isinstance(c, Lines):
        parts += [f"- {md(w)}" if c.bulleted else md(w) + "  " for w in c.lines] + [""]
    return parts
