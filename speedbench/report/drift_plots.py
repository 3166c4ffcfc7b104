"""The drift section's plots: matplotlib figures saved as inline SVG with text drawn as
paths, so no string from a run (arm names, model paths) ever reaches the HTML as markup.
Figures are built with ``matplotlib.figure.Figure`` directly, never pyplot: no GUI backend,
no global figure registry. report/drift.py lays them out."""

from __future__ import annotations

import io
import math
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullLocator

from speedbench.analysis.drift import ContextCurve, DepthCurve, OptimalK
from speedbench.analysis.separation import Separation

__all__ = ["group_by", "plot_al_vs_context", "plot_al_vs_k", "plot_conditional", "plot_separation", "plot_tps_vs_k"]


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


def group_by(items: list, attr: str = "variant") -> dict[str, list]:
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
    groups = group_by(curves)
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
    groups = group_by(opts)
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


