"""report.html: one self-contained file (inline CSS, inline SVG, no JavaScript).

Safety: every string goes through :func:`esc` unless it is :class:`Safe` (HTML we built
ourselves from escaped parts); table cells are escaped by default. A Content-Security-
Policy meta tag forbids scripts and remote loads, so even a missed escape cannot run
code or phone home. The page shell and table helpers are shared with compare and the
dashboard.
"""

from __future__ import annotations

import html as _html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from speedbench import __version__
from speedbench.metrics.cells import al_of
from speedbench.report import breakdowns
from speedbench.report import header
from speedbench.report import markdown
from speedbench.report import plots
from speedbench.report import tables
from speedbench.results import Run

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

CSS = """
:root{--fg:#1d2330;--muted:#5b6475;--bg:#f5f6f8;--card:#fff;--line:#e2e5ea;--head:#eef1f5;
--accent:#4e79a7;--good:#2e7d32;--warn:#a15c00;--bad:#c62828}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1180px;margin:0 auto;padding:28px 24px 48px}
header.top{border-bottom:3px solid var(--accent);padding-bottom:10px;margin-bottom:18px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:18px;margin:30px 0 10px}
h3{font-size:15px;margin:0 0 6px}
.sub,.muted{color:var(--muted)}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:14px 18px;margin:12px 0;
box-shadow:0 1px 2px rgba(0,0,0,.04)}
.card.warn{border-left:5px solid var(--warn);background:#fffaf0}
.card.warn li{margin:2px 0}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(480px,1fr));gap:14px}
.grid .card{margin:0}
.wrap{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums;font-size:13px}
th,td{padding:6px 10px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th:first-child,td:first-child,th.l,td.l{text-align:left}
thead th{background:var(--head);font-weight:600;white-space:normal;vertical-align:bottom}
tbody tr:hover{background:#f8fafc}
svg.plot{width:100%;height:auto;display:block}
.pill{display:inline-block;padding:0 8px;border-radius:10px;font-size:12px;font-weight:600}
.ok{background:#e6f4ea;color:var(--good)}.partial{background:#fff3e0;color:var(--warn)}
.failed,.interrupted{background:#fdecea;color:var(--bad)}
.big{font-size:15px;font-weight:600}
td.sig{background:#fff4d6;font-weight:600}
footer{margin-top:36px;color:var(--muted);font-size:12px}
a{color:var(--accent)}
.v-reg{background:#fdecea;color:var(--bad)}.v-imp{background:#e6f4ea;color:var(--good)}
.v-sus{background:#fff3e0;color:var(--warn)}.counts{font-size:15px;margin:2px 0 8px}
.counts b{font-size:18px}p.why{margin:12px 0 4px;overflow-wrap:anywhere}
"""


def esc(s: Any) -> str:
    return _html.escape(str(s), quote=True)


class Safe(str):
    """HTML we assembled from escaped parts; :func:`cell` leaves it alone."""


@dataclass
class Cell:
    text: Any
    style: str = ""  # only ever built from numbers by our code; escaped anyway
    cls: str = ""
    title: str = ""


def cell(v: Any, tag: str = "td") -> str:
    if isinstance(v, Cell):
        attrs = "".join(f' {k}="{esc(a)}"' for k, a in (("class", v.cls), ("style", v.style), ("title", v.title)) if a)
        inner = v.text if isinstance(v.text, Safe) else esc(v.text)
        return f"<{tag}{attrs}>{inner}</{tag}>"
    return f"<{tag}>{v if isinstance(v, Safe) else esc(v)}</{tag}>"


def table(headers: Sequence[Any], rows: Sequence[Sequence[Any]], cls: str = "", left: int = 1) -> Safe:
    """``left``: how many leading columns hold text (left-aligned); the rest are numbers."""

    def at(v: Any, i: int) -> Any:
        return Cell(v, cls="l") if i < left and not isinstance(v, Cell) else v

    head = "".join(cell(at(h, i), "th") for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell(at(c, i)) for i, c in enumerate(row)) + "</tr>" for row in rows)
    c = f' class="{esc(cls)}"' if cls else ""
    return Safe(f'<div class="wrap"><table{c}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>')


def pill(status: str | None) -> Safe:
    s = str(status or "")
    known = s if s in ("ok", "partial", "failed", "interrupted") else ""
    return Safe(f'<span class="pill {known}">{esc(s)}</span>')


