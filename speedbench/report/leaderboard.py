"""Checkpoints side by side: the latest night of each scenario, one row per checkpoint.

Speedup at each concurrency with its 95% interval (and the calibrated prediction beside
it, where there is one), AL pooled over concurrency by both definitions (pooled over
steps, mean over requests), AL per category by both, the best of each column marked, and
the pairwise differences in speedup, paired by prompt (every checkpoint of one run ran
against the same baseline requests, so prompt difficulty cancels).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from speedbench.analysis.al_trend import al_trends
from speedbench.metrics.cells import num, pool_by_n_ok
from speedbench.metrics.headline import headline, headline_clock
from speedbench.metrics.registry import SummaryRow
from speedbench.report import html, significance, tables
from speedbench.report.nightly import checkpoint, lossy
from speedbench.report.plots import OUTPUTS_DIFFER
from speedbench.results import Run

MAX_PAIRS = 15  # pairwise rows per concurrency (6 checkpoints)


def _pooled(run: Run, arm: str, variant: str, key: str) -> float:
    # key: one of the AL columns the table loops over, so read through cell (a declared key or KeyError)
    return pool_by_n_ok((r.cell(key), r.n_ok) for r in run.rows
                        if r.arm == arm and (r.variant or "") == variant and r.status != "failed")


def _category(run: Run, arm: str, variant: str, cat: str, key: str) -> float:
    # a category row without requests does not count (floor 0)
    return pool_by_n_ok(((c.cell(key), c.n_ok) for c in run.categories
                         if c.arm == arm and (c.variant or "") == variant and c.category == cat),
                        floor=0.0)


def _mark_best(rows: list[list[Any]], values: list[list[float]], first: int) -> None:
    """Bold the highest finite value of each numeric column (ties all marked)."""
    for j in range(len(values[0]) if values else 0):
        col = [v[j] for v in values]
        finite = [x for x in col if math.isfinite(x)]
        if len(finite) < 2:
            continue
        best = max(finite)
        for i, x in enumerate(col):
            if x == best:
                rows[i][first + j] = html.Cell(html.Safe(f"<b>★ {html.esc(rows[i][first + j])}</b>"),
                                               title="best in this column")


def _main_table(run: Run, keys: list[tuple[str, str]], levels: list[int]) -> str:
    rows, values = [], []
    for arm, v in keys:
        row: list[Any] = [tables.label(checkpoint(run, arm), v)]
        vals = []
        for c in levels:
            r = run.row(arm, c, v) or SummaryRow()  # a point the run lacks: a row of Nones
            m, lo, hi = headline(r)  # the clock that holds: the star goes to the figure every report shows
            text = tables.fmt_speedup(m, lo, hi) + (" (engine)" if headline_clock(r) == "engine" else "")
            pred = num(r.speedup_predicted)
            # outputs that differ from the baseline's: no speedup of the same computation, no star
            differ = lossy(run.outputs_of(arm, c, v))
            row.append(text + (f" (predicted {pred:.2f})" if math.isfinite(pred) else "")
                       + (OUTPUTS_DIFFER if differ else ""))
            vals.append(math.nan if differ else m)
        for key in ("al_tokens", "al_requests"):
            al = _pooled(run, arm, v, key)
            row.append(tables.fmt(al, 3))
            vals.append(al)
        rows.append(row)
        values.append(vals)
    _mark_best(rows, values, 1)
    heads = ["checkpoint", *(f"speedup c={c} (95%)" for c in levels), "AL pooled over steps", "AL mean over requests"]
    return html.table(heads, rows)


def _category_table(run: Run, keys: list[tuple[str, str]]) -> str:
    cats = sorted({str(c.category) for c in run.categories if c.category})
    if not cats:
        return ""
    rows, values = [], []
    for arm, v in keys:
        vals = [_category(run, arm, v, cat, key) for cat in cats for key in ("al_requests", "al_tokens")]
        rows.append([tables.label(checkpoint(run, arm), v)] + [tables.fmt(x, 3) for x in vals])
        values.append(vals)
    _mark_best(rows, values, 1)
    heads = ["checkpoint"] + [f"{cat} AL {d}" for cat in cats for d in ("(requests)", "(steps)")]
    return html.table(heads, rows)


def _pairs_table(run: Run, keys: list[tuple[str, str]], levels: list[int]) -> str:
    """Every pair's headline speedup difference from the two points' stored intervals
    (as `compare --arms`), so its sign and its test agree with the figures starred above."""
    rows = []
    for c in levels:
        for (a, va), (b, vb) in list(itertools.combinations(keys, 2))[:MAX_PAIRS]:
            if va != vb:
                continue
            iv = significance.stored_diff(run.row(a, c, va) or SummaryRow(), run.row(b, c, vb) or SummaryRow())
            if not math.isfinite(iv.value):
                continue
            sig = "yes" if iv.excludes_zero else "no"
            cell = f"{iv.value:+.3f}" + (f" [{iv.low:+.3f}, {iv.high:+.3f}]" if iv.n else "")
            rows.append([tables.label(f"{b} − {a}", va), c, cell,
                         html.Cell(sig, cls="sig") if iv.excludes_zero else sig])
    if not rows:
        return ""
    return html.table(["speedup difference", "concurrency", "Δ (95%, from the stored intervals)", "significant"],
                      rows, left=1)


def leaderboard(name: str, run: Run, link: str | None) -> str:
    """One card: the scenario's latest night, checkpoints side by side."""
    keys = [(arm, v) for arm in tables.spec_arms(run) for v in tables.variants(run)]
    if not keys:
        return ""
    levels = tables.concurrencies(run)
    when = f'<a href="{html.esc(link)}">{html.esc(run.run_id)}</a>' if link else html.esc(run.run_id)
    inner = (f'<p class="muted">Latest night: {when}. ★ best in its column.</p>' + _main_table(run, keys, levels)
             + _category_table(run, keys) + _pairs_table(run, keys, levels))
    drifts = [t.line() for t in al_trends(run.records) if t.significant]
    if drifts:  # AL that moved while the servers ran (analysis/al_trend.py)
        inner += html.card(html.Safe("<ul>" + "".join(f"<li>{html.esc(d)}</li>" for d in drifts) + "</ul>"),
                           "AL within the run", "warn")
    return html.card(html.Safe(inner), f"Checkpoints side by side · {name}")
