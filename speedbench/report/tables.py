"""What every report shows, as plain data: the published-shape speedup tables, AL per
category and per-position curves, and the cells every view formats the same way.

The terminal, markdown, HTML, compare and dashboard renderers all format these, so
they can never disagree about which number goes in which column. The run's facts
(models, hardware, vLLM) come from facts.py; the "what was measured" lines and the
warnings are in notes.py; the latency, category, prompt and rate tables are in breakdowns.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from speedbench.report import outputs
from speedbench.report.trust import confounded
from speedbench.metrics.cells import al_of, cell, num, pool_by_n_ok
from speedbench.metrics.headline import (
    CLIENT,
    ENGINE,
    clock_figure,
    headline,
    headline_clock,
    other_clock,
)
from speedbench.metrics.registry import SummaryRow
from speedbench.metrics.stored import CategoryRow
from speedbench.metrics.registry import label as metric_label
from speedbench.report.facts import draft_model
from speedbench.results import Run


def ok(v: Any) -> bool:
    return math.isfinite(num(v))


def fmt(v: Any, digits: int = 2, suffix: str = "") -> str:
    x = num(v)
    return f"{x:.{digits}f}{suffix}" if math.isfinite(x) else "–"


def count(v: int | None) -> str:
    # a count an old run folder's row lacks (None) prints as a dash
    return "–" if v is None else str(v)


def fmt_speedup(mean: Any, lo: Any = None, hi: Any = None) -> str:
    if not ok(mean):
        return "–"
    s = f"{num(mean):.2f}×"
    if ok(lo) and ok(hi):
        s += f" [{num(lo):.2f}, {num(hi):.2f}]"
    return s


def headline_cell(row: SummaryRow | CategoryRow) -> str:
    """A row's (or a category row's) headline speedup, its clock named when it is the
    engine's: the one way every table shows a point's speedup."""
    clock = str(cell(row, "speedup_headline_clock") or "")
    if isinstance(row, CategoryRow):  # its headline keys are derived on read (results.Run)
        m, lo, hi = row.speedup_headline_mean, row.speedup_headline_ci_low, row.speedup_headline_ci_high
    else:
        (m, lo, hi), clock = headline(row), headline_clock(row)
    if clock == ENGINE:
        return fmt_speedup(m, lo, hi) + " (engine)"
    return fmt_speedup(m, lo, hi)


# The client's per-user TPS, named as such wherever a speedup of either clock stands beside it
TPS_CLIENT = "per-user TPS (client clock)"


def is_speculative(row: SummaryRow) -> bool:
    return bool(row.speculative)


def spec_arms(run: Run) -> list[str]:
    return [a for a in run.arms() if any(is_speculative(r) for r in run.rows if r.arm == a)]


def variants(run: Run) -> list[str]:
    out: list[str] = []
    for r in run.rows:
        v = r.variant or ""
        if v not in out:
            out.append(v)
    return out or [""]


def concurrencies(run: Run) -> list[int]:
    return sorted({int(r.concurrency) for r in run.rows if r.concurrency is not None})


def reference_speedup(run: Run, arm: str, concurrency: int) -> float:
    ref = run.reference
    if ref.arm not in (None, arm):
        return math.nan
    if ref.arm is None and len(spec_arms(run)) != 1:
        return math.nan  # unnamed reference and several candidates: do not guess
    return num(ref.speedup_at(concurrency))


def reference_al(run: Run, category: str) -> float:
    return num(run.reference.al_of(category))


def reference_arm(run: Run) -> str | None:
    arms = spec_arms(run)
    return run.reference.arm or (arms[0] if len(arms) == 1 else None)


@dataclass
class SpeedupRow:
    concurrency: int
    base_tps: float
    spec_tps: float
    speedup: float
    ci_low: float
    ci_high: float
    pairs: int
    al: float
    al_source: str
    reference: float
    status: str
    failure: str = ""
    # speedup / ci_* above are the headline clock's (metrics/headline.py); other_* the other clock's
    clock: str = "client"
    clock_reason: str = ""
    other_speedup: float = math.nan
    other_ci_low: float = math.nan
    other_ci_high: float = math.nan
    predicted: float = math.nan  # from the run's calibration at this AL (docs/metrics.md)
    predicted_ci_low: float = math.nan
    predicted_ci_high: float = math.nan
    confounded: str = ""  # why the arms' conditions differed (report/trust.py); "" when they did not
    outputs: str = ""  # the outputs verdict, compact (report/outputs.py): shown beside the speedup
    lossy: str = ""  # why the outputs differ from the baseline's; "" when they do not

    @property
    def other_clock(self) -> str:
        return other_clock(self.clock)

    @property
    def speedup_cell(self) -> str:
        """The headline figure, with its clock named when it is not the client's."""
        cell = fmt_speedup(self.speedup, self.ci_low, self.ci_high)
        cell += f" ({self.clock})" if self.clock == ENGINE and ok(self.speedup) else ""
        cell += " CONFOUNDED" if self.confounded and ok(self.speedup) else ""
        return cell + (f" ({outputs.DIFFER})" if self.lossy and ok(self.speedup) else "")

    @property
    def other_cell(self) -> str:
        cell = fmt_speedup(self.other_speedup, self.other_ci_low, self.other_ci_high)
        return cell + (f" ({self.other_clock})" if cell != "–" else "")

    @property
    def predicted_cell(self) -> str:
        """The predicted speedup, marked as such: it is a model's figure, not a measurement."""
        return "–" if not ok(self.predicted) else \
            "pred. " + fmt_speedup(self.predicted, self.predicted_ci_low, self.predicted_ci_high)