def card(inner: str, title: str = "", cls: str = "") -> Safe:
    t = f"<h3>{esc(title)}</h3>" if title else ""
    return Safe(f'<section class="card {esc(cls)}">{t}{inner}</section>')


def page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body><main>{body}<footer>generated by speedbench {esc(__version__)}</footer></main></body></html>\n"
    )


def arm_colors(labels: Sequence[str]) -> dict[str, str]:
    return {name: plots.color_for(i) for i, name in enumerate(labels)}


def run_plots(run: Run) -> list[tuple[str, str]]:
    """(caption, svg) for the five report plots."""
    labels = [tables.label(a, v) for a in run.arms() for v in tables.variants(run)]
    colors = arm_colors(labels)
    tps: dict[str, list[tuple[int, float]]] = {}
    for r in run.rows:
        lab = tables.label(str(r.arm), str(r.variant or ""))
        tps.setdefault(lab, []).append((int(r.concurrency), tables.num(r.per_user_tps_mean)))
    speed, ref = {}, {}
    for t in tables.speedup_tables(run):
        lab = tables.label(t.arm, t.variant)
        speed[lab] = [(r.concurrency, r.speedup, r.ci_low, r.ci_high) for r in t.rows]
        pts = [(r.concurrency, r.reference) for r in t.rows if math.isfinite(r.reference)]
        if pts:
            ref[t.arm] = pts
    groups = [f"c={c}" for c in tables.concurrencies(run)]
    al: dict[str, dict[str, float]] = {}
    for r in run.rows:
        if tables.is_speculative(r):
            al.setdefault(tables.label(str(r.arm), str(r.variant or "")), {})[f"c={r.concurrency}"] = al_of(r)[0]
    cats, cat_al = tables.category_al(run)
    ref_cat = {c: tables.reference_al(run, c) for c in cats}
    return [
        ("Per-user TPS vs concurrency", plots.lines_vs_concurrency(tps, "per-user TPS (tokens/s)", "", colors)),
        ("Speedup vs concurrency; diamonds: reference figures",
         plots.speedup_vs_concurrency(speed, ref, title="", colors=colors)),
        ("Acceptance length per arm and concurrency",
         plots.grouped_bars(groups, al, "AL pooled over steps (tokens/step)", "", colors=colors)),
        ("Per-position acceptance, pooled over concurrency levels",
         plots.position_curves({tables.label(*k): v for k, v in tables.position_curves(run).items()}, colors)),
        ("Acceptance length per category (mean over requests, as SPEED-Bench); black bars: reference",
         plots.grouped_bars(cats, {tables.label(*k): v for k, v in cat_al.items()},
                            "AL mean over requests (tokens/step)",
                        "", ref_cat, "reference", colors)),
    ]


def speedup_card(t: tables.SpeedupTable, baseline: str | None) -> Safe:
    headers, has_ref = tables.speedup_headers(t, baseline)
    rows = []
    for r in t.rows:
        if r.status == "failed":
            row = [r.concurrency, tables.fmt(r.base_tps, 1), pill("failed"), "–", "–"] + ["–"] * t.has_other
        else:
            al = tables.fmt(r.al, 2) + (" (Prometheus)" if r.al_source == "prometheus" else "")
            row = [r.concurrency, tables.fmt(r.base_tps, 1), tables.fmt(r.spec_tps, 1),
                   Cell(r.speedup_cell, cls="big")]
            row += [r.other_cell] * t.has_other + [al]
        if has_ref:
            row.append(tables.fmt(r.reference, 2, "×"))
        if t.has_predicted:
            row.append(r.predicted_cell)
        rows.append(row)
    draft = f'<p class="muted">draft: {esc(t.draft)}</p>' if t.draft else ""
    return card(Safe(draft + table(headers, rows)), t.title)


def render_html(run: Run, drift_html: str = "") -> str:
    b = _summary_blocks(run) + _point_blocks(run) + _breakdown_blocks(run)
    if drift_html:
        b.append(drift_html)  # built by report/drift.py, which escapes its own strings
    return page(f"speedbench · {run.scenario_name} · {run.run_id}", "".join(b))


