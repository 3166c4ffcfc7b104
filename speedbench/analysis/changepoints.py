"""Change points in one nightly series (a figure of one checkpoint at one point, night by
night), and whether each is real.

Two steps, kept apart on purpose:

1. Candidates: ruptures' PELT with a least-squares cost proposes where the level moves
   (:mod:`speedbench.analysis.pelt`). Its penalty is set low on purpose (it proposes; it
   does not decide).
2. The judgement, one candidate at a time, left to right. The nights before the
   candidate (back to the last accepted change, at most ``WINDOW`` of them) are the
   baseline; the nights from it to the next candidate are the new level. A change is
   called only when it stands outside all three kinds of noise that are known:

   - night to night: the standard deviation of the baseline window's nights and the new
     level's nights, each about its own mean (never widened by the step), no smaller than
     the robust spread of successive differences over the whole series; the means differ
     by more than Student's t at ``Z_CALL``'s level standard errors (with few nights the
     spread is a guess, and t pays for it) and by more than ``K_SIGMA`` sds;
   - each night's own 95% interval: the two windows' mean intervals do not cover the
     difference;
   - the A/A noise floor (relative), where the run had an A/A arm.

   A change that has held for 2 or more nights is a regression or an improvement; one
   seen only on the last night is suspicious. A one-night excursion in the middle of the
   series that went back is noise, and its night is left out of later baselines.

3. Known change points: nights where the provenance says the arm's draft changed (another
   draft, config or weights under the same arm name) are candidates whether or not PELT
   proposes them. For a figure that does not vary from night to night with the same
   draft (acceptance at temperature 0: ``short=True``) they are judged with as few as
   ``MIN_KNOWN_BASELINE`` nights before them. With fewer than ``MIN_BASELINE`` the
   spread is not measured: the change must stand outside the nights' own intervals, the
   A/A floor and ``Z_CALL`` standard errors of the floored spread (a normal's level, no
   t), and it is called suspicious at most, never a regression, however long it has held.
   A timed figure (speedup, TPS) moves from night to night by itself, so it always needs
   ``MIN_BASELINE`` nights.

Everything here is pure (lists of floats in, dataclasses out).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

WINDOW = 14  # baseline / new-level nights compared at most
MIN_BASELINE = 5  # nights before a change needed to judge it (fewer: their sd is a guess)
MIN_KNOWN_BASELINE = 1  # ... at a night where the provenance says the draft changed
K_SIGMA = 2.0  # a change smaller than this many night-to-night sds is not worth a look
# The smallest night-to-night sd, relative to the level: identical nights (copies, a
# cached result) have a spread of zero, and a change's size in sds then became
# meaningless ("500000000.0 night-to-night sd"); figures are not known better than this.
SD_FLOOR_REL = 0.005
Z_CALL = 3.5  # the means' difference in standard errors needed to call it (as a normal's level; t pays for few nights)
Z_HOLD = 2.5  # ... and with any one night of the new level left out (it must not rest on one night)
Z_LAST = 3.0  # ... and a level of 2 nights with its last night left out (the night before stands out alone)

REGRESSION, IMPROVEMENT, SUSPICIOUS = "regression", "improvement", "suspicious"


@dataclass(frozen=True)
class Change:
    index: int  # first night at the new level
    before: float  # baseline mean
    after: float  # mean of the new level's nights
    before_hw: float  # 95% half-width of the baseline mean (from the nights' own intervals); NaN unknown
    after_hw: float
    noise_sd: float  # night-to-night sd the change was judged against
    nights: int  # nights seen at the new level
    kind: str  # REGRESSION, IMPROVEMENT or SUSPICIOUS
    baseline_nights: int = MIN_BASELINE  # nights it was judged against (fewer only at a known change)

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def relative(self) -> float:
        return self.delta / abs(self.before) if self.before else math.nan

    @property
    def sigmas(self) -> float:
        """The change's size against the night-to-night noise."""
        return abs(self.delta) / self.noise_sd if self.noise_sd > 0 else math.inf


def robust_sd(values: Sequence[float] | np.ndarray) -> float:
    """Night-to-night sd from successive differences (median absolute difference): a step
    moves one difference only, so it barely widens this."""
    y = np.asarray(values, dtype=float)
    if len(y) < 3:
        return math.nan
    d = np.abs(np.diff(y))
    return float(np.median(d) * 1.4826 / math.sqrt(2))


def floored_sd(sd: float, level: float) -> float:
    """``sd`` no smaller than SD_FLOOR_REL of ``level`` (NaN stays NaN)."""
    if not math.isfinite(sd):
        return sd
    return max(sd, SD_FLOOR_REL * abs(level), 1e-12)


def _mean_hw(half_widths: Sequence[float]) -> float:
    """95% half-width of a mean of independent nights from their own half-widths."""
    hw = [h for h in half_widths if math.isfinite(h)]
    if len(hw) < len(half_widths) or not hw:
        return math.nan
    return math.sqrt(sum(h * h for h in hw)) / len(hw)


