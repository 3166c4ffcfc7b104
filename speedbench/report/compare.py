"""Side-by-side comparison of runs (arms matched by name), or of two arms in one run.

Every speedup shown is the point's stored headline figure and interval (the clock that
holds, metrics/headline.py): the same interval the report, category matrix and exports
show. A speedup difference is the difference of the two figures shown (its sign is
theirs), with the two stored intervals (over rounds of server starts where a point has
2 or more) combined as normal errors; where an interval is unbounded, only "do the two
intervals overlap" is asked. Per-user TPS differences bootstrap the stored records
(significance.py), each run resampled independently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rich.markup import escape
from rich.table import Table

from speedbench.metrics.cells import al_of
from speedbench.metrics.headline import ENGINE, headline, headline_clock
from speedbench.metrics.registry import SummaryRow
from speedbench.report import facts, outputs, trust
from speedbench.report import significance
from speedbench.report.fit import print_table
from speedbench.report import tables
from speedbench.results import Run
from speedbench.errors import UsageError, did_you_mean
from speedbench.report import html
from speedbench.report import plots


@dataclass
class Section:
    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""
    significant_rows: set[int] = field(default_factory=set)  # highlighted
    left: int = 1  # leading text columns


@dataclass
class Comparison:
    title: str
    runs: list[tuple[str, Run]]  # (short label, run)
    sections: list[Section]
    # for plots: label -> [(c, mean, lo, hi)] and label -> (joint, conditional)
    speedups: dict[str, list[tuple[int, float, float, float]]] = field(default_factory=dict)
    curves: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _has_records(run: Run) -> bool:
    return run.dir is not None and bool(run.dir.record_files()) and bool(run.records)


def _figure(row: SummaryRow) -> tuple[float, float, float]:
    """The point's one stored interval: its headline clock's (metrics/headline.py)."""
    return headline(row)


def _shown(row: SummaryRow, run: Run) -> str:
    """The figure compare prints for a point, with its clock when that is the engine's, and
    marked where the run cannot vouch for it (a failed control, a confounded point)."""
    m, lo, hi = _figure(row)
    clock = headline_clock(row)
    cell = tables.fmt_speedup(m, lo, hi) + (f" ({clock})" if clock == ENGINE and math.isfinite(m) else "")
    if not math.isfinite(m):
        return cell
    if row.arm is not None and trust.confounded(run, str(row.arm), int(row.concurrency or 0), str(row.variant or "")):
        cell += " CONFOUNDED"
    if row.arm is not None and outputs.lossy_reason(run, str(row.arm), int(row.concurrency or 0),
                                                    str(row.variant or "")):
        cell += f" ({outputs.DIFFER})"
    return cell + (" (controls failed)" if trust.controls_failed(run) else "")


def _outputs(row: SummaryRow, run: Run) -> str:
    """The point's outputs verdict with its identical fraction (report/outputs.py); "–"
    for a point the run lacks."""
    if row.arm is None:
        return "–"
    return outputs.cell(run, str(row.arm), int(row.concurrency or 0), str(row.variant or ""))


def _ci_diff(a: SummaryRow, b: SummaryRow) -> significance.Interval:
    return significance.stored_diff(a, b)


def _fmt_diff(iv: significance.Interval, pct_of: float = math.nan) -> str:
    if not math.isfinite(iv.value):
        return "–"
    s = f"{iv.value:+.3f}"
    if iv.n and math.isfinite(iv.low):
        s += f" [{iv.low:+.3f}, {iv.high:+.3f}]"
    if math.isfinite(pct_of) and pct_of:
        s += f" ({iv.value / pct_of:+.1%})"
    return s


def _sig(iv: significance.Interval) -> str:
    if not math.isfinite(iv.value):
        return "n/a"
    return "yes" if iv.excludes_zero else "no"


def _keys(run: Run, arm: str) -> list[tuple[int, str]]:
    return sorted({(int(r.concurrency), str(r.variant or "")) for r in run.rows if r.arm == arm})


def compare_runs(runs: list[Run]) -> Comparison:
    labels = [(f"R{i + 1}", r) for i, r in enumerate(runs)]
    first = runs[0]
    cmp = Comparison(title="Comparison of runs", runs=labels, sections=[])
    cmp.sections.append(Section(title="Runs", headers=["label", "scenario", "run", "created", "hardware"],
                                rows=[[lab, r.scenario_name, r.run_id, r.created_utc, facts.hardware(r)] for lab,
                                 r in labels],
                                left=5))
    rec = [_has_records(r) for r in runs]
    later = [a for r in runs[1:] for a in tables.spec_arms(r) if a not in tables.spec_arms(first)]
    for arm in [a for a in tables.spec_arms(first)] + later:
        present = [lab for lab, r in labels if arm in r.arms()]
        missing = [lab for lab, r in labels if arm not in r.arms()]
        if missing:
            cmp.notes.append(f"arm {arm} is missing from {', '.join(missing)}")
        cmp.sections.append(_arm_section(runs, rec, arm, present))
        _arm_figures(cmp, labels, arm)
    _category_and_positions(cmp, [(lab, r, None) for lab, r in labels])
    return cmp


def _arm_section(runs: list[Run], rec: list[bool], arm: str, present: list[str]) -> Section:
    """One arm's speedup in each run that has it, and each later run's difference from R1."""
    labels = [(f"R{i + 1}", r) for i, r in enumerate(runs)]
    headers = ["c"] + [f"{lab} speedup [95% CI]" for lab in present]
    diffs = [lab for lab in present if lab != "R1"] if "R1" in present else []
    headers += [f"Δ speedup {lab}−R1 [95% CI]" for lab in diffs] + [f"significant {lab}" for lab in diffs]
    headers += [f"Δ {tables.TPS_CLIENT} {lab}−R1" for lab in diffs] + [f"{lab} outputs" for lab in present]
    sec = Section(title=f"Speedup: {arm}", headers=headers, rows=[])
    keys = sorted({k for lab, r in labels if lab in present for k in _keys(r, arm)})
    for c, v in keys:
        row = [f"{c}" + (f" [{v}]" if v else "")]
        verdicts = []
        for lab, r in labels:
            if lab in present:
                x = r.row(arm, c, v) or SummaryRow()  # a point the run lacks: a row of Nones
                row.append(_shown(x, r))
                verdicts.append(_outputs(x, r))
        sig_cells, tps_cells, any_sig = [], [], False
        for lab in diffs:
            iv, tv, base_row = _diff(runs, rec, int(lab[1:]) - 1, arm, (c, v))
            row.append(_fmt_diff(iv))
            sig_cells.append(_sig(iv))
            tps_cells.append(_fmt_diff(tv, tables.num(base_row.per_user_tps_mean)))
            any_sig |= iv.excludes_zero
            sec.note = f"test: {iv.test}" if math.isfinite(iv.value) else sec.note
        if any_sig:
            sec.significant_rows.add(len(sec.rows))
        sec.rows.append(row + sig_cells + tps_cells + verdicts)
    return sec


def _diff(runs: list[Run], rec: list[bool], i: int, arm: str, point: tuple[int, str]
          ) -> tuple[significance.Interval, significance.Interval, SummaryRow]:
    """Run i's speedup and per-user TPS minus R1's at one point (intervals), and R1's row.
    The speedup difference reads the stored intervals (the figures the table shows); the
    per-user TPS difference, which no row interval holds, bootstraps the records."""
    first, (c, v) = runs[0], point
    base_row = first.row(arm, c, v) or SummaryRow()  # a point the run lacks: a row of Nones
    other_row = runs[i].row(arm, c, v) or SummaryRow()
    iv = _ci_diff(base_row, other_row)
    tv = significance.tps_diff_runs(first, runs[i], arm, c, v) if rec[0] and rec[i] else significance.NAN_INTERVAL
    return iv, tv, base_row


def _arm_figures(cmp: Comparison, labels: list[tuple[str, Run]], arm: str) -> None:
    """One arm's speedup curves and per-position curves, per run."""
    for lab, r in labels:
        if arm in r.arms():
            for t in tables.speedup_tables(r):
                if t.arm == arm:
                    cmp.speedups[f"{lab} {tables.label(arm, t.variant)}"] = [
                        (x.concurrency, x.speedup, x.ci_low, x.ci_high) for x in t.rows]
            for (a, v), curve in tables.position_curves(r).items():
                if a == arm:
                    cmp.curves[f"{lab} {tables.label(a, v)}"] = curve