def _summary_blocks(run: Run) -> list[str]:
    """The header, noise, speedup, screening, warnings, what was measured, request rate."""
    b = [f'<header class="top"><h1>speedbench report: {esc(run.scenario_name)}</h1>'
         f'<div class="sub">run {esc(run.run_id)}'
         + (f" · {esc(run.created_utc)}" if run.created_utc else "")
         + f" · {esc(tables.hardware(run))}</div></header>"]
    noise_text = header.noise_lines(run)
    if noise_text:
        b.append(card(Safe("".join(f"<p><strong>{esc(x)}</strong></p>" for x in noise_text)), "Noise"))
    b.append("<h2>Speedup</h2>")
    speedup_tabs = tables.speedup_tables(run)
    b += ([speedup_card(t, run.baseline) for t in speedup_tabs]
          or [card(Safe("<p>No speculative arm with a baseline.</p>"))])
    screen_heads, screen_rows = breakdowns.screening_table(run)
    if screen_rows:
        b.append(card(Safe(f"<p>{esc(breakdowns.SCREEN_NOTE)}</p>" + table(screen_heads, screen_rows)), "Screening"))
    warnings = tables.run_warnings(run)
    if warnings:
        b.append(card(Safe("<ul>" + "".join(f"<li>{esc(w)}</li>" for w in warnings) + "</ul>"),
                      "Warnings (one per cause)", "warn"))
    b.append(card(Safe("".join(f"<p>{esc(x)}</p>" for x in tables.measured_lines(run))), "What was measured"))
    rate_rows = breakdowns.rate_table(run)
    if rate_rows:
        b += ["<h2>Request rate (open loop)</h2>",
              card(Safe(f"<p class=\"muted\">{esc(markdown.RATE_NOTE)}</p>"
                        + table(breakdowns.RATE_HEADERS, rate_rows)))]
    return b


def _point_blocks(run: Run) -> list[str]:
    """Plots, every point, the failures."""
    b = ["<h2>Plots</h2><div class=\"grid\">"]
    b += [card(Safe(svg), caption) for caption, svg in run_plots(run)]
    b.append("</div><h2>All points</h2>")
    rows = markdown.detail_rows(run)
    for row, r in zip(rows, run.rows):
        row[2] = pill(r.status)
    b.append(card(table(markdown.DETAIL_HEADERS, rows, left=1)))
    failures = [(r.arm, r.concurrency, r.failure) for r in run.rows if r.failure]
    if failures:
        b.append(card(table(["arm", "concurrency", "failure"], [[a, c, Cell(f, cls="l")] for a, c, f in failures],
                            left=1),
                      "Failures"))
    return b


def _breakdown_blocks(run: Run) -> list[str]:
    """Latency, category, per-question and per-position tables."""
    b: list[str] = []
    headers, rows = breakdowns.latency_table(run)
    if rows:
        b += ["<h2>Latency distributions</h2>",
              card(Safe(f"<p class=\"muted\">{esc(markdown.LATENCY_NOTE)}</p>" + table(headers, rows, left=3)))]
    headers, rows = markdown.category_rows(run)
    if rows:
        b += ["<h2>Acceptance length per category</h2>", card(table(headers, rows))]
    rows = breakdowns.category_table(run)
    if rows:
        b += ["<h2>Per category</h2>", card(Safe(f"<p class=\"muted\">{esc(markdown.CATEGORY_NOTE)}</p>"
                                                 + table(breakdowns.CATEGORY_HEADERS, rows, left=3)))]
    prompt_tables = breakdowns.prompt_tables(run)
    if prompt_tables:
        b.append("<h2>Per question</h2><p class=\"muted\">One row per question_id of each speculative point "
                 "(every turn and repeat of the prompt pooled), the lowest speedup first: where a regression "
                 "comes from.</p>")
        b += [Safe(f"<details class=\"card\"><summary>{esc(title)} ({len(rows)} questions)</summary>"
                   + table(breakdowns.PROMPT_HEADERS, rows, left=2) + "</details>") for title, rows in prompt_tables]
    headers, rows = markdown.position_rows(run)
    if rows:
        b += ["<h2>Per-position acceptance</h2>",
              card(Safe("<p class=\"muted\">Joint: P(at least i drafts accepted in a step). "
                        "Conditional: P(position i accepted | position i-1 accepted).</p>"
                        + table(headers, rows, left=2)))]
    return b
