"""report.html: the report model (model.py) as one self-contained file (inline CSS, inline
SVG, no JavaScript).

Safety: every string goes through :func:`esc` unless it is :class:`Safe` (HTML we built
ourselves from escaped parts); table cells are escaped by default. A Content-Security-
Policy meta tag forbids scripts and remote loads, so even a missed escape cannot run
code or phone home. The page shell and table helpers are shared with compare and the
dashboard.
"""

from __future__ import annotations

import html as _html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from speedbench import __version__
from speedbench.report import plots
from speedbench.report import tables
from speedbench.report.model import REPORT_TITLE, Lines, Plots, Report, Section, Speedups, Table, Tables

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
td.bad{color:var(--bad);font-weight:600}
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


def run_plots(p: Plots) -> list[tuple[str, str]]:
    """(caption, svg) for the five report plots."""
    colors = arm_colors(p.labels)
    return [
        ("Per-user TPS vs concurrency", plots.lines_vs_concurrency(p.tps, "per-user TPS (tokens/s)", "", colors)),
        ("Speedup vs concurrency; diamonds: reference figures",
         plots.speedup_vs_concurrency(p.speedups, p.references, title="", colors=colors)),
        ("Acceptance length per arm and concurrency",
         plots.grouped_bars(p.groups, p.al, "AL pooled over steps (tokens/step)", "", colors=colors)),
        ("Per-position acceptance, pooled over concurrency levels", plots.position_curves(p.positions, colors)),
        ("Acceptance length per category (mean over requests, as SPEED-Bench); black bars: reference",
         plots.grouped_bars(p.categories, p.category_al, "AL mean over requests (tokens/step)",
                            "", p.category_reference, "reference", colors)),
    ]


def outputs_cell(r: tables.SpeedupRow) -> Any:
    """The compact outputs verdict beside a speedup; a lossy one in red, its reason on hover."""
    return Cell(r.outputs, cls="bad", title=r.lossy) if r.lossy else r.outputs


def speedup_card(t: tables.SpeedupTable, baseline: str | None) -> Safe:
    headers, has_ref = tables.speedup_headers(t, baseline)
    rows = []
    for r in t.rows:
        if r.status == "failed":
            row = [r.concurrency, tables.fmt(r.base_tps, 1), pill("failed"), "–", "–", "–"] + ["–"] * t.has_other
        else:
            al = tables.fmt(r.al, 2) + (" (Prometheus)" if r.al_source == "prometheus" else "")
            row = [r.concurrency, tables.fmt(r.base_tps, 1), tables.fmt(r.spec_tps, 1),
                   Cell(r.speedup_cell, cls="big bad" if r.lossy else "big", title=r.lossy), outputs_cell(r)]
            row += [r.other_cell] * t.has_other + [al]
        if has_ref:
            row.append(tables.fmt(r.reference, 2, "×"))
        if t.has_predicted:
            row.append(r.predicted_cell)
        rows.append(row)
    draft = f'<p class="muted">draft: {esc(t.draft)}</p>' if t.draft else ""
    return card(Safe(draft + table(headers, rows)), t.title)


def render_html(report: Report, drift_html: str = "") -> str:
    b = [_head(report)]
    for s in report.sections:
        if s.key in SHOWN:
            b += _blocks(s, report.baseline)
    if drift_html:
        b.append(drift_html)  # built by report/drift.py, which escapes its own strings
    return page(f"speedbench · {report.scenario} · {report.run_id}", "".join(b))


# Every section but the terminal's per-arm fallback.
SHOWN = ("speedup", "outputs", "screening", "warnings", "measured", "rate", "plots", "points", "failures", "latency",
         "category_al", "category", "prompts", "positions")


def _head(report: Report) -> str:
    """The page's header, and the noise lines in a card of their own."""
    head = (f'<header class="top"><h1>{REPORT_TITLE}: {esc(report.scenario)}</h1>'
            f'<div class="sub">run {esc(report.run_id)}'
            + (f" · {esc(report.created)}" if report.created else "")
            + f" · {esc(report.hardware)}</div></header>")
    if report.noise:
        head += card(Safe("".join(f"<p><strong>{esc(x)}</strong></p>" for x in report.noise)), "Noise")
    return head


def _h2(s: Section) -> str:
    return f"<h2>{esc(s.title)}</h2>"


def _muted(s: Section) -> str:
    return f'<p class="muted">{esc(s.page_note)}</p>' if s.page_note else ""


def _blocks(s: Section, baseline: str | None) -> list[str]:
    """One section: a heading and cards; screening, warnings, what was measured and the
    failures are one titled card each."""
    c = s.content
    if isinstance(c, Speedups):
        return [_h2(s)] + ([speedup_card(t, baseline) for t in c.tables]
                           or [card(Safe(f"<p>{esc(s.page_note)}</p>"))])
    if isinstance(c, Plots):
        return [_h2(s) + '<div class="grid">'] + [card(Safe(svg), caption) for caption, svg in run_plots(c)] + [
            "</div>"]
    if isinstance(c, Tables):
        return [_h2(s) + _muted(s)] + [
            Safe(f'<details class="card"><summary>{esc(t.title)} ({len(t.rows)} questions)</summary>'
                 + table(t.headers, t.rows, left=t.left) + "</details>") for t in c.tables]
    if isinstance(c, Lines):
        if c.bulleted:
            return [card(Safe("<ul>" + "".join(f"<li>{esc(w)}</li>" for w in c.lines) + "</ul>"), s.title, "warn")]
        return [card(Safe("".join(f"<p>{esc(x)}</p>" for x in c.lines)), s.title)]
    return _table_blocks(s, c)


def _table_blocks(s: Section, c: Table) -> list[str]:
    if s.key == "points":  # the status as a coloured pill; only the arm is text-aligned
        rows = [[*row[:2], pill(row[2]), *row[3:]] for row in c.rows]
        return [_h2(s), card(table(c.headers, rows, left=1))]
    if s.key == "failures":  # the message is text
        return [card(table(c.headers, [[*row[:-1], Cell(row[-1], cls="l")] for row in c.rows], left=c.left), s.title)]
    if s.key == "outputs":  # a lossy point in red; the reason is text
        marked: list[list[Any]] = [
            [*(Cell(x, cls="l bad" if i < c.left else "bad") if "LOSSY" in row[3] else x
               for i, x in enumerate(row[:-1])), Cell(row[-1], cls="l")] for row in c.rows]
        return [_h2(s), card(Safe(_muted(s) + table(c.headers, marked, left=c.left)))]
    if s.key == "screening":
        return [card(Safe(f"<p>{esc(s.page_note)}</p>" + table(c.headers, c.rows, left=c.left)), s.title)]
    return [_h2(s), card(Safe(_muted(s) + table(c.headers, c.rows, left=c.left)))]