def _category_and_positions(cmp: Comparison, sources: list[tuple[str, Run, list[str] | None]]) -> None:
    cats: list[str] = []
    rows_al: list[tuple[str, dict[str, float]]] = []
    pos_rows: list[list[str]] = []
    n_pos = 0
    for lab, run, only in sources:
        rcats, al = tables.category_al(run)
        cats += [c for c in rcats if c not in cats]
        for (arm, v), vals in al.items():
            if only is None or arm in only:
                rows_al.append((f"{lab} {tables.label(arm, v)}".strip(), vals))
        for (arm, v), (joint, cond) in tables.position_curves(run).items():
            if only is None or arm in only:
                n_pos = max(n_pos, len(joint))
                pos_rows.append([f"{lab} {tables.label(arm, v)}".strip(), "joint"] + [tables.fmt(x, 3) for x in joint])
                pos_rows.append([f"{lab} {tables.label(arm, v)}".strip(), "conditional"]
                                + [tables.fmt(x, 3) for x in cond])
    if rows_al:
        cmp.sections.append(Section(title="Acceptance length per category", headers=["arm"] + cats,
                                    rows=[[name] + [tables.fmt(vals.get(c), 3) for c in cats]
                                          for name, vals in rows_al]))
    if pos_rows:
        cmp.sections.append(Section(title="Per-position acceptance",
                                    headers=["arm", "kind"] + [f"pos {i + 1}" for i in range(n_pos)],
                                    rows=pos_rows, left=2))


