"""Sequential stopping's statistics: a fixed look schedule, the interval each look may
use and what a look finds in one round of a point (docs/metrics.md,
"Sequential stopping").

Looking at an interval after every batch and stopping once it is narrow enough would
make a 95% interval cover less than 95%: each look is another chance for noise to make
it narrow around the wrong value. The looks are fixed in advance (``min_prompts · 2^j``,
capped at ``max_prompts``), and each is taken at level ``1 - alpha / L`` for L looks
(Bonferroni): with probability at least ``1 - alpha`` every look's interval holds the
truth at once, so the interval at whichever look the rule picks does too, whatever the
rule. Doubling keeps L small (7 looks from 16 to 880), so the price is a modest widening
(z 1.96 -> 2.69), paid only by points that stop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from speedbench.metrics.bootstrap import N_RESAMPLES, paired_ratio_ci
from speedbench.metrics.lag import LagRange
from speedbench.metrics.speedup import PAIR_KEYS, pairs_lag
from speedbench.metrics.table import request_table

# Why a point stopped (points.json ``stop_reason``, summary.json ``stopping``).
REACHED, MAX_PROMPTS, EXHAUSTED = "target_halfwidth", "max_prompts", "prompts_exhausted"
STOP_REASONS = (REACHED, MAX_PROMPTS, EXHAUSTED)


def resamples(level: float) -> int:
    """Bootstrap resamples for an interval at ``level``: at least 25 beyond each end, so
    the far percentile a look level needs (0.36% at 7 looks) is not read off a handful
    of resamples; never fewer than the usual 2000."""
    return max(N_RESAMPLES, math.ceil(25 / ((1 - level) / 2) - 1e-6))


@dataclass(frozen=True)
class Look:
    """One look's estimate and its interval at the look level."""

    estimate: float
    ci_low: float
    ci_high: float
    lag_bound: float = math.nan  # the client's lag bound the interval is widened by (metrics/lag.py)

    @property
    def halfwidth(self) -> float:
        """(high - low) / 2 relative to the estimate; inf when undefined."""
        if not all(math.isfinite(v) for v in (self.estimate, self.ci_low, self.ci_high)) or self.estimate <= 0:
            return math.inf
        return (self.ci_high - self.ci_low) / 2 / self.estimate


def speedup_look(spec_tps: np.ndarray, base_tps: np.ndarray, level: float, lag: LagRange | None = None) -> Look:
    """Mean ratio over pairs (the same prompt in both arms) with its paired bootstrap
    interval at ``level``, widened by the client's ``lag`` range over the same pairs
    (client-side TPS; None for the engine's clock): a look must not stop on an interval
    narrower than the client's own error."""
    s, b = np.asarray(spec_tps, dtype=float), np.asarray(base_tps, dtype=float)
    keep = np.isfinite(s) & np.isfinite(b)
    s, b = s[keep], b[keep]
    if len(s) < 2 or b.mean() <= 0:
        return Look(math.nan, math.nan, math.nan)
    lo, hi = paired_ratio_ci(s, b, level=level, n_resamples=resamples(level))
    lag = lag or LagRange()
    return Look(float(s.mean() / b.mean()), *lag.widen(lo, hi), lag_bound=lag.bound)


def al_look(accepted: np.ndarray, steps: np.ndarray, level: float) -> Look:
    """AL pooled over steps, ``1 + Σ accepted / Σ steps``, with a bootstrap interval over
    requests (each request's accepted and steps resampled together)."""
    a, n = np.asarray(accepted, dtype=float), np.asarray(steps, dtype=float)
    keep = n > 0
    a, n = a[keep], n[keep]
    if len(a) < 2:
        return Look(math.nan, math.nan, math.nan)
    lo, hi = paired_ratio_ci(a, n, level=level, n_resamples=resamples(level))
    return Look(1.0 + float(a.sum() / n.sum()), 1.0 + lo, 1.0 + hi)


def narrow_enough(look: Look, target: float | None) -> bool:
    return target is not None and look.halfwidth <= target


def reason_at_end(n_sent: int, max_prompts: int | None, n_available: int) -> str:
    """Why a point that never reached its target stopped where it did."""
    if max_prompts is not None and n_sent >= max_prompts and max_prompts < n_available:
        return MAX_PROMPTS
    return EXHAUSTED


def point_looks(mine: pd.DataFrame, base: pd.DataFrame | None, level: float) -> dict[str, Look]:
    """The speedup (paired with ``base`` by prompt, turn and round; NaN without it) and
    the AL of one round of a point, from ok rows of :func:`request_table`."""
    none = Look(math.nan, math.nan, math.nan)
    out = {"speedup": none, "speedup_engine": none, "al": none}
    if mine.empty:
        return out
    if base is not None and not base.empty:
        pairs = mine.merge(base, on=PAIR_KEYS, suffixes=("_s", "_b"))
        timed = pairs[np.isfinite(pairs["per_user_tps_s"]) & np.isfinite(pairs["per_user_tps_b"])]
        out["speedup"] = speedup_look(pairs["per_user_tps_s"].to_numpy(), pairs["per_user_tps_b"].to_numpy(), level,
                                      pairs_lag(timed))
        # the engine's clock gives the second speedup figure; its interval is widened alike
        out["speedup_engine"] = speedup_look(pairs["engine_tps_s"].to_numpy(), pairs["engine_tps_b"].to_numpy(),
                                             level)
    spec = mine[mine["has_spec"]]
    if len(spec):
        out["al"] = al_look(spec["spec_accepted"].to_numpy(), spec["spec_steps"].to_numpy(), level)
    return out


def look_fields(found: dict[str, Look]) -> dict[str, Any]:
    """One look's intervals as the flat fields points.json and summary.json's ``stopping``
    block share (a missing end is null: unbounded, e.g. widened by a stalled client)."""
    none = Look(math.nan, math.nan, math.nan)
    sp, eng, al = (found.get(k, none) for k in ("speedup", "speedup_engine", "al"))
    return {"speedup": sp.estimate, "ci_low": sp.ci_low, "ci_high": sp.ci_high, "speedup_engine": eng.estimate,
            "engine_ci_low": eng.ci_low, "engine_ci_high": eng.ci_high, "al": al.estimate, "al_ci_low": al.ci_low,
            "al_ci_high": al.ci_high, "lag_bound": sp.lag_bound}


def ok_rows(records: list, key: Any, rnd: int) -> pd.DataFrame:
    """The ok requests of one round of one point, as :func:`request_table` rows. The
    point's records are picked before the table is built: only this round's are needed."""
    mine = [r for r in records if (r.arm, r.concurrency, r.variant, r.repeat) == (key.arm, key.concurrency,
                                                                                  key.variant, rnd)]
    return round_rows(request_table(mine), key, rnd)


def round_rows(table: pd.DataFrame, key: Any, rnd: int) -> pd.DataFrame:
    """The ok rows of one round of one point in a :func:`request_table`."""
    if table.empty:
        return table
    sel = ((table["arm"] == key.arm) & (table["concurrency"] == key.concurrency)
           & (table["variant"] == key.variant) & (table["repeat"] == rnd) & table["ok"])
    return table[sel]
