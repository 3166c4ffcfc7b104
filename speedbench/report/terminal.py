"""The final table in the terminal, in the shape of the published result:
concurrency | baseline per-user TPS | speculative per-user TPS | speedup [95% CI] | AL | reference.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from speedbench.report import model, tables
from speedbench.report.fit import print_table
from speedbench.report.wrap import print_wrapped
from speedbench.report.model import Lines, Report, Section, Speedups, build_report
from speedbench.results import Run, RunDir
from speedbench.results.loader import engine_of, load_run


def speedup_table(t: tables.SpeedupTable, baseline: str | None, width: int | None = None) -> Table:
    """The published shape, one row per concurrency; stacked (one block of label/value
    lines per concurrency) when that does not fit ``width`` columns. Without a terminal
    (CI, ``> log``) rich draws 80 columns, and squeezing the wide table there cuts its
    headers and cells to ``base… per-…``."""
    title = escape(t.title) + (f"\n[dim]draft {escape(t.draft)}[/dim]" if t.draft else "")
    heads, rows = _speedup_cells(t, baseline)
    wide = Table(title=title, title_justify="left", header_style="bold")
    for head in heads:
        # an interval is one figure: never broken across lines
        wide.add_column(head, justify="right", no_wrap=head == "concurrency" or "CI]" in head)
    for cells in rows:
        wide.add_row(*cells)
    if width is None or _natural_width(wide) <= width:
        return wide
    stacked = Table(title=title, title_justify="left", header_style="bold")
    stacked.add_column(heads[0], justify="right", no_wrap=True)
    stacked.add_column("", overflow="fold")  # a very long arm name folds rather than ending in "…"
    stacked.add_column("", justify="right", no_wrap=True)
    for cells in rows:
        for i, (head, cell) in enumerate(zip(heads[1:], cells[1:])):
            stacked.add_row(cells[0] if i == 0 else "", head.replace("\n", " "), cell)
        stacked.add_section()
    return stacked


def _natural_width(table: Table) -> int:
    """The table's width with nothing wrapped or cut (rich clamps a measurement to the
    console's width, so it is measured on a wide one)."""
    wide = Console(width=10_000)
    return Measurement.get(wide, wide.options, table).maximum


def _speedup_cells(t: tables.SpeedupTable, baseline: str | None) -> tuple[list[str], list[list[str]]]:
    """Headers (rich markup; "\n" where the wide table may break them) and each row's cells."""
    tps = tables.TPS_CLIENT.replace(" (", "\n(", 1)  # the wide table may break before the clock
    heads = ["concurrency", f"{escape(baseline or 'baseline')}\n{tps}", f"{escape(t.arm)}\n{tps}",
             "speedup [95% CI]\n(headline clock)", "outputs"]
    if t.has_other:
        heads.append("other clock\n[95% CI]")
    heads.append("AL")
    has_ref = any(math.isfinite(r.reference) for r in t.rows)
    if has_ref:
        heads.append("reference\nspeedup")
    if t.has_predicted:
        heads.append("predicted speedup\n[95% CI]")
    rows = []
    for r in t.rows:
        if r.status == "failed":
            cells = [str(r.concurrency), tables.fmt(r.base_tps, 1), "[red]failed[/red]", "–", "–",
                     "–"] + ["–"] * t.has_other
        else:
            sp = escape(r.speedup_cell)
            if r.lossy:  # outputs differ: no speedup, whatever the reference says
                sp = f"[red]{sp}[/red]"
            elif math.isfinite(r.reference) and math.isfinite(r.speedup):
                # green when the reference lies inside (or below) our interval
                style = "green" if (math.isfinite(r.ci_high) and r.ci_high >= r.reference) else "yellow"
                sp = f"[{style}]{sp}[/{style}]"
            al = tables.fmt(r.al, 2) + (" [dim](prom)[/dim]" if r.al_source == "prometheus" else "")
            cells = [str(r.concurrency), tables.fmt(r.base_tps, 1), tables.fmt(r.spec_tps, 1), sp,
                     f"[bold red]{escape(r.outputs)}[/bold red]" if r.lossy else escape(r.outputs)]
            if t.has_other:
                cells.append(escape(r.other_cell))
            cells.append(al)
        if has_ref:
            cells.append(tables.fmt(r.reference, 2, "×"))
        if t.has_predicted:
            cells.append(escape(r.predicted_cell))
        rows.append(cells)
    return heads, rows