def compare_arms(run: Run, arm_a: str, arm_b: str) -> Comparison:
    """Two arms of one run against the same baseline on the same prompts."""
    for a in (arm_a, arm_b):
        if a not in run.arms():
            raise UsageError(f"arm '{a}' is not in run {run.run_id}{did_you_mean(a, run.arms())}; its arms are "
                             f"{', '.join(map(str, run.arms()))}")
    cmp = Comparison(title=f"{arm_b} vs {arm_a} in run {run.run_id}", runs=[("", run)], sections=[])
    headers = ["c", f"{arm_a} speedup [95% CI]", f"{arm_b} speedup [95% CI]", f"Δ speedup {arm_b}−{arm_a} [95% CI]",
               "significant", f"{arm_a} {tables.TPS_CLIENT}", f"{arm_b} {tables.TPS_CLIENT}", f"{arm_a} AL",
               f"{arm_b} AL", f"{arm_a} outputs", f"{arm_b} outputs"]
    sec = Section(title="Speedup (headline clock), from each point's stored interval", headers=headers, rows=[])
    for c, v in sorted(set(_keys(run, arm_a)) & set(_keys(run, arm_b))):
        ra = run.row(arm_a, c, v) or SummaryRow()  # a point the run lacks: a row of Nones
        rb = run.row(arm_b, c, v) or SummaryRow()
        iv = _ci_diff(ra, rb)
        if iv.excludes_zero:
            sec.significant_rows.add(len(sec.rows))
        if math.isfinite(iv.value):
            sec.note = f"test: {iv.test}"
        sec.rows.append([f"{c}" + (f" [{v}]" if v else ""),
                         _shown(ra, run), _shown(rb, run),
                         _fmt_diff(iv), _sig(iv), tables.fmt(ra.per_user_tps_mean, 1),
                         tables.fmt(rb.per_user_tps_mean, 1), tables.fmt(al_of(ra)[0], 3),
                         tables.fmt(al_of(rb)[0], 3), _outputs(ra, run), _outputs(rb, run)])
    cmp.sections.append(sec)
    for t in tables.speedup_tables(run):
        if t.arm in (arm_a, arm_b):
            cmp.speedups[tables.label(t.arm, t.variant)] = [(x.concurrency, x.speedup, x.ci_low, x.ci_high)
                                                             for x in t.rows]
    for (a, v), curve in tables.position_curves(run).items():
        if a in (arm_a, arm_b):
            cmp.curves[tables.label(a, v)] = curve
    _category_and_positions(cmp, [("", run, [arm_a, arm_b])])
    return cmp


def merge(comparisons: list[Comparison]) -> Comparison:
    """One page for several comparisons (``--arms`` over several runs)."""
    if len(comparisons) == 1:
        return comparisons[0]
    out = Comparison(title="; ".join(c.title for c in comparisons), runs=[], sections=[])
    for i, c in enumerate(comparisons, 1):
        out.runs += c.runs
        out.notes += c.notes
        for sec in c.sections:
            out.sections.append(Section(title=f"{c.title}: {sec.title}", headers=sec.headers, rows=sec.rows,
                                        note=sec.note,
                                        significant_rows=sec.significant_rows, left=sec.left))
        out.speedups.update({f"#{i} {k}": v for k, v in c.speedups.items()})
        out.curves.update({f"#{i} {k}": v for k, v in c.curves.items()})
    return out


def print_comparison(cmp: Comparison, console) -> None:
    console.print(f"[bold]{escape(cmp.title)}[/bold]")
    for sec in cmp.sections:
        t = Table(title=escape(sec.title), title_justify="left", header_style="bold")
        for i, h in enumerate(sec.headers):
            t.add_column(escape(h), justify="left" if i == 0 else "right")
        for i, row in enumerate(sec.rows):
            t.add_row(*[escape(str(c)) for c in row], style="bold yellow" if i in sec.significant_rows else None)
        print_table(console, t)
        if sec.note:
            console.print(f"[dim]{escape(sec.note)}; highlighted rows differ significantly (95%)[/dim]")
    for n in cmp.notes:
        console.print(f"[yellow]note:[/yellow] {escape(n)}")


def render_comparison_html(cmp: Comparison) -> str:
    body = [f'<header class="top"><h1>{html.esc(cmp.title)}</h1></header>']
    if cmp.notes:
        body.append(html.card(html.Safe("<ul>" + "".join(f"<li>{html.esc(n)}</li>" for n in cmp.notes) + "</ul>"),
                           "Notes", "warn"))
    for sec in cmp.sections:
        rows = [[html.Cell(c, cls=("l sig" if j < sec.left else "sig")) if i in sec.significant_rows else c
                 for j, c in enumerate(row)] for i, row in enumerate(sec.rows)]
        note = (f'<p class="muted">{html.esc(sec.note)}; highlighted rows differ significantly (95%).</p>'
                if sec.note else "")
        body.append(html.card(html.Safe(html.table(sec.headers, rows, left=sec.left) + note), sec.title))
    body.append('<div class="grid">')
    body.append(html.card(html.Safe(plots.speedup_vs_concurrency(cmp.speedups, title="")), "Speedup vs concurrency"))
    if cmp.curves:
        body.append(html.card(html.Safe(plots.position_curves(cmp.curves)), "Per-position acceptance"))
    body.append("</div>")
    return html.page(f"speedbench · {cmp.title}", "".join(body))