def _judge(y: np.ndarray, hw: np.ndarray, base: list[int], new: list[int], sd_all: float,
           floor_rel: float, higher_is_better: bool, critical: float) -> Change | None:
    """``critical``: Student's t for the two windows' degrees of freedom (len(base) + len(new) - 2)."""
    b, a = y[base], y[new]
    # night-to-night sd: the baseline's and the new level's nights, each about its own
    # mean (so the step itself widens nothing), no smaller than the series' robust spread
    df = len(b) - 1 + len(a) - 1
    ss = float(((b - b.mean()) ** 2).sum()) + float(((a - a.mean()) ** 2).sum())
    pooled = math.sqrt(ss / df) if df > 0 else 0.0  # one night each side: no spread of their own
    sd = max(pooled, sd_all if math.isfinite(sd_all) else 0.0)
    d = float(a.mean() - b.mean())
    sd = floored_sd(sd, float(b.mean()))
    t = d / (sd * math.sqrt(1 / len(b) + 1 / len(a)))
    b_hw, a_hw = _mean_hw(list(hw[base])), _mean_hw(list(hw[new]))
    if abs(t) <= critical or abs(d) <= K_SIGMA * sd:
        return None
    if math.isfinite(b_hw) and math.isfinite(a_hw) and abs(d) <= math.hypot(b_hw, a_hw):
        return None  # inside the nights' own intervals
    if math.isfinite(floor_rel) and abs(d) <= floor_rel * abs(float(b.mean())):
        return None  # inside the A/A noise floor
    direction = IMPROVEMENT if (d > 0) == higher_is_better else REGRESSION
    short = len(b) < MIN_BASELINE  # only at a known change: too few nights to call more
    kind = SUSPICIOUS if len(a) == 1 or short else direction
    return Change(new[0], float(b.mean()), float(a.mean()), b_hw, a_hw, sd, len(a), kind, len(b))


def _holds_without_any_one_night(new: list[int], last: int, change: Change,
                                 judge: Callable[[list[int], float], Change | None]) -> bool:
    """A level of 2 or more nights must not rest on one of them: with any one of its nights
    left out, the change still stands in the same direction (at ``Z_HOLD``; with the last
    night left out, at the full ``Z_CALL`` when 2 or more nights remain, at ``Z_LAST`` when
    one does). So one bad last night is never merged into a longer regression with an
    earlier start, and one bad night in the past never drags a few neighbours into a
    change. ``judge(nights, z)``: the change of those nights against the same baseline."""
    if len(new) < 2:
        return True
    for drop in new:
        rest = [i for i in new if i != drop]
        # the newest night left out, 2 or more nights left must be called on their own (full
        # bar): tonight's bad night is not merged back into nights that were not a change
        z = (Z_CALL if len(rest) >= 2 else Z_LAST) if drop == last else Z_HOLD
        again = judge(rest, z)
        if again is None or (again.delta > 0) != (change.delta > 0):
            return False
    return True


def _candidates(y: np.ndarray, sd_all: float, known: Sequence[int]) -> list[int]:
    """PELT's proposals (with enough nights) and the known change points, in night order."""
    known = [k for k in known if MIN_KNOWN_BASELINE <= k < len(y)]
    if len(y) <= MIN_BASELINE:
        return sorted(set(known))  # no night has MIN_BASELINE nights before it: no need to load PELT
    # floored: identical nights (sd 0) would give PELT no penalty scale and no candidates
    return sorted(set(_pelt().candidates(y, floored_sd(sd_all, float(np.median(y))))) | set(known))


def _pelt():
    # function-local: ruptures and scipy take about half a second to import, and this module
    # is loaded at `speedbench --help` (commands/gate -> report/gate -> report/noise)
    from speedbench.analysis import pelt

    return pelt


def _critical(z: float, base: int, new: int) -> float:
    """Student's t for the two windows at a normal's ``z`` level. Before ``MIN_BASELINE``
    nights (only at a known change) the spread is the floor's, not the nights' (they are
    too few to estimate one), so the normal's own ``z``: t's few degrees of freedom would
    price an estimate that is not being made."""
    if base < MIN_BASELINE or base + new - 2 < 1:
        return z
    return _pelt().t_critical(z, base + new - 2)


def find_changes(values: Sequence[float], half_widths: Sequence[float] | None = None,
                 floor_rel: float = math.nan, higher_is_better: bool = True,
                 known: Sequence[int] = (), short: bool = False) -> list[Change]:
    """Every real change in the series, oldest first. ``half_widths``: each night's own
    95% interval half-width (NaN where unknown); ``floor_rel``: the A/A noise floor as a
    fraction of the value (NaN when the runs had no A/A arm); ``known``: nights where the
    provenance says the figure's draft changed; ``short``: the figure is the same every
    night for the same draft, so a known change is judged with fewer nights before it."""
    y = np.asarray(values, dtype=float)
    hw = np.asarray(half_widths if half_widths is not None else [math.nan] * len(y), dtype=float)
    sd_all = robust_sd(y)
    cands = _candidates(y, sd_all, known if short else [k for k in known if k >= MIN_BASELINE])
    ends = [c for c in cands if c != len(y) - 1] + [len(y)]  # the last night alone never cuts a window
    changes: list[Change] = []
    start, outliers = 0, set()
    for tau in cands:
        end = min(e for e in ends if e > tau)
        base = [i for i in range(start, tau) if i not in outliers][-WINDOW:]
        new = list(range(tau, min(end, tau + WINDOW)))
        if len(base) < (MIN_KNOWN_BASELINE if short and tau in known else MIN_BASELINE):
            continue
        # before MIN_BASELINE nights (a known change) the series' successive differences are
        # mostly the step itself: the spread is the windows' own, floored, not theirs
        sd_series = sd_all if len(base) >= MIN_BASELINE else math.nan
        change = _judge(y, hw, base, new, sd_series, floor_rel, higher_is_better,
                        _critical(Z_CALL, len(base), len(new)))

        def judge(nights: list[int], z: float, base: list[int] = base, sd_series: float = sd_series) -> Change | None:
            return _judge(y, hw, base, nights, sd_series, floor_rel, higher_is_better,
                          _critical(z, len(base), len(nights)))

        if change is None or not _holds_without_any_one_night(new, len(y) - 1, change, judge):
            continue
        if change.nights == 1 and tau < len(y) - 1:
            outliers.add(tau)  # one night out and back: noise, kept out of later baselines
            continue
        changes.append(change)
        start = tau
    return changes
