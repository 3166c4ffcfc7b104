"""The drift section of a report: optimal k, acceptance vs depth and context, EAGLE 3 vs 3.1.

The numbers come from :mod:`speedbench.analysis.drift` (pure); this module only formats them.
Plots are matplotlib figures saved as inline SVG with text drawn as paths, so no string
from a run (arm names, model paths) ever reaches the HTML as markup. Figures are built
with ``matplotlib.figure.Figure`` directly, never pyplot: no GUI backend, no global
figure registry.

``run`` (for the ``drift_section_*`` functions) is any object with
  * ``summary``: the summary.json dict; ``summary["rows"]`` are the summary rows;
  * ``scenario``: the resolved scenario dict (``workload.variants``, ``arms``), or None.
``speedbench.results.load_run(path)`` returns such an object.
"""

from __future__ import annotations

import html
import io
import re
import math
import shlex
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullLocator

from speedbench.engine import Engine, engine_for_saved
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


def drift_table(rows: list[SummaryRow], engine: Engine,
                arms_spec: dict[str, dict] | None = None) -> list[dict[str, str]]:
    """The optimal-k table as plain string rows (keys: TABLE_COLUMNS and the engine's
    speculative flag), for any renderer."""
    return _opt_rows(optimal_k(rows, arms_spec=arms_spec), engine)


def _columns(engine: Engine) -> list[str]:
    return [*TABLE_COLUMNS, engine.speculative_flag]


def _opt_rows(opts: list[OptimalK], engine: Engine) -> list[dict[str, str]]:
    out = []
    for o in opts:
        best = str(o.best_k)
        if o.tie:
            others = ",".join(str(k) for k in o.contenders if k != o.best_k)
            best += f" (tie with k={others}; by CI)"
        out.append({
            "draft": o.series, "variant": o.variant or "-", "concurrency": str(o.concurrency), "best k": best,
            "speedup [95% CI]": _speedup_cell(o),
            "proxy best k": str(o.proxy_best_k) if o.proxy_best_k is not None else "n/a",
            engine.speculative_flag: shlex.join(engine.speculative_args(o.speculative_config)),
        })
    return out


# ---- plots --------------------------------------------------------------------------------


def _svg(fig: Figure, salt: str) -> str:
    # hashsalt makes the clip-path/marker ids deterministic and distinct per figure, so many
    # inline SVGs can share one HTML page without their ids colliding.
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    s = buf.getvalue()
    return s[s.index("<svg"):]


def _facets(n: int, title: str) -> tuple[Figure, list[Any]]:
    cols = min(max(n, 1), 3)
    rows = math.ceil(max(n, 1) / cols)
    fig = Figure(figsize=(3.6 * cols + 0.6, 2.9 * rows + 0.5), layout="constrained")
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    return fig, axes


def _group_by(items: list, attr: str = "variant") -> dict[str, list]:
    out: dict[str, list] = {}
    for it in items:
        out.setdefault(getattr(it, attr), []).append(it)
    return out


