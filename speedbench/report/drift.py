"""The drift section of a report: optimal k, acceptance vs depth and context, EAGLE 3 vs 3.1.

The numbers come from :mod:`speedbench.analysis.drift` (pure); this module only formats them,
and lays out the plots of :mod:`speedbench.report.drift_plots`.

``run`` (for the ``drift_section_*`` functions) is any object with
  * ``rows``: the summary rows (SummaryRow objects, as results.run.Run reads them);
  * ``scenario``: the resolved scenario dict (``workload.variants``, ``arms``), or None;
  * ``engine``: the engine that ran it (its speculative flag heads the optimal-k table).
``speedbench.results.loader.load_run(path)`` returns such an object.
"""

from __future__ import annotations

import html
import re
import math
import shlex
from dataclasses import dataclass
from typing import Any

from speedbench.results.run import RunEngine as Engine
from speedbench.metrics.registry import SummaryRow
from speedbench.analysis.drift import (
    ContextCurve,
    DepthCurve,
    OptimalK,
    context_curves,
    depth_curves,
    optimal_k,
    usable,
)
from speedbench.analysis.separation import SEPARATION_REL, Separation, eagle_pairs, separation
from speedbench.report.drift_plots import (
    group_by,
    plot_al_vs_context,
    plot_al_vs_k,
    plot_conditional,
    plot_separation,
    plot_tps_vs_k,
)
from speedbench.results.stored_scenario import StoredScenario
from speedbench.workload.padding import context_buckets

__all__ = [
    "optimal_k", "depth_curves", "context_curves", "separation", "drift_table",
    "drift_sections", "drift_section_md", "drift_section_html", "plot_al_vs_k", "plot_conditional",
    "plot_al_vs_context", "plot_separation", "plot_tps_vs_k",
]

# The optimal-k table's columns; a last one, headed by the engine's speculative flag
# (vLLM's --speculative-config), holds the chosen config ready to paste.
TABLE_COLUMNS = ("draft", "variant", "concurrency", "best k", "speedup [95% CI]", "proxy best k")
TIE_NOTE = (
    "When the best k's speedup CI overlaps another k's, the means cannot be told apart, so the "
    "pick is the k with the higher CI lower bound (then the smaller k, the cheaper draft)."
)


# ---- formatting ---------------------------------------------------------------------------


def _f(x: float, digits: int = 2, suffix: str = "") -> str:
    return f"{x:.{digits}f}{suffix}" if isinstance(x, (int, float)) and math.isfinite(x) else "n/a"


def _speedup_cell(o: OptimalK) -> str:
    if not math.isfinite(o.speedup):
        return f"{_f(o.per_user_tps, 1)} tok/s (no baseline)"
    return f"{_f(o.speedup, 2, '×')} [{_f(o.ci_low)}, {_f(o.ci_high)}]"


@dataclass(frozen=True)
class OptimalKRow:
    """One row of the optimal-k table as text: TABLE_COLUMNS' cells, then the chosen
    config as the engine's speculative flag takes it (``config``)."""

    draft: str
    variant: str
    concurrency: str
    best_k: str
    speedup: str
    proxy_best_k: str
    config: str

    def cells(self) -> list[str]:
        """In the order of the table's columns (:func:`_columns`)."""
        return [self.draft, self.variant, self.concurrency, self.best_k, self.speedup, self.proxy_best_k,
                self.config]


def drift_table(rows: list[SummaryRow], engine: Engine,
                arms_spec: dict[str, dict] | None = None) -> list[OptimalKRow]:
    """The optimal-k table as plain text rows (columns: TABLE_COLUMNS and the engine's
    speculative flag), for any renderer."""
    return _opt_rows(optimal_k(rows, arms_spec=arms_spec), engine)


def _columns(engine: Engine) -> list[str]:
    return [*TABLE_COLUMNS, engine.speculative_flag]


def _opt_rows(opts: list[OptimalK], engine: Engine) -> list[OptimalKRow]:
    out = []
    for o in opts:
        best = str(o.best_k)
        if o.tie:
            others = ",".join(str(k) for k in o.contenders if k != o.best_k)
            best += f" (tie with k={others}; by CI)"
        out.append(OptimalKRow(
            draft=o.series, variant=o.variant or "-", concurrency=str(o.concurrency), best_k=best,
            speedup=_speedup_cell(o), proxy_best_k=str(o.proxy_best_k) if o.proxy_best_k is not None else "n/a",
            config=shlex.join(engine.speculative_args(o.speculative_config))))
    return out


