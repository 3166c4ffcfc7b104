"""Static plots as inline SVG strings, for report.html and the dashboard.

Text is drawn as paths (``svg.fonttype='path'``), so no label (model names are
untrusted) ends up as markup, and the SVG renders the same without any font installed.
Mathtext is off for the same reason: a ``$`` in a model name must stay a dollar sign.
Figures are built with the object API (Figure + the SVG canvas, no pyplot), so no GUI
backend is selected and nothing global is touched.
"""

from __future__ import annotations

import datetime as dt
import io
import math
import statistics
import re
from typing import Any
from collections.abc import Sequence

import matplotlib
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

from speedbench.analysis import changepoints

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac"]
_RC: dict[Any, Any] = {  # matplotlib types the keys as a Literal of every rcParams name
    "svg.fonttype": "path",
    "svg.hashsalt": "speedbench",  # stable ids: the same data gives the same file
    "text.parse_math": False,
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,  # grid lines behind bars
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.6,
    "axes.edgecolor": "#888888",
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "legend.frameon": False,
    "legend.fontsize": 8,
}


def color_for(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _c(colors: dict[str, str] | None, name: str, i: int) -> str:
    """A fixed colour per arm across every plot of a page, when the caller gives one."""
    return (colors or {}).get(name) or color_for(i)


def _label(s: str, n: int = 48) -> str:
    s = str(s)
    return s if len(s) <= n else s[: n - 1] + "…"


def to_svg(fig: Figure) -> str:
    """Figure -> a bare ``<svg>`` element that scales with its container."""
    buf = io.StringIO()
    FigureCanvasSVG(fig).print_svg(buf, metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<!--.*?-->", "", svg, flags=re.DOTALL)  # matplotlib escapes these; drop them anyway
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.DOTALL)  # RDF boilerplate
    svg = re.sub(r'(<svg[^>]*?)\s(width|height)="[^"]*"', r"\1", svg, count=1)
    svg = re.sub(r'(<svg[^>]*?)\s(width|height)="[^"]*"', r"\1", svg, count=1)
    return svg.replace("<svg", '<svg class="plot" role="img"', 1)


def _figure(ncols: int = 1, width: float = 6.4, height: float = 3.4):
    """Called inside :func:`_render`, so the style rc is in effect."""
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, list(fig.subplots(1, ncols, squeeze=False)[0])


def _concurrency_axis(ax, levels: Sequence[int]) -> None:
    levels = sorted({int(c) for c in levels})
    if len(levels) > 1 and levels[0] > 0 and levels[-1] / levels[0] >= 4:
        ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(levels))
    ax.xaxis.set_minor_locator(NullLocator())
    fmt = ScalarFormatter()
    fmt.set_scientific(False)
    ax.xaxis.set_major_formatter(fmt)
    ax.set_xlabel("concurrency")


def _render(draw) -> str:
    with matplotlib.rc_context(_RC):
        fig = draw()
        return to_svg(fig)


def _empty(ax, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#888888")
    ax.set_xticks([])
    ax.set_yticks([])


def lines_vs_concurrency(series: dict[str, list[tuple[int, float]]], ylabel: str, title: str,
                         colors: dict[str, str] | None = None) -> str:
    """One line per label, y against concurrency (per-user TPS, output TPS...)."""

    def draw():
        fig, (ax,) = _figure()
        levels = [c for pts in series.values() for c, y in pts if math.isfinite(y)]
        for i, (name, pts) in enumerate(series.items()):
            pts = sorted((c, y) for c, y in pts if math.isfinite(y))
            if pts:
                ax.plot([c for c, _ in pts], [y for _, y in pts], marker="o", color=_c(colors, name, i),
                        label=_label(name))
        if levels:
            _concurrency_axis(ax, levels)
            ax.set_ylim(bottom=0)
            ax.legend(loc="best")
        else:
            _empty(ax)
        ax.set_ylabel(ylabel)
        ax.set_title(title, loc="left")
        return fig

    return _render(draw)


def speedup_vs_concurrency(series: dict[str, list[tuple[int, float, float, float]]],
                           reference: dict[str, list[tuple[int, float]]] | None = None,
                           title: str = "Speedup in per-user TPS (95% CI)",
                           colors: dict[str, str] | None = None) -> str:
    """Speedup with CI error bars per label; reference points as hollow diamonds."""

    def draw():
        fig, (ax,) = _figure()
        levels: list[int] = []
        n = max(len(series), 1)
        for i, (name, pts) in enumerate(series.items()):
            pts = sorted(p for p in pts if math.isfinite(p[1]))
            if not pts:
                continue
            levels += [p[0] for p in pts]
            # spread labels sideways a little so overlapping error bars stay readable
            shift = 2 ** ((i - (n - 1) / 2) * 0.06)
            xs = [p[0] * shift for p in pts]
            ys = [p[1] for p in pts]
            lo = [max(p[1] - p[2], 0) if math.isfinite(p[2]) else 0 for p in pts]
            hi = [max(p[3] - p[1], 0) if math.isfinite(p[3]) else 0 for p in pts]
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, color=_c(colors, name, i), label=_label(name))
        for name, pts in (reference or {}).items():
            pts = sorted(p for p in pts if math.isfinite(p[1]))
            if pts:
                levels += [p[0] for p in pts]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle="none", marker="D", markersize=7,
                        markerfacecolor="none", markeredgecolor="#222222", label=_label(f"reference: {name}"))
        if levels:
            _concurrency_axis(ax, levels)
            ax.axhline(1.0, color="#999999", linewidth=0.8, linestyle="--")
            ax.legend(loc="best")
        else:
            _empty(ax, "no speculative arm with a baseline")
        ax.set_ylabel("speedup (×)")
        ax.set_title(title, loc="left")
        return fig

    return _render(draw)


