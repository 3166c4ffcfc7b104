"""Checkpoints compared across nights (pure: numbers in, dataclasses out).

One figure of one checkpoint (speedup at one concurrency, AL pooled or in one category) is
measured once a night. Two checkpoints measured on the same night share that night's
machine, vLLM build and load, so each night gives one *contrast*: the log of their ratio.
The contrasts over the nights both ran are treated as a sample of nights, and their mean
gets a Student's t interval with nights − 1 degrees of freedom. Each night's contrast
carries both that night's own measurement noise and the night-to-night variation of the
difference, so its spread over nights is the random-effects variance with nothing to
estimate separately (the "summary statistics" approach to a two-level model). With the
3-10 nights a checkpoint typically has, this is exact for normal contrasts, where a
bootstrap over so few nights is too narrow and DerSimonian–Laird's between-night variance
is poorly estimated.

Calls are controlled over every checkpoint × concurrency × category comparison of a
scenario (with 5 checkpoints × 3 concurrencies × 11 categories, some cells would
otherwise be "better" by luck) with Benjamini–Hochberg at ``Q``, in two levels
(Benjamini–Bogomolov): first over the checkpoints, each by the Simes p-value of its own
comparisons (does it differ from the reference anywhere?), then within each selected
checkpoint at q · R / M. One flat BH over all comparisons would let a checkpoint that
differs a lot (an untrained draft) lower the bar for every other one: a checkpoint no
better than the reference was called "better" somewhere in 7-10% of histories that way,
against under 5% with the two levels. BH bounds the expected share of false calls among
the calls made; under a complete null (no checkpoint differs) that is the chance of any
false call at all. Simultaneous intervals (Bonferroni over ~70 comparisons) would cost far
more power for a ranking whose calls are reviewed anyway.

scipy is imported at the top: nothing loaded at ``speedbench --help`` imports this module
(report/checkpoints.py, which the dashboard and ``compare --checkpoints`` load when they run).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_NIGHTS = 3  # nights both checkpoints ran, needed for a call (two give a t with one df)
LEVEL = 0.95  # each interval's coverage
Q = 0.05  # Benjamini–Hochberg false discovery rate
BETTER, WORSE, SAME, INSUFFICIENT = "better", "worse", "no difference", "insufficient nights"


@dataclass(frozen=True)
class Pooled:
    """A figure pooled over nights: the geometric mean and its t interval over nights."""

    value: float
    low: float
    high: float
    nights: int


@dataclass(frozen=True)
class Contrast:
    """Checkpoint / reference: the geometric mean ratio over shared nights, its interval, p."""

    ratio: float
    low: float
    high: float
    p: float  # two-sided, against a ratio of 1; NaN with too few nights
    nights: int


def _t(df: int) -> float:
    return float(stats.t.ppf(0.5 + LEVEL / 2, df))


def _log_mean(d: np.ndarray) -> tuple[float, float, float, float]:
    """Mean of d, its t interval and the two-sided p against 0 (NaN below 2 values)."""
    n, m = len(d), float(d.mean())
    if n < 2:
        return m, math.nan, math.nan, math.nan
    se = float(d.std(ddof=1)) / math.sqrt(n)
    if se == 0:
        return m, m, m, (1.0 if m == 0 else 0.0)
    half = _t(n - 1) * se
    return m, m - half, m + half, float(2 * stats.t.sf(abs(m) / se, n - 1))


def pool(values: Sequence[float]) -> Pooled:
    """One checkpoint's figure over its nights (positive values)."""
    x = np.asarray([v for v in values if math.isfinite(v) and v > 0], dtype=float)
    if not len(x):
        return Pooled(math.nan, math.nan, math.nan, 0)
    m, lo, hi, _ = _log_mean(np.log(x))
    return Pooled(math.exp(m), math.exp(lo), math.exp(hi), len(x))


def contrast(pairs: Sequence[tuple[float, float]]) -> Contrast:
    """(checkpoint, reference) values of the nights both ran."""
    ok = [(a, b) for a, b in pairs if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0]
    if not ok:
        return Contrast(math.nan, math.nan, math.nan, math.nan, 0)
    d = np.log([a for a, _ in ok]) - np.log([b for _, b in ok])
    m, lo, hi, p = _log_mean(d)
    if len(ok) < MIN_NIGHTS:
        p = math.nan
    return Contrast(math.exp(m), math.exp(lo), math.exp(hi), p, len(ok))


def bh_qvalues(pvalues: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (q); NaN p-values stay NaN and do not count."""
    idx = [i for i, p in enumerate(pvalues) if math.isfinite(p)]
    out = [math.nan] * len(pvalues)
    m, running = len(idx), 1.0
    for rank, i in reversed(list(enumerate(sorted(idx, key=lambda i: pvalues[i]), start=1))):
        running = min(running, pvalues[i] * m / rank)
        out[i] = running
    return out


def simes(pvalues: Sequence[float]) -> float:
    """One p-value for "some comparison of this family differs" (valid under positive dependence)."""
    ps = sorted(p for p in pvalues if math.isfinite(p))
    return min((len(ps) * p / (i + 1) for i, p in enumerate(ps)), default=math.nan)


def two_level_q(families: Sequence[Sequence[float]]) -> list[list[float]]:
    """Benjamini–Bogomolov: BH over the families (one per checkpoint, by their Simes p), then
    BH within each selected family at q · R / M (R families selected of M). Each comparison's
    value here is at most ``Q`` exactly when it is called: the larger of its family's BH q and
    its within-family BH q · M / R."""
    fam_q = bh_qvalues([simes(f) for f in families])
    m = sum(math.isfinite(q) for q in fam_q)
    r = sum(q <= Q for q in fam_q if math.isfinite(q))
    scale = m / r if r else math.inf
    out = []
    for fq, f in zip(fam_q, families):
        out.append([max(fq, min(q * scale, 1.0)) if math.isfinite(q) and math.isfinite(fq) else math.nan
                    for q in bh_qvalues(f)])
    return out


def call(c: Contrast, q: float) -> str:
    """better / worse / no difference against the reference, or insufficient nights."""
    if c.nights < MIN_NIGHTS or not math.isfinite(q):
        return INSUFFICIENT
    if q > Q:
        return SAME
    return BETTER if c.ratio > 1 else WORSE