# ---- the sections -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Drift:
    """What the drift section shows, collected once from the run's rows."""

    engine: Engine
    opts: list[OptimalK]
    depth: list[DepthCurve]
    context: list[ContextCurve]
    buckets: dict[str, int]
    seps: list[Separation]
    failed: list[str]  # sweep arms left out: no usable row


def _collect(run: Any) -> _Drift | None:
    rows: list[SummaryRow] = list(getattr(run, "rows", None) or [])  # results.run.Run's, read once
    scenario = getattr(run, "scenario", None) or {}
    arms_spec = {str(a.name): dict(a.speculative_config or {}) for a in StoredScenario.from_dict(scenario).arms}
    buckets = context_buckets(scenario)
    engine = run.engine
    depth, context = depth_curves(rows), context_curves(rows, buckets)
    if not depth and not context:
        return None
    seps = []
    for a, b in eagle_pairs(rows):
        variants = list(dict.fromkeys(c.variant for c in depth if c.series == a))
        seps += [separation(rows, a, b, "depth", variant=v) for v in variants]
        if buckets:
            seps.append(separation(rows, a, b, "context", variant_tokens=buckets))
    sweep_arms = {str(r.arm) for r in rows if r.template not in (None, "", r.arm)}
    return _Drift(engine=engine, opts=optimal_k(rows, arms_spec=arms_spec), depth=depth, context=context,
                  buckets=buckets, seps=[s for s in seps if len(s.points) >= 2],
                  failed=sorted(a for a in sweep_arms if a not in {str(r.arm) for r in usable(rows)}))