def grouped_bars(groups: list[str], series: dict[str, dict[str, float]], ylabel: str, title: str,
                 reference: dict[str, float] | None = None, ref_label: str = "reference",
                 colors: dict[str, str] | None = None) -> str:
    """Bars per group (x) and series (colour): AL per arm per concurrency, AL per category."""

    def draw():
        fig, (ax,) = _figure(width=6.4 if len(groups) <= 6 else 8.0)
        names = list(series)
        width = 0.8 / max(len(names), 1)
        drawn = False
        for i, name in enumerate(names):
            xs, ys = [], []
            for g_i, g in enumerate(groups):
                y = series[name].get(g, math.nan)
                if math.isfinite(y):
                    xs.append(g_i - 0.4 + width * (i + 0.5))
                    ys.append(y)
            if xs:
                drawn = True
                ax.bar(xs, ys, width=width * 0.92, color=_c(colors, name, i), label=_label(name))
        ref = [(g_i, reference[g]) for g_i, g in enumerate(groups)
               if reference and math.isfinite(reference.get(g, math.nan))]
        if ref:
            ax.plot([x for x, _ in ref], [y for _, y in ref], linestyle="none", marker="_", markersize=22,
                    markeredgewidth=2, color="#222222", label=_label(ref_label))
        if drawn or ref:
            ax.set_xticks(range(len(groups)), [_label(g, 18) for g in groups])
            ax.grid(axis="x", visible=False)
            top = max([y for s in series.values() for y in s.values() if math.isfinite(y)] + [y for _, y in ref])
            ax.set_ylim(0, top * 1.3)  # headroom so the legend sits above the bars
            ax.legend(loc="upper left", ncol=min(len(names) + bool(ref), 4))
        else:
            _empty(ax)
        ax.set_ylabel(ylabel)
        ax.set_title(title, loc="left")
        return fig

    return _render(draw)


def position_curves(curves: dict[str, tuple[list[float], list[float]]],
                    colors: dict[str, str] | None = None) -> str:
    """Per-position acceptance: joint (P(accepted >= i+1)) and conditional side by side."""

    def draw():
        fig, axes = _figure(ncols=2, width=6.4, height=3.4)
        for ax, idx, title in ((axes[0], 0, "Joint: P(at least i accepted)"),
                               (axes[1], 1, "Conditional: P(i accepted | i-1)")):
            drawn = False
            for i, (name, pair) in enumerate(curves.items()):
                ys = pair[idx]
                if ys:
                    drawn = True
                    ax.plot(range(1, len(ys) + 1), ys, marker="o", color=_c(colors, name, i), label=_label(name, 32))
            if drawn:
                n = max(len(p[idx]) for p in curves.values())
                ax.set_xticks(range(1, n + 1))
                ax.set_ylim(0, 1.02)
                ax.set_xlabel("draft position")
                ax.legend(loc="lower left", fontsize=7)
            else:
                _empty(ax)
            ax.set_title(title, loc="left")
        axes[0].set_ylabel("acceptance rate")
        return fig

    return _render(draw)


def _date_axis(ax, times: list[dt.datetime]) -> None:
    locator = AutoDateLocator(minticks=2, maxticks=5)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    lo, hi = min(times), max(times)
    if hi - lo < dt.timedelta(hours=12):  # one run (or one day): give the axis some width
        ax.set_xlim(lo - dt.timedelta(days=1), hi + dt.timedelta(days=1))


JUDGED_NIGHTS = 60
# A trend series of nights whose outputs differed (the dashboard's lossy speedups): drawn as crosses alone
OUTPUTS_DIFFER = " (outputs differ)"


