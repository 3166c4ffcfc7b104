"""Between-run noise for compare, gates and the dashboard: how far a figure moves from
one server start (or one night) to the next, when that is known.

Two sources, in order:

1. repeats: a run with 2 or more rounds of fresh server starts carries
   ``speedup_between_sd`` per point, and its speedup interval already covers servers
   and prompts (the two-level bootstrap);
2. history: the same scenario, arm, concurrency and variant measured on earlier nights,
   judged by the dashboard's detector (analysis.changepoints), so a gate and the
   dashboard never disagree: tonight's value is a real drop only when the detector puts
   it on a lower level than the nights before it (which needs ``MIN_NIGHTS`` of them).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from speedbench.metrics.cells import num
from speedbench.metrics.registry import SummaryRow
from speedbench.analysis.changepoints import MIN_BASELINE, Change, find_changes, floored_sd, robust_sd
from speedbench.results import Run

MIN_NIGHTS = MIN_BASELINE  # fewer earlier nights give no usable spread


def rounds(row: SummaryRow | None) -> int:
    return len((row.speedup_by_repeat if row else None) or [])


def se_from_ci(row: SummaryRow | None, lo_key: str = "speedup_ci_low", hi_key: str = "speedup_ci_high") -> float:
    """The standard error a 95% interval implies (half-width / 1.96); NaN without one."""
    # the interval's ends are named by the caller (either clock's), so read through cell
    lo, hi = (num(row.cell(lo_key)), num(row.cell(hi_key))) if row else (math.nan, math.nan)
    return (hi - lo) / (2 * 1.96) if math.isfinite(lo) and math.isfinite(hi) else math.nan


def history_values(history: Iterable[Run], scenario: str, arm: str, concurrency: int, variant: str,
                   column: str, exclude: Iterable[str] = (), before: str = "") -> list[float]:
    """The column's value at this point in every earlier run of the scenario (in the
    order given: time order from dashboard.scan); ``before``: only runs created before
    this ISO time, where both times are known."""
    skip = set(exclude)
    out = []
    for run in history:
        if run.scenario_name != scenario or run.run_id in skip:
            continue
        if before and run.created_utc and run.created_utc >= before:
            continue
        row = run.row(arm, concurrency, variant)
        # column: the gate's metric column, named as data (metrics/gates.py), so read through cell
        if row and row.status != "failed" and math.isfinite(num(row.cell(column))):
            out.append(num(row.cell(column)))
    return out


def night_sd(values: list[float]) -> float:
    """Night-to-night sd as the detector estimates it over a whole series (successive
    differences, barely moved by a step); NaN with fewer than MIN_NIGHTS values."""
    if len(values) < MIN_NIGHTS:
        return math.nan
    return floored_sd(robust_sd(values), sum(values) / len(values))  # identical nights: the floor, not 0


def tonight(past: list[float], value: float, past_hw: list[float] | None = None,
            value_hw: float = math.nan) -> Change | None:
    """The detector's change that tonight's value is part of (its level differs from the
    nights before it), or None: no real change reaches tonight, or fewer than MIN_NIGHTS
    earlier nights. ``*_hw``: the nights' own 95% half-widths, where known."""
    if len(past) < MIN_NIGHTS or not math.isfinite(value):
        return None
    hws = (past_hw or [math.nan] * len(past)) + [value_hw]
    changes = find_changes([*past, value], hws)
    last = changes[-1] if changes else None
    return last if last is not None and last.index + last.nights == len(past) + 1 else None