def _table_rows(data: _Drift) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, body) for every table in the section, shared by markdown and HTML."""
    out = []
    table = _opt_rows(data.opts, data.engine)
    if table:
        out.append(("Optimal k per concurrency", _columns(data.engine), [r.cells() for r in table]))
    if data.depth:
        kmax = sorted({k for c in data.depth for k in c.ks})
        out.append(("Acceptance length vs k", ["draft", "variant", "concurrency", *[f"k={k}" for k in kmax]],
                    [[c.series, c.variant or "-", str(c.concurrency),
                      *[_f(dict(zip(c.ks, c.al)).get(k, math.nan)) for k in kmax]]
                     for c in data.depth]))
        low: dict[tuple[str, str], DepthCurve] = {}
        for c in data.depth:
            key = (c.series, c.variant)
            if key not in low or c.concurrency < low[key].concurrency:
                low[key] = c
        npos = max((len(v) for c in low.values() for v in c.conditional), default=0)
        body = [[c.series, c.variant or "-", str(c.concurrency), str(k),
                 *[_f(v) for v in cond] + [""] * (npos - len(cond))]
                for c in low.values() for k, cond in zip(c.ks, c.conditional) if cond]
        if body:
            out.append(("Conditional acceptance by position (lowest concurrency)",
                        ["draft", "variant", "concurrency", "k", *[f"pos {i + 1}" for i in range(npos)]], body))
    if data.context:
        names = sorted({v for c in data.context for v in c.variants}, key=lambda v: data.buckets[v])
        out.append(("Acceptance length vs context length", ["arm", "concurrency",
                                                            *[f"{v} ({data.buckets[v]})" for v in names]],
                    [[c.arm, str(c.concurrency), *[_f(dict(zip(c.variants, c.al)).get(v, math.nan)) for v in names]]
                     for c in data.context]))
    if data.seps:
        out.append(("EAGLE 3 vs EAGLE 3.1: where acceptance separates",
                    ["EAGLE 3", "EAGLE 3.1", "axis", "held fixed", "concurrency", "first separation", "higher AL",
                     "AL difference there"],
                    [[s.a, s.b, s.axis, s.fixed or "-", str(s.concurrency),
                      str(s.first) if s.first is not None else "none",
                      s.leader or "", _sep_diff(s)] for s in data.seps]))
    return out


def _sep_diff(s: Separation) -> str:
    p = next((p for p in s.points if p.x == s.first), None)
    return _f(100 * p.rel_diff, 1, "%") if p else ""


_MD_HTML = re.compile(r"<|&(?=#?\w+;)")
INTRO = (
    "EAGLE drafts lose acceptance as speculation gets deeper and contexts longer (attention drift). "
    "AL = 1 + accepted / drafts. Conditional acceptance at position i = accepted_at_pos[i] / "
    "accepted_at_pos[i-1]. Proxy best k = the k with the best SPEED-Bench proxy t_ar·AL/t_sd. "
    f"Curves separate where the AL difference exceeds {SEPARATION_REL:.0%} of EAGLE 3's AL and the rows' own "
    "token-vs-Prometheus AL disagreement. See docs/drift.md."
)


def _md(s: str) -> str:
    # plain Markdown (report/markdown.py): "<" and an entity's "&" backslash-escaped, so no
    # tag opens; quotes stay, keeping the JSON of --speculative-config copy-pasteable, and
    # pipes would split a table cell.
    return _MD_HTML.sub(r"\\\g<0>", str(s)).replace("|", "\\|").replace("\n", " ")


def drift_sections(run: Any) -> tuple[str, str]:
    """(Markdown, HTML) drift sections of one run from one pass over its rows; ('', '')
    without sweeps or context buckets."""
    data = _collect(run)
    return ("", "") if data is None else (_section_md(data), _section_html(data))


def drift_section_md(run: Any) -> str:
    """Markdown: tables only (plots are in report.html); '' without sweeps or context buckets."""
    data = _collect(run)
    return "" if data is None else _section_md(data)


def drift_section_html(run: Any) -> str:
    """HTML: the same tables plus inline SVG plots; '' without sweeps or context buckets."""
    data = _collect(run)
    return "" if data is None else _section_html(data)


def _section_md(data: _Drift) -> str:
    lines = ["## Speculation depth and context drift", "", _md(INTRO), ""]
    for title, header, body in _table_rows(data):
        lines += [f"### {_md(title)}", "", "| " + " | ".join(_md(h) for h in header) + " |",
                  "|" + "---|" * len(header)]
        for row in body:
            cells = [f"`{_md(c)}`" if c.startswith("--") else _md(c) for c in row]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        if title.startswith("Optimal"):
            lines += [_md(TIE_NOTE), ""]
    if data.failed:
        lines += [f"Left out (failed): {_md(', '.join(data.failed))}", ""]
    lines += ["Plots (AL vs k, conditional acceptance, AL vs context, EAGLE 3 vs 3.1, per-user TPS vs k) "
              "are in report.html.", ""]
    return "\n".join(lines)


def _html_table(header: list[str], body: list[list[str]]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    trs = "".join(
        "<tr>" + "".join(f"<td><code>{e(c)}</code></td>" if c.startswith("--") else f"<td>{e(c)}</td>" for c in row)
        + "</tr>"
        for row in body
    )
    return f'<table class="drift"><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>'


def _figure(svg: str, caption: str) -> str:
    return f'<figure class="plot">{svg}<figcaption>{html.escape(caption)}</figcaption></figure>'


def _section_html(data: _Drift) -> str:
    e = html.escape
    parts = ['<section class="drift">', "<h2>Speculation depth and context drift</h2>", f"<p>{e(INTRO)}</p>"]
    tables = {t: (h, b) for t, h, b in _table_rows(data)}
    for title, (header, body) in tables.items():
        parts += [f"<h3>{e(title)}</h3>", _html_table(header, body)]
        if title.startswith("Optimal"):
            parts.append(f"<p>{e(TIE_NOTE)}</p>")
            for series, os_ in group_by(data.opts, "series").items():
                parts.append(_figure(plot_tps_vs_k(os_), f"Per-user TPS vs k for {series}; ★ marks the chosen k."))
        elif title == "Acceptance length vs k":
            parts.append(_figure(plot_al_vs_k(data.depth), "AL vs k; the grey line is the ceiling k+1."))
        elif title.startswith("Conditional"):
            for series, cs in group_by(data.depth, "series").items():
                if any(cs_c for c in cs for cs_c in c.conditional):
                    parts.append(_figure(plot_conditional(cs), f"Conditional acceptance by position for {series}."))
        elif title.startswith("Acceptance length vs context"):
            parts.append(_figure(plot_al_vs_context(data.context), "AL vs context length per arm."))
        elif title.startswith("EAGLE"):
            parts.append(_figure(plot_separation(data.seps), "Dashed line: first point where the curves separate."))
    if data.failed:
        parts.append(f"<p>Left out (failed): {e(', '.join(data.failed))}</p>")
    parts.append("</section>")
    return "\n".join(parts)
