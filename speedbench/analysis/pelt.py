"""The change-point detector's two numerical dependencies, imported at the top: ruptures'
PELT (where a series' level may move) and scipy's Student's t (how far a move must be).

:mod:`speedbench.analysis.changepoints` imports this module only when it judges a series
long enough to hold a change: ruptures and scipy take about half a second to import.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import ruptures
from scipy import stats

PELT_BETA = 2.0  # penalty = PELT_BETA · sd² · log(n): generous, the judgement filters


def candidates(values: Sequence[float] | np.ndarray, sd: float) -> list[int]:
    """Indices where PELT starts a new level, plus the last night (a one-night change must
    be judged even when PELT cannot see it yet)."""
    n = len(values)
    found: list[int] = []
    if sd > 0 and n >= 3:
        y = np.asarray(values, dtype=float).reshape(-1, 1)
        pen = PELT_BETA * sd * sd * math.log(n)
        found = [b for b in ruptures.Pelt(model="l2", min_size=1, jump=1).fit(y).predict(pen=pen) if b < n]
    if n - 1 not in found:
        found.append(n - 1)
    return sorted(found)


def t_critical(z: float, df: int) -> float:
    """Student's t at the two-sided level ``z`` has for a normal: with few nights the
    spread is itself a guess, and t pays for that."""
    return float(stats.t.isf(stats.norm.sf(z), df))
