"""Between-run noise for compare, gates and the dashboard: how far a figure moves from
one server start (or one night) to the next, when that is known.

Two sources, in order:

1. repeats: a run with 2 or more rounds of fresh server starts carries
   ``speedup_between_sd`` per point, and its speedup interval already covers servers
   and prompts (the two-level bootstrap);
2. history: the same scenario, arm, concurrency and variant measured on earlier nights;
   the sample standard deviation of its values (at least ``MIN_NIGHTS`` of them).

A difference counts as real only beyond ``K_SIGMA`` times that spread (about a 95% band
for one night against another).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from speedbench.analysis.cells import num
from speedbench.results import Run

K_SIGMA = 2.0
MIN_NIGHTS = 3  # fewer earlier nights give no usable spread


def rounds(row: dict[str, Any] | None) -> int:
    return len((row or {}).get("speedup_by_repeat") or [])


def se_from_ci(row: dict[str, Any] | None, lo_key: str = "speedup_ci_low", hi_key: str = "speedup_ci_high") -> float:
    """The standard error a 95% interval implies (half-width / 1.96); NaN without one."""
    lo, hi = num((row or {}).get(lo_key)), num((row or {}).get(hi_key))
    return (hi - lo) / (2 * 1.96) if math.isfinite(lo) and math.isfinite(hi) else math.nan


def history_values(history: Iterable[Run], scenario: str, arm: str, concurrency: int, variant: str,
                   column: str, exclude: Iterable[str] = ()) -> list[float]:
    """The column's value at this point in every earlier run of the scenario."""
    skip = set(exclude)
    out = []
    for run in history:
        if run.scenario_name != scenario or run.run_id in skip:
            continue
        row = run.row(arm, concurrency, variant)
        if row and row.get("status") != "failed" and math.isfinite(num(row.get(column))):
            out.append(num(row.get(column)))
    return out


def night_sd(values: list[float]) -> float:
    """Night-to-night standard deviation; NaN with fewer than MIN_NIGHTS values."""
    return float(np.std(values, ddof=1)) if len(values) >= MIN_NIGHTS else math.nan


def beyond_noise(diff: float, sd: float) -> bool | None:
    """True when |diff| exceeds K_SIGMA·sd; None when the spread is unknown."""
    if not math.isfinite(sd) or not math.isfinite(diff):
        return None
    return abs(diff) > K_SIGMA * sd