# The sections the terminal shows: the verdict and how to read it; the rest is in report.md / report.html.
SHOWN = ("speedup", "outputs_brief", "per_arm", "screening", "measured", "warnings")


def print_report(report: Report, console: Console | None = None) -> None:
    """Speedup tables, what was measured, and warnings."""
    console = console or Console(highlight=False)
    head = f"[bold]{escape(report.scenario)}[/bold]  run {escape(report.run_id)}"
    if report.created:
        head += f"  ({escape(report.created)})"
    console.print(head)
    for line in report.headlines:  # the verdict first: each arm's speedup, then how to read it
        print_wrapped(console, escape(line))
    for line in report.noise:
        console.print(f"[bold]{escape(line)}[/bold]")
    speedups = report.section("speedup")
    for t in speedups.content.tables if speedups and isinstance(speedups.content, Speedups) else ():
        print_table(console, speedup_table(t, report.baseline, console.width))
    for line in _lines(report, "outputs_brief"):  # beside the speedups: were the outputs the target's?
        style = "bold red" if "LOSSY" in line else "dim"
        print_wrapped(console, f"[{style}]{escape(line)}[/{style}]")
    per_arm = _table(report, "per_arm")
    if per_arm:
        print_table(console, _plain_table(*per_arm))
    screening = _table(report, "screening")
    if screening:
        _, c = screening
        st = Table(title="screening (predicted speedups, not measured)", title_justify="left", header_style="bold")
        for h in c.headers:
            st.add_column(escape(h), justify="right")
        for row in c.rows:
            st.add_row(*[escape(cell) for cell in row])
        print_table(console, st)
    _print_lines(report, console)


def _table(report: Report, key: str) -> tuple[Section, model.Table] | None:
    s = report.section(key)
    return (s, s.content) if s and isinstance(s.content, model.Table) else None


def _lines(report: Report, key: str) -> tuple[str, ...]:
    s = report.section(key)
    return s.content.lines if s and isinstance(s.content, Lines) else ()


def _print_lines(report: Report, console: Console) -> None:
    """What was measured, then the warnings."""
    for line in _lines(report, "measured"):
        console.print(f"[dim]{escape(line)}[/dim]")
    warnings = _lines(report, "warnings")
    if warnings:
        console.print(f"[yellow]{len(warnings)} warning(s), one per cause:[/yellow]")
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}")


def _plain_table(s: Section, c: model.Table) -> Table:
    """No speculative arm (or no baseline): per-arm throughput only."""
    table = Table(title=s.title, title_justify="left", header_style="bold")
    for col, a in zip(c.headers, c.align):
        table.add_column(escape(col), justify="left" if a == "l" else "right")
    for row in c.rows:
        table.add_row(*[escape(cell) for cell in row])
    return table


def print_summary(summary: dict[str, Any] | Run | RunDir | str | Path, console: Console | None = None,
                  run_dir: RunDir | None = None) -> None:
    """Print a run's final table from a Run, a run folder, or a summary dict (pass the
    folder as ``run_dir`` too so provenance and the scenario can be shown)."""
    if isinstance(summary, Run):
        run = summary
    elif isinstance(summary, dict):
        run = Run(run_dir, summary, engine_of(run_dir) if run_dir else None)
    else:
        run = load_run(summary.path if isinstance(summary, RunDir) else summary)
    print_report(build_report(run, only=SHOWN), console)
