"""report.md: the same content as report.html, minus the plots.

Every string from a run (arm and model names, failure messages) is escaped for Markdown,
with backslashes only: many Markdown renderers pass raw HTML through, so ``<`` and an
``&`` that would start an entity are escaped too, but the file stays plain Markdown that
reads as text (no ``&#x27;`` or ``&gt;``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from speedbench.metrics.registry import BY_KEY
from speedbench.metrics.headline import headline, headline_clock
from speedbench.metrics.registry import label as metric_label
from speedbench.report import breakdowns
from speedbench.report import header
from speedbench.report import tables
from speedbench.results import Run

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
            row = [r.concurrency, tables.fmt(r.base_tps, 1), "failed", "–", "–"] + ["–"] * t.has_other
        else:
            al = tables.fmt(r.al, 2) + (" (Prometheus)" if r.al_source == "prometheus" else "")
            row = [r.concurrency, tables.fmt(r.base_tps, 1), tables.fmt(r.spec_tps, 1),
                   r.speedup_cell]
            row += [r.other_cell] * t.has_other + [al]
        if has_ref:
            row.append(tables.fmt(r.reference, 2, "×"))
        if t.has_predicted:
            row.append(r.predicted_cell)
        rows.append(row)
    return md_table(headers, rows)


def _head(key: str, *, unit: bool = False) -> str:
    """A column header from the metric registry: its label, with the unit when asked."""
    u = BY_KEY[key].unit if unit and key in BY_KEY else ""
    return f"{metric_label(key)} {u}" if u else metric_label(key)


# "All points": one column per detail_rows() cell, each named by the registry.
DETAIL_HEADERS = [
    _head("arm"), _head("concurrency"), _head("status"), f"{_head('n_ok')}/{_head('n_requests')}",
    f"{_head('per_user_tps_mean')} mean (p10–p90)", _head("output_tps"), _head("ttft_ms_median", unit=True),
    _head("tpot_ms_median", unit=True), _head("speedup_headline_mean"),
    " / ".join(_head(k) for k in ("al_tokens", "al_requests", "al_prometheus")), _head("draft_acceptance_rate"),
]


def detail_rows(run: Run) -> list[list[str]]:
    out = []
    for r in run.rows:
        out.append([
            tables.label(str(r.arm), str(r.variant or "")), str(r.concurrency),
            str(r.status or ""), f"{tables.count(r.n_ok)}/{tables.count(r.n_requests)}",
            (f"{tables.fmt(r.per_user_tps_mean, 1)} ({tables.fmt(r.per_user_tps_p10, 1)}–"
             f"{tables.fmt(r.per_user_tps_p90, 1)})"),
            tables.fmt(r.output_tps, 1), tables.fmt(r.ttft_ms_median, 1), tables.fmt(r.tpot_ms_median, 2),
            tables.fmt_speedup(*headline(r)) + (" (engine)" if headline_clock(r) == "engine" else ""),
            " / ".join(tables.fmt(x, 3) for x in (r.al_tokens, r.al_requests, r.al_prometheus)),
            tables.fmt(r.draft_acceptance_rate, 3),
        ])
    return out


LATENCY_NOTE = ("Over ok measured requests, in ms. TTFT, TPOT and E2E: one value per request. "
                "ITL per token: each inter-chunk gap divided by the chunk's tokens, counted once per token; "
                "ITL per chunk: one value per gap. std is the population standard deviation.")


RATE_NOTE = ("Open loop: requests arrive on a fixed-seed schedule (the same in every arm) whatever is in flight. "
             "Speedup: per-user TPS against the baseline at the same rate. Goodput: requests meeting every SLO "
             "of the scenario's `slo:` per second of the point; within SLO: their share of all requests.")


CATEGORY_NOTE = ("Ok measured requests of each category. Speedup: per-user TPS against the baseline arm's requests "
                 "of the same category at the same concurrency, paired by prompt, with a 95% bootstrap CI. "
                 "AL pooled over steps: 1 + Σaccepted / Σsteps; AL mean over requests: SPEED-Bench's per-category "
                 "definition.")


def category_rows(run: Run) -> tuple[list[str], list[list[str]]]:
    cats, al = tables.category_al(run)
    headers = ["arm"] + cats
    rows = [[tables.label(*k)] + [tables.fmt(v.get(c), 3) for c in cats] for k, v in al.items()]
    ref = [tables.reference_al(run, c) for c in cats]
    if any(math.isfinite(x) for x in ref):
        rows.append([f"reference ({tables.reference_arm(run) or 'published'})"] + [tables.fmt(x, 3) for x in ref])
    return headers, rows


def position_rows(run: Run) -> tuple[list[str], list[list[str]]]:
    curves = tables.position_curves(run)
    n = max((len(j) for j, _ in curves.values()), default=0)
    headers = ["arm", "kind"] + [f"pos {i + 1}" for i in range(n)]
    rows = []
    for k, (joint, cond) in curves.items():
        rows.append([tables.label(*k), "joint"] + [tables.fmt(x, 3) for x in joint])
        rows.append([tables.label(*k), "conditional"] + [tables.fmt(x, 3) for x in cond])
    return headers, rows


def render_markdown(run: Run, drift_md: str = "") -> str:
    parts = [f"# speedbench report: {md(run.scenario_name)}", "",
             f"Run `{md(run.run_id)}`" + (f", created {md(run.created_utc)}" if run.created_utc else "")
             + f", hardware: {md(tables.hardware(run))}.", ""]
    parts += [f"**{md(line)}**  " for line in header.noise_lines(run)] + [""]
    parts += ["## Speedup", ""]
    speedup_tabs = tables.speedup_tables(run)
    for t in speedup_tabs:
        parts += [f"### {md(t.title)}", ""]
        if t.draft:
            parts += [f"Draft: {md(t.draft)}", ""]
        parts += [speedup_table_md(t, run.baseline), ""]
    if not speedup_tabs:
        parts += ["No speculative arm with a baseline in this run.", ""]
    screen_heads, screen_rows = breakdowns.screening_table(run)
    if screen_rows:
        parts += ["## Screening", "", breakdowns.SCREEN_NOTE, "", md_table(screen_heads, screen_rows), ""]
    warnings = tables.run_warnings(run)
    if warnings:
        parts += ["## Warnings (one per cause)", ""] + [f"- {md(w)}" for w in warnings] + [""]
    parts += ["## What was measured", ""] + [md(line) + "  " for line in tables.measured_lines(run)] + [""]
    rows = breakdowns.rate_table(run)
    if rows:
        parts += ["## Request rate (open loop)", "", RATE_NOTE, "",
                  md_table(breakdowns.RATE_HEADERS, rows, "l" + "r" * (len(breakdowns.RATE_HEADERS) - 1)), ""]
    parts += ["## All points", "", md_table(DETAIL_HEADERS, detail_rows(run), "lllrrrrrrrr"), ""]
    headers, rows = breakdowns.latency_table(run)
    if rows:
        parts += ["## Latency distributions", "", LATENCY_NOTE, "",
                  md_table(headers, rows, "lll" + "r" * (len(headers) - 3)), ""]
    headers, rows = category_rows(run)
    if rows:
        parts += ["## Acceptance length per category", "",
                  "Mean over requests of each request's AL, the definition SPEED-Bench publishes per category "
                  "(the main table also gives the AL pooled over steps and from Prometheus).", "",
                  md_table(headers, rows), ""]
    rows = breakdowns.category_table(run)
    if rows:
        parts += ["## Per category", "", CATEGORY_NOTE, "",
                  md_table(breakdowns.CATEGORY_HEADERS, rows, "lll" + "r" * (len(breakdowns.CATEGORY_HEADERS) - 3)), ""]
    headers, rows = position_rows(run)
    if rows:
        parts += ["## Per-position acceptance", "",
                  "Joint: P(at least i drafts accepted in a step). Conditional: P(position i accepted | i-1 accepted).",
                  "", md_table(headers, rows, "ll" + "r" * (len(headers) - 2)), ""]
    if drift_md:
        parts += [drift_md.rstrip(), ""]
    return "\n".join(parts)