def _legend(ax: Any) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def _k_axis(ax: Any) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _token_axis(ax: Any, tokens: list[int]) -> None:
    # log2 spacing for buckets that double; label them as the configs name them (1k, 8k).
    ax.set_xscale("log", base=2)
    ticks = sorted(set(tokens))
    ax.set_xticks(ticks, [f"{t // 1024}k" if t % 1024 == 0 else str(t) for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


def plot_al_vs_k(curves: list[DepthCurve]) -> str:
    """AL vs k: one panel per variant, one line per draft and concurrency."""
    groups = _group_by(curves)
    fig, axes = _facets(len(groups), "Acceptance length vs speculation depth k")
    styles = ("-", "--", ":", "-.")
    for ax, (variant, cs) in zip(axes, groups.items()):
        concs = sorted({c.concurrency for c in cs})
        for c in cs:
            ax.plot(c.ks, c.al, marker="o", linestyle=styles[concs.index(c.concurrency) % 4],
                    label=f"{c.series} c={c.concurrency}")
        top = max(k for c in cs for k in c.ks)
        ax.plot([1, top], [2, top + 1], color="0.7", linewidth=0.8, label="k+1 (all accepted)")
        ax.set(title=variant or "all prompts", xlabel="k", ylabel="AL pooled over steps (tokens/step)")
        _k_axis(ax)
        _legend(ax)
    return _svg(fig, "al-vs-k")


def plot_conditional(curves: list[DepthCurve]) -> str:
    """Conditional acceptance vs position for one draft: a panel per variant, a line per k.

    At temperature 0 acceptance does not depend on batch size, so each panel uses the
    lowest concurrency measured.
    """
    lowest: dict[str, DepthCurve] = {}
    for c in curves:
        if c.variant not in lowest or c.concurrency < lowest[c.variant].concurrency:
            lowest[c.variant] = c
    series = curves[0].series if curves else ""
    fig, axes = _facets(len(lowest), f"Conditional acceptance by position: {series}")
    for ax, c in zip(axes, lowest.values()):
        for k, cond in zip(c.ks, c.conditional):
            if cond:
                ax.plot(range(1, len(cond) + 1), cond, marker="o", label=f"k={k}")
        ax.set(title=f"{c.variant or 'all prompts'} (c={c.concurrency})", xlabel="draft position",
               ylabel="P(accept | previous accepted)", ylim=(0, 1.05))
        _k_axis(ax)
        _legend(ax)
    return _svg(fig, f"cond-{series}")


def plot_al_vs_context(curves: list[ContextCurve]) -> str:
    """AL vs context length (log2 axis), one line per arm, at each arm's lowest concurrency."""
    lowest: dict[str, ContextCurve] = {}
    for c in curves:
        if c.arm not in lowest or c.concurrency < lowest[c.arm].concurrency:
            lowest[c.arm] = c
    fig, axes = _facets(1, "Acceptance length vs context length")
    ax = axes[0]
    for c in lowest.values():
        ax.plot(c.tokens, c.al, marker="o", label=f"{c.arm} c={c.concurrency}")
    _token_axis(ax, [t for c in lowest.values() for t in c.tokens])
    ax.set(xlabel="input tokens", ylabel="AL pooled over steps (tokens/step)")
    _legend(ax)
    return _svg(fig, "al-vs-ctx")


def plot_separation(seps: list[Separation]) -> str:
    """Two AL curves per panel, the first separated point marked with a dashed line."""
    fig, axes = _facets(len(seps), "EAGLE 3 vs EAGLE 3.1")
    for ax, s in zip(axes, seps):
        xs = [p.x for p in s.points]
        ax.plot(xs, [p.al_a for p in s.points], marker="o", label=s.a)
        ax.plot(xs, [p.al_b for p in s.points], marker="s", label=s.b)
        if s.first is not None:
            ax.axvline(s.first, color="crimson", linestyle="--", linewidth=1, label=f"separate at {s.first}")
        if s.axis == "context":
            _token_axis(ax, xs)
        else:
            _k_axis(ax)
        ax.set(title=f"{s.axis}, c={s.concurrency}, {s.fixed or 'all prompts'}",
               xlabel="k" if s.axis == "depth" else "input tokens", ylabel="AL pooled over steps (tokens/step)")
        _legend(ax)
    return _svg(fig, "sep-" + "-".join(f"{s.a}{s.b}{s.axis}{s.fixed}" for s in seps[:1]))


def plot_tps_vs_k(opts: list[OptimalK]) -> str:
    """Per-user TPS vs k for one draft: a panel per variant, a line per concurrency, ★ = chosen k."""
    groups = _group_by(opts)
    series = opts[0].series if opts else ""
    fig, axes = _facets(len(groups), f"Per-user TPS vs k: {series}")
    for ax, (variant, os_) in zip(axes, groups.items()):
        for o in os_:
            line = ax.plot([p.k for p in o.points], [p.per_user_tps for p in o.points], marker="o",
                           label=f"c={o.concurrency}")[0]
            ax.plot([o.best_k], [o.per_user_tps], marker="*", markersize=14, color=line.get_color(), linestyle="")
        ax.set(title=variant or "all prompts", xlabel="k", ylabel="per-user TPS (tok/s)")
        _k_axis(ax)
        _legend(ax)
    return _svg(fig, f"tps-{series}")


# ---- the sections -------------------------------------------------------------------------


def _collect(run: Any) -> dict[str, Any] | None:
    rows: list[SummaryRow] = list(getattr(run, "rows", None) or [])  # results.run.Run's, read once
    scenario = getattr(run, "scenario", None) or {}
    arms_spec = {str(a.get("name")): a.get("speculative_config") or {} for a in scenario.get("arms") or []}
    buckets = context_buckets(scenario)
    data: dict[str, Any] = {
        "engine": engine_for_saved(scenario),
        "rows": rows, "opts": optimal_k(rows, arms_spec=arms_spec), "depth": depth_curves(rows),
        "context": context_curves(rows, buckets), "buckets": buckets,
    }
    if not data["depth"] and not data["context"]:
        return None
    seps = []
    for a, b in eagle_pairs(rows):
        variants = list(dict.fromkeys(c.variant for c in data["depth"] if c.series == a))
        seps += [separation(rows, a, b, "depth", variant=v) for v in variants]
        if buckets:
            seps.append(separation(rows, a, b, "context", variant_tokens=buckets))
    data["seps"] = [s for s in seps if len(s.points) >= 2]
    sweep_arms = {str(r.arm) for r in rows if r.template not in (None, "", r.arm)}
    data["failed"] = sorted(a for a in sweep_arms if a not in {str(r.arm) for r in usable(rows)})
    return data


def _table_rows(data: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, body) for every table in the section, shared by markdown and HTML."""
    out = []
    table = _opt_rows(data["opts"], data["engine"])
    if table:
        columns = _columns(data["engine"])
        out.append(("Optimal k per concurrency", columns, [[r[c] for c in columns] for r in table]))
    if data["depth"]:
        kmax = sorted({k for c in data["depth"] for k in c.ks})
        out.append(("Acceptance length vs k", ["draft", "variant", "concurrency", *[f"k={k}" for k in kmax]],
                    [[c.series, c.variant or "-", str(c.concurrency),
                      *[_f(dict(zip(c.ks, c.al)).get(k, math.nan)) for k in kmax]]
                     for c in data["depth"]]))
        low: dict[tuple[str, str], DepthCurve] = {}
        for c in data["depth"]:
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
    if data["context"]:
        names = sorted({v for c in data["context"] for v in c.variants}, key=lambda v: data["buckets"][v])
        out.append(("Acceptance length vs context length", ["arm", "concurrency",
                                                            *[f"{v} ({data['buckets'][v]})" for v in names]],
                    [[c.arm, str(c.concurrency), *[_f(dict(zip(c.variants, c.al)).get(v, math.nan)) for v in names]]
                     for c in data["context"]]))
    if data["seps"]:
        out.append(("EAGLE 3 vs EAGLE 3.1: where acceptance separates",
                    ["EAGLE 3", "EAGLE 3.1", "axis", "held fixed", "concurrency", "first separation", "higher AL",
                     "AL difference there"],
                    [[s.a, s.b, s.axis, s.fixed or "-", str(s.concurrency),
                      str(s.first) if s.first is not None else "none",
                      s.leader or "", _sep_diff(s)] for s in data["seps"]]))
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


def _section_md(data: dict[str, Any]) -> str:
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
    if data["failed"]:
        lines += [f"Left out (failed): {_md(', '.join(data['failed']))}", ""]
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


def _section_html(data: dict[str, Any]) -> str:
    e = html.escape
    parts = ['<section class="drift">', "<h2>Speculation depth and context drift</h2>", f"<p>{e(INTRO)}</p>"]
    tables = {t: (h, b) for t, h, b in _table_rows(data)}
    for title, (header, body) in tables.items():
        parts += [f"<h3>{e(title)}</h3>", _html_table(header, body)]
        if title.startswith("Optimal"):
            parts.append(f"<p>{e(TIE_NOTE)}</p>")
            for series, os_ in _group_by(data["opts"], "series").items():
                parts.append(_figure(plot_tps_vs_k(os_), f"Per-user TPS vs k for {series}; ★ marks the chosen k."))
        elif title == "Acceptance length vs k":
            parts.append(_figure(plot_al_vs_k(data["depth"]), "AL vs k; the grey line is the ceiling k+1."))
        elif title.startswith("Conditional"):
            for series, cs in _group_by(data["depth"], "series").items():
                if any(cs_c for c in cs for cs_c in c.conditional):
                    parts.append(_figure(plot_conditional(cs), f"Conditional acceptance by position for {series}."))
        elif title.startswith("Acceptance length vs context"):
            parts.append(_figure(plot_al_vs_context(data["context"]), "AL vs context length per arm."))
        elif title.startswith("EAGLE"):
            parts.append(_figure(plot_separation(data["seps"]), "Dashed line: first point where the curves separate."))
    if data["failed"]:
        parts.append(f"<p>Left out (failed): {e(', '.join(data['failed']))}</p>")
    parts.append("</section>")
    return "\n".join(parts)
