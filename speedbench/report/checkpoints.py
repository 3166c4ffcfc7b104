"""Checkpoints across nights: each checkpoint's speedup (per concurrency) and AL (pooled and
per category) pooled over the nights it ran, and compared with a reference checkpoint
night by night (analysis/checkpoints.py), with Benjamini–Hochberg over every comparison
of a scenario (over the checkpoints, then within each). ``speedbench compare
--checkpoints`` prints it; the dashboard shows it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from speedbench.analysis import checkpoints as stats
from speedbench.metrics import outputs as cmp
from speedbench.metrics.headline import headline, headline_clock
from speedbench.metrics.stored_outputs import OutputsEntry
from speedbench.errors import UsageError
from speedbench.report import html, outputs, tables
from speedbench.report.facts import draft_weights
from speedbench.report.nightly import checkpoint, pooled_al
from speedbench.results import Run

Figure = tuple[str, str]  # ("speedup", "c=4"), ("AL", "pooled"), ("AL", "coding")


@dataclass
class Comparison:
    figure: Figure
    contrast: stats.Contrast
    q: float = math.nan
    call: str = stats.INSUFFICIENT


@dataclass
class CheckpointResult:
    name: str
    nights: int
    pooled: dict[Figure, stats.Pooled] = field(default_factory=dict)
    comparisons: list[Comparison] = field(default_factory=list)
    verdict: str = ""
    # the clocks a speedup figure was read from over its nights: each night's headline clock
    clocks: dict[Figure, set[str]] = field(default_factory=dict)
    # each night's outputs entry of a speedup figure (results/output_summary.py), in night order
    outputs: dict[Figure, list[OutputsEntry]] = field(default_factory=dict)

    def outputs_text(self, fig: Figure) -> str:
        """The figure's outputs over its nights ("outputs identical on 3 of 3 nights"), a
        lossy night first and marked, with the lowest identical fraction where some differ."""
        entries = self.outputs.get(fig) or []
        n = len(entries)
        counts = Counter(outputs.word(e) for e in entries)
        lossy = counts.pop(outputs.SHORT[cmp.LOSSY], 0)
        parts = ([f"{outputs.DIFFER.upper()}: LOSSY on {lossy} of {n} nights"] if lossy else []) + [
            f"{w} on {k} of {n} nights" for w, k in counts.items()]
        fractions = [float(e.identical_fraction) for e in entries if e.identical_fraction is not None]
        if fractions and min(fractions) < 1:
            parts.append(f"lowest {100 * min(fractions):.0f}% identical")
        return "outputs " + ", ".join(parts) if parts else ""

    def metric(self, fig: Figure) -> str:
        """The figure's metric, a speedup's clock named (the headline's: engine where the client's
        interval is unusable), so no night's figure reads as the other clock's."""
        clocks = self.clocks.get(fig)
        return f"{fig[0]} ({' / '.join(sorted(clocks))} clock)" if clocks else fig[0]


@dataclass
class ScenarioComparison:
    scenario: str
    reference: str
    checkpoints: list[CheckpointResult]


class Names:
    """What a checkpoint is called over a scenario's nights: the arm and the draft it loads,
    and, where those loaded more than one set of weights over the nights (a retraining into
    the same folder, a bad upload), the weights' sha256 too: two weight sets under one name
    are two checkpoints, never pooled as one."""

    def __init__(self, runs: Sequence[Run]):
        seen: dict[str, set[str]] = {}
        for run in runs:
            for arm in tables.spec_arms(run):
                seen.setdefault(checkpoint(run, arm), set()).add(draft_weights(run, arm))
        self.split = {ck for ck, sums in seen.items() if len(sums - {""}) > 1}

    def __call__(self, run: Run, arm: str, variant: str = "") -> str:
        ck = checkpoint(run, arm)
        if ck in self.split:
            ck = f"{ck} (weights {draft_weights(run, arm)[:8] or 'unknown'})"
        return tables.label(ck, variant)


def _figures(run: Run, names: Names) -> dict[str, dict[Figure, float]]:
    """Checkpoint -> figure -> the night's value (a speedup: the point's stored headline)."""
    out: dict[str, dict[Figure, float]] = {}
    for r in run.rows:
        if tables.is_speculative(r) and r.status != "failed":
            ck = names(run, str(r.arm), str(r.variant or ""))
            out.setdefault(ck, {})[("speedup", f"c={int(r.concurrency or 0)}")] = headline(r)[0]
    for arm in tables.spec_arms(run):
        for v in tables.variants(run):
            out.setdefault(names(run, arm, v), {})[("AL", "pooled")] = pooled_al(run, arm, v)
    for (arm, v), by_cat in tables.category_al(run)[1].items():
        for cat, al in by_cat.items():
            out.setdefault(names(run, arm, v), {})[("AL", cat)] = al
    return out


def _order(fig: Figure) -> tuple[int, int, str]:
    metric, point = fig
    if metric == "speedup":
        return (0, int(point[2:]) if point[2:].isdigit() else 0, "")
    return (1, 0 if point == "pooled" else 1, point)


def resolve(name: str | None, names: Sequence[str], default: str | None = None) -> str:
    """The reference: a checkpoint's full name, its arm name or its draft path; default the
    scenario's ``checkpoint_reference`` arm (``default``), else the first checkpoint seen
    (the earliest night's first arm). An arm that loaded two weight sets names the first."""
    if not name:
        hits = [n for n in names if default and n.split(" · ")[0] == default]
        return hits[0] if hits else names[0]
    hits = [n for n in names if name in (n, n.split(" · ")[0], n.split(" · ")[-1].split(" [")[0].split(" (weights")[0])]
    if not hits:
        raise UsageError(f"--reference {name!r}: no such checkpoint (have: {', '.join(names)})")
    return hits[0]


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _verdict(comps: list[Comparison]) -> str:
    if all(c.call == stats.INSUFFICIENT for c in comps):
        n = max((c.contrast.nights for c in comps), default=0)
        return f"{stats.INSUFFICIENT} ({n} shared with the reference; {stats.MIN_NIGHTS} needed)"
    parts = []
    speed = [c for c in comps if c.figure[0] == "speedup"]
    by_call: dict[str, list[str]] = {}
    for c in speed:
        by_call.setdefault(c.call, []).append(c.figure[1])
    if by_call:
        parts.append("speedup " + ", ".join(f"{k} at {_and(v)}" for k, v in by_call.items()))
    pooled = next((c for c in comps if c.figure == ("AL", "pooled")), None)
    if pooled is not None:
        parts.append(f"AL pooled {pooled.call}")
    cats = [c for c in comps if c.figure[0] == "AL" and c.figure[1] != "pooled"]
    for word in (stats.BETTER, stats.WORSE):
        hit = [c.figure[1] for c in cats if c.call == word]
        if hit:
            parts.append(f"AL {word} in {', '.join(hit)} ({len(hit)} of {len(cats)} categories)")
    return "; ".join(parts)


def compare_scenario(scenario: str, runs: Sequence[Run], reference: str | None = None) -> ScenarioComparison | None:
    """``runs`` in time order; None when no night has a speculative arm."""
    label = Names(runs)
    nights = [_figures(r, label) for r in runs]
    names = list(dict.fromkeys(ck for night in nights for ck in night))
    if not names:
        return None
    ref = resolve(reference, names, runs[-1].stored_scenario.checkpoint_reference)
    clocks, verdicts = _clocks(runs, label), _outputs(runs, label)
    results = []
    for name in names:
        figs = sorted({f for night in nights for f in night.get(name, {})}, key=_order)
        res = CheckpointResult(name, sum(name in night for night in nights), clocks=clocks.get(name, {}),
                               outputs=verdicts.get(name, {}))
        for fig in figs:
            res.pooled[fig] = stats.pool([night[name][fig] for night in nights if fig in night.get(name, {})])
            if name != ref:
                pairs = [(night[name][fig], night[ref][fig]) for night in nights
                         if fig in night.get(name, {}) and fig in night.get(ref, {})]
                res.comparisons.append(Comparison(fig, stats.contrast(pairs)))
        results.append(res)
    _control(results)
    return ScenarioComparison(scenario, ref, results)


def _clocks(runs: Sequence[Run], names: Names) -> dict[str, dict[Figure, set[str]]]:
    """Checkpoint -> speedup figure -> the headline clocks its nights were read from."""
    out: dict[str, dict[Figure, set[str]]] = {}
    for run in runs:
        for r in run.rows:
            if tables.is_speculative(r) and r.status != "failed" and math.isfinite(headline(r)[0]):
                ck = names(run, str(r.arm), str(r.variant or ""))
                fig = ("speedup", f"c={int(r.concurrency or 0)}")
                out.setdefault(ck, {}).setdefault(fig, set()).add(headline_clock(r))
    return out


def _outputs(runs: Sequence[Run], names: Names) -> dict[str, dict[Figure, list[OutputsEntry]]]:
    """Checkpoint -> speedup figure -> each night's outputs entry (Run.outputs_of)."""
    out: dict[str, dict[Figure, list[OutputsEntry]]] = {}
    for run in runs:
        for r in run.rows:
            if tables.is_speculative(r) and r.status != "failed":
                ck = names(run, str(r.arm), str(r.variant or ""))
                fig = ("speedup", f"c={int(r.concurrency or 0)}")
                e = run.outputs_of(str(r.arm), int(r.concurrency or 0), str(r.variant or ""))
                out.setdefault(ck, {}).setdefault(fig, []).append(e)
    return out


def _control(results: list[CheckpointResult]) -> None:
    """Benjamini–Hochberg over every comparison of the scenario (over the checkpoints, then
    within each: analysis.checkpoints.two_level_q), then each checkpoint's verdict."""
    qs = stats.two_level_q([[c.contrast.p for c in r.comparisons] for r in results])
    for r, q_row in zip(results, qs):
        for c, q in zip(r.comparisons, q_row):
            c.q, c.call = q, stats.call(c.contrast, q)
    for r in results:
        r.verdict = _verdict(r.comparisons) if r.comparisons else "the reference"


def compare_all(by_scenario: dict[str, list[Run]], reference: str | None = None) -> list[ScenarioComparison]:
    """Every scenario's comparison; with ``reference``, the scenarios that have it."""
    out = []
    for name, runs in by_scenario.items():
        try:
            sc = compare_scenario(name, runs, reference)
        except UsageError:
            continue  # this scenario has no such checkpoint
        if sc is not None:
            out.append(sc)
    if reference and not out:
        raise UsageError(f"--reference {reference!r}: no scenario has such a checkpoint (an arm name, a draft "
                         "path or a full checkpoint name)")
    return out


def _ci(p: stats.Pooled | stats.Contrast, ratio: bool = False) -> str:
    v = p.ratio if isinstance(p, stats.Contrast) else p.value
    if not math.isfinite(v):
        return "–"
    head = f"×{v:.3f}" if ratio else f"{v:.3f}"
    return head + (f" [{p.low:.3f}, {p.high:.3f}]" if math.isfinite(p.low) else "")


def text_lines(comparisons: Sequence[ScenarioComparison]) -> list[str]:
    lines = []
    for sc in comparisons:
        ref = next(r for r in sc.checkpoints if r.name == sc.reference)
        lines.append(f"{sc.scenario}: reference {sc.reference} ({ref.nights} nights); "
                     f"Benjamini–Hochberg at q={stats.Q} over every comparison below")
        for r in sc.checkpoints:
            lines.append(f"  {r.name} ({r.nights} nights): {r.verdict}")
            comps = {c.figure: c for c in r.comparisons}
            for fig, pooled in r.pooled.items():
                line = f"    {r.metric(fig)} {fig[1]}: {_ci(pooled)} over {pooled.nights} nights"
                c = comps.get(fig)
                if r.outputs_text(fig):
                    line += f"; {r.outputs_text(fig)}"
                if c is not None:
                    line += (f"; vs reference {_ci(c.contrast, True)} over {c.contrast.nights} nights, "
                             f"q={c.q:.3g}: {c.call}" if math.isfinite(c.q) else f"; {c.call}")
                lines.append(line)
    return lines


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def as_json(comparisons: Sequence[ScenarioComparison]) -> list[dict[str, Any]]:
    out = []
    for sc in comparisons:
        cks = []
        for r in sc.checkpoints:
            pooled = [{"metric": f[0], "point": f[1], "clocks": sorted(r.clocks.get(f, ())), "value": _finite(p.value),
                       "low": _finite(p.low), "high": _finite(p.high), "nights": p.nights,
                       **({"outputs": [_night_outputs(e) for e in r.outputs[f]]} if f in r.outputs else {})}
                      for f, p in r.pooled.items()]
            comps = [{"metric": c.figure[0], "point": c.figure[1], "ratio": _finite(c.contrast.ratio),
                      "low": _finite(c.contrast.low), "high": _finite(c.contrast.high), "p": _finite(c.contrast.p),
                      "q": _finite(c.q), "nights": c.contrast.nights, "call": c.call} for c in r.comparisons]
            cks.append({"checkpoint": r.name, "nights": r.nights, "verdict": r.verdict, "pooled": pooled,
                        "versus_reference": comps})
        out.append({"scenario": sc.scenario, "reference": sc.reference, "fdr_q": stats.Q, "level": stats.LEVEL,
                    "min_nights": stats.MIN_NIGHTS, "checkpoints": cks})
    return out


def _night_outputs(e: OutputsEntry) -> dict[str, Any]:
    return {"verdict": e.verdict, "reason": e.reason, "identical_fraction": e.identical_fraction}


def _cell(r: CheckpointResult, fig: Figure) -> Any:
    p = r.pooled.get(fig)
    c = next((c for c in r.comparisons if c.figure == fig), None)
    if p is None:
        return "–"
    clocks = " / ".join(sorted(r.clocks.get(fig, ())))
    text = f"{_ci(p)} ({clocks + ' clock, ' if clocks else ''}{p.nights} nights)"
    if c is not None:
        text += f" · {_ci(c.contrast, True)} ({c.contrast.nights} nights) {c.call}"
    return html.Cell(text, cls="sig") if c is not None and c.call in (stats.BETTER, stats.WORSE) else text


def block(comparisons: Sequence[ScenarioComparison]) -> str:
    """The dashboard's section: per scenario, one row per checkpoint."""
    cards = []
    for sc in comparisons:
        figs = sorted({f for r in sc.checkpoints for f in r.pooled if f[0] == "speedup" or f[1] == "pooled"},
                      key=_order)
        rows = [[r.name, r.nights, *(_cell(r, f) for f in figs), html.Cell(r.verdict, cls="l")] for r in sc.checkpoints]
        note = (f'<p class="muted">Each figure pooled over the nights it ran (geometric mean, 95% t interval over '
                f"nights; in brackets the nights it rests on), then × the reference <b>{html.esc(sc.reference)}</b> "
                f"measured the same nights. Calls: Benjamini–Hochberg at q={stats.Q} over every checkpoint × "
                f"concurrency × category comparison; fewer than {stats.MIN_NIGHTS} shared nights: "
                f"{stats.INSUFFICIENT}.</p>")
        heads = ["checkpoint", "nights",
                 *(f"{m} {p}" + (" (headline clock)" if m == "speedup" else "") for m, p in figs),
                 "verdict vs reference"]
        cards.append(html.card(html.Safe(note + html.table(heads, rows, left=1)),
                               f"Checkpoints across nights · {sc.scenario}"))
    return "".join(cards)