@dataclass
class SpeedupTable:
    arm: str
    variant: str
    eagle_version: str
    draft: str
    rows: list[SpeedupRow] = field(default_factory=list)

    @property
    def has_other(self) -> bool:
        """The other clock's speedups exist (engine-side ones need per-request timing)."""
        return any(ok(r.other_speedup) for r in self.rows)

    @property
    def has_predicted(self) -> bool:
        return any(ok(r.predicted) for r in self.rows)

    @property
    def title(self) -> str:
        t = self.arm + (f" (EAGLE {self.eagle_version})" if self.eagle_version else "")
        return t + (f" — variant {self.variant}" if self.variant else "")


def speedup_tables(run: Run) -> list[SpeedupTable]:
    """One table per speculative arm and variant, in the shape of the published result."""
    tables = []
    for arm in spec_arms(run):
        for v in variants(run):
            rows = [r for r in run.rows if r.arm == arm and (r.variant or "") == v]
            if not rows:
                continue
            t = SpeedupTable(arm=arm, variant=v, eagle_version=str(rows[0].eagle_version or ""),
                             draft=draft_model(run, arm))
            for r in sorted(rows, key=lambda r: int(r.concurrency)):
                c = int(r.concurrency)
                base = run.row(run.baseline, c, v) if run.baseline else None
                t.rows.append(_speedup_row(run, r, base, c))
            tables.append(t)
    return tables


def _speedup_row(run: Run, r: SummaryRow, base: SummaryRow | None, c: int) -> SpeedupRow:
    """One concurrency of the table: the headline clock's stored figure first, the other
    clock's beside it (both read from the row, never recomputed)."""
    al, src = al_of(r)
    clock = headline_clock(r) or CLIENT
    (m, lo, hi), (om, olo, ohi) = headline(r), clock_figure(r, other_clock(clock))
    return SpeedupRow(
        concurrency=c, base_tps=num(base.per_user_tps_mean if base else None), spec_tps=num(r.per_user_tps_mean),
        speedup=m, ci_low=lo, ci_high=hi,
        pairs=int(num(r.speedup_pairs) if ok(r.speedup_pairs) else 0), al=al, al_source=src,
        reference=reference_speedup(run, str(r.arm), c), status=str(r.status or ""),
        failure=str(r.failure or ""), clock=clock, clock_reason=str(r.speedup_headline_reason or ""),
        other_speedup=om, other_ci_low=olo, other_ci_high=ohi,
        predicted=num(r.speedup_predicted), predicted_ci_low=num(r.speedup_predicted_ci_low),
        predicted_ci_high=num(r.speedup_predicted_ci_high),
        confounded=confounded(run, str(r.arm), c, str(r.variant or "")) or "",
        outputs=outputs.cell(run, str(r.arm), c, str(r.variant or "")),
        lossy=outputs.lossy_reason(run, str(r.arm), c, str(r.variant or "")))


def category_al(run: Run) -> tuple[list[str], dict[tuple[str, str], dict[str, float]]]:
    """AL per (arm, variant) and category as SPEED-Bench publishes it: the mean over
    requests of each request's AL (``al_requests``; runs written before it existed fall
    back to the pooled ``al_tokens``), pooled over concurrency levels weighted by
    successful requests (acceptance does not depend on the batch)."""
    cats: list[str] = []
    acc: dict[tuple[str, str], dict[str, list[tuple[float, Any]]]] = {}
    for c in run.categories:
        al = num(c.al_requests)
        if not math.isfinite(al):
            al = num(c.al_tokens)
        cat = str(c.category or "")
        if not math.isfinite(al) or not num(c.n_ok) > 0:
            continue
        if cat not in cats:
            cats.append(cat)
        acc.setdefault((str(c.arm), str(c.variant or "")), {}).setdefault(cat, []).append((al, c.n_ok))
    return cats, {k: {cat: pool_by_n_ok(pairs) for cat, pairs in v.items()} for k, v in acc.items()}


def position_curves(run: Run) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    """Per-position acceptance (joint, conditional) per (arm, variant), pooled over
    concurrency levels weighted by successful requests."""
    out = {}
    for arm in spec_arms(run):
        for v in variants(run):
            rows = [r for r in run.rows if r.arm == arm and (r.variant or "") == v and r.per_position_joint]
            if not rows:
                continue
            curves = []
            for rates in ([r.per_position_joint for r in rows], [r.per_position_conditional for r in rows]):
                n = min(len(x or []) for x in rates)
                cols = [[(x or [0] * n)[i] for x in rates] for i in range(n)]
                # a missing rate at one level leaves the position without a pooled value
                curves.append([pool_by_n_ok(zip(c, (r.n_ok for r in rows))) if all(ok(x) for x in c)
                               else math.nan for c in cols])
            out[(arm, v)] = (curves[0], curves[1])
    return out


def label(arm: str, variant: str) -> str:
    return arm + (f" [{variant}]" if variant else "")


def speedup_headers(t: "SpeedupTable", baseline: str | None) -> tuple[list[str], bool]:
    """Column headers of the published-shape table; the reference column only when known."""
    headers = ["concurrency", f"{baseline or 'baseline'} {TPS_CLIENT}", f"{t.arm} {TPS_CLIENT}",
               "speedup [95% CI] (headline clock)", "outputs"]
    if t.has_other:
        headers.append("other clock [95% CI]")
    headers.append(metric_label("al_tokens"))
    has_ref = any(math.isfinite(r.reference) for r in t.rows)
    if has_ref:
        headers.append("reference speedup")
    if t.has_predicted:
        headers.append(f"{metric_label('speedup_predicted')} [95% CI]")
    return headers, has_ref