def _bands_and_marks(ax, ts: list, ys: list[float], hws: list[float], color: str) -> None:
    """Shade each level of the series with its noise band and mark where a level begins,
    with the same judgement as the verdicts (analysis.changepoints): a band is the level's
    mean ± 2 night-to-night sd of its own nights (at most WINDOW of them), so a step
    never widens the band of the nights before it. Only the last JUDGED_NIGHTS nights."""
    # the nights the verdicts judge (report/nightly.py's 60); older ones are settled, and
    # PELT's cost grows with the square of the nights
    ts, ys, hws = ts[-JUDGED_NIGHTS:], ys[-JUDGED_NIGHTS:], hws[-JUDGED_NIGHTS:]
    if len(ys) < 3:
        return
    changes = changepoints.find_changes(ys, hws)
    starts = [0] + [c.index for c in changes] + [len(ys)]
    sd_all = changepoints.robust_sd(ys)
    sd_prev = sd_all
    for a, b in zip(starts, starts[1:]):
        seg = ys[a:b][-changepoints.WINDOW:]
        sd = max(statistics.stdev(seg), sd_all) if len(seg) >= 3 else sd_prev
        m = sum(seg) / len(seg)
        if math.isfinite(sd):
            t1 = ts[b - 1] if b - 1 > a else ts[a] + dt.timedelta(hours=12)
            ax.fill_between([ts[a], t1], m - 2 * sd, m + 2 * sd, color=color, alpha=0.12, linewidth=0)
        sd_prev = sd
    for c in changes:
        ax.axvline(ts[c.index], color=color, linestyle=":", linewidth=1.2)
        down = c.delta < 0
        hollow = c.kind == changepoints.SUSPICIOUS
        ax.plot([ts[c.index]], [ys[c.index]], linestyle="none", marker="v" if down else "^", markersize=9,
                markeredgecolor=color, markerfacecolor="white" if hollow else color, zorder=5)


def _trend_line(ax: Any, name: str, raw: list[tuple], color: str, bands: bool) -> list[Any]:
    """One series of a trend panel: its line, each night's own 95% interval as a bar where
    the run has one, and (``bands``, a measured series) its noise band and change points.
    Returns the times drawn."""
    pts = sorted((p[0], p[1], *(p[2:4] if len(p) >= 4 else (math.nan, math.nan)))
                 for p in raw if math.isfinite(p[1]))
    if not pts:
        return []
    ts, ys = [p[0] for p in pts], [p[1] for p in pts]
    if name.endswith(OUTPUTS_DIFFER):  # lossy nights: marks alone, no line, no levels
        ax.plot(ts, ys, marker="x", markersize=7, markeredgewidth=1.8, color=color, linestyle="none",
                label=_label(name, 60))
        return ts
    style = "--" if name.endswith("(predicted)") else "-"
    ax.plot(ts, ys, marker="o", markersize=3.5, color=color, linestyle=style, label=_label(name, 60))
    bars = [(t, lo, hi) for t, _, lo, hi in pts if math.isfinite(lo) and math.isfinite(hi)]
    if bars:
        ax.vlines([b[0] for b in bars], [b[1] for b in bars], [b[2] for b in bars],
                  color=color, linewidth=1.0, alpha=0.6)
    if bands and not name.endswith("(predicted)"):
        _bands_and_marks(ax, ts, ys, [(hi - lo) / 2 for _, _, lo, hi in pts], color)
    return ts


def trend(panels: dict[str, dict[str, list[tuple]]], ylabel: str,
          colors: dict[str, str] | None = None, bands: bool = False) -> str:
    """Metric over time as small multiples: one panel per key (e.g. concurrency level),
    one line per series (draft checkpoint) with the same colour in every panel (and, when
    ``colors`` is given, on every chart of the page). Points are ``(time, value)`` or
    ``(time, value, ci_low, ci_high)``; the interval is drawn as a bar. ``bands``: shade
    each level's night-to-night noise band and mark its change points (triangles: filled
    for a change seen on 2+ nights, hollow for one seen on the last night only). A series
    named "... (predicted)" is drawn dashed; one named "... (outputs differ)" as crosses alone."""
    names: list[str] = []
    for series in panels.values():
        names += [n for n in series if n not in names]
    colors = {n: _c(colors, n, i) for i, n in enumerate(names)}
    panels = panels or {"": {}}
    ncols = min(len(panels), 3)
    nrows = math.ceil(len(panels) / ncols)

    def draw():
        fig = Figure(figsize=(6.4, 1.0 + 2.3 * nrows + 0.22 * math.ceil(len(names) / 2)), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True).ravel()
        for ax, (title, series) in zip(axes, panels.items()):
            times = [t for name, raw in series.items() for t in _trend_line(ax, name, raw, colors[name], bands)]
            if times:
                _date_axis(ax, times)
            else:
                _empty(ax)
            ax.set_title(title, loc="left", fontsize=9)
        for ax in axes[len(panels):]:
            ax.set_visible(False)
        for ax in axes[::ncols]:
            ax.set_ylabel(ylabel)
        if names:
            handles = {h.get_label(): h for ax in axes for h in ax.get_lines() if not h.get_label().startswith("_")}
            fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=2, fontsize=7)
        return fig

    return _render(draw)
