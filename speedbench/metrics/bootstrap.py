"""Bootstrap confidence intervals for ratios of two arms (speedups).

Percentile bootstrap with a fixed seed, so the same records always give the same
interval. Paired: both arms ran the same prompts, so resampling prompt pairs keeps
per-prompt difficulty out of the noise (prompts differ far more from each other than
the arms do, and pairing cancels that). Unpaired: each arm resampled on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

N_RESAMPLES = 2000
SEED = 0
# Resample in blocks so a large run does not allocate n_resamples x n at once.
_MAX_BLOCK_ELEMS = 4_000_000

Statistic = Callable[[np.ndarray], np.ndarray]  # (B, n) -> (B,)


def _stat(name: str) -> Statistic:
    if name == "mean":
        return lambda a: a.mean(axis=1)
    if name == "median":
        return lambda a: np.median(a, axis=1)
    raise ValueError(f"unknown statistic {name!r}")


def _blocks(n: int, n_resamples: int) -> list[int]:
    per = max(1, _MAX_BLOCK_ELEMS // max(1, n))
    sizes = []
    left = n_resamples
    while left > 0:
        sizes.append(min(per, left))
        left -= sizes[-1]
    return sizes


def _interval(ratios: np.ndarray, level: float) -> tuple[float, float]:
    ratios = ratios[np.isfinite(ratios)]
    if len(ratios) == 0:
        return (math.nan, math.nan)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    return (float(lo), float(hi))


def paired_ratio_ci(
    num: np.ndarray, den: np.ndarray, *, statistic: str = "mean", n_resamples: int = N_RESAMPLES,
    seed: int = SEED, level: float = 0.95,
) -> tuple[float, float]:
    """CI of stat(num)/stat(den) where num[i] and den[i] are the same prompt in the two
    arms. Pairs with a NaN on either side are dropped; fewer than 2 pairs gives NaNs."""
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    keep = np.isfinite(num) & np.isfinite(den)
    num, den = num[keep], den[keep]
    n = len(num)
    if n < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    stat = _stat(statistic)
    out = []
    for b in _blocks(n, n_resamples):
        idx = rng.integers(0, n, size=(b, n))  # one index set for both arms: pairs stay together
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(stat(num[idx]) / stat(den[idx]))
    return _interval(np.concatenate(out), level)


def unpaired_ratio_ci(
    num: np.ndarray, den: np.ndarray, *, statistic: str = "mean", n_resamples: int = N_RESAMPLES,
    seed: int = SEED, level: float = 0.95,
) -> tuple[float, float]:
    """CI of stat(num)/stat(den) with each arm resampled independently."""
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    num, den = num[np.isfinite(num)], den[np.isfinite(den)]
    if len(num) < 2 or len(den) < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    stat = _stat(statistic)
    out = []
    for b in _blocks(max(len(num), len(den)), n_resamples):
        a = stat(num[rng.integers(0, len(num), size=(b, len(num)))])
        d = stat(den[rng.integers(0, len(den), size=(b, len(den)))])
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(a / d)
    return _interval(np.concatenate(out), level)


def cluster_paired_ratio_ci(
    num: np.ndarray, den: np.ndarray, clusters: np.ndarray, *, n_resamples: int = N_RESAMPLES,
    seed: int = SEED, level: float = 0.95,
) -> tuple[float, float]:
    """CI of mean(num)/mean(den) over pairs that fall into clusters (one cluster per
    round of fresh server starts). With one cluster this is :func:`paired_ratio_ci`.

    Two parts, and the interval covers both:

    1. A two-level bootstrap: resample the clusters with replacement, then the pairs
       inside each drawn cluster with replacement (Davison & Hinkley 1997, section 3.8).
       Server-to-server differences widen it, which a bootstrap over prompts alone
       cannot see. With R clusters the bootstrap of their spread is biased low by
       ``(R-1)/R``, so each resample's deviation from the estimate is scaled by
       ``sqrt(R/(R-1))`` (on the log scale, as a ratio's spread is multiplicative).
    2. With few clusters a bootstrap still undercovers (percentiles of R values cannot
       know the tails), so at the 95% level the interval is widened, where needed, to
       the cluster-level t interval ``exp(log S ± t(R-1) · sd(log S_r) / sqrt(R))``
       over the per-round ratios ``S_r``. With 2 rounds t is 12.7: two servers say
       little about a third, and the interval says so.
    """
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    clusters = np.asarray(clusters)
    keep = np.isfinite(num) & np.isfinite(den)
    num, den, clusters = num[keep], den[keep], clusters[keep]
    ids = list(dict.fromkeys(clusters.tolist()))
    if len(ids) <= 1:
        return paired_ratio_ci(num, den, n_resamples=n_resamples, seed=seed, level=level)
    groups = [(num[clusters == c], den[clusters == c]) for c in ids]
    if len(num) < 2 or den.sum() <= 0:
        return (math.nan, math.nan)
    r = len(groups)
    rng = np.random.default_rng(seed)
    # Each slot of a resample draws a cluster, then that cluster's pairs; a cluster drawn
    # twice in one resample gets two independent draws of its pairs.
    pick = rng.integers(0, r, size=(n_resamples, r))
    tot_n = np.zeros(n_resamples)
    tot_d = np.zeros(n_resamples)
    for slot in range(r):
        for ci, (gn, gd) in enumerate(groups):
            rows = np.nonzero(pick[:, slot] == ci)[0]
            if len(rows) == 0:
                continue
            idx = rng.integers(0, len(gn), size=(len(rows), len(gn)))
            tot_n[rows] += gn[idx].sum(axis=1)
            tot_d[rows] += gd[idx].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = tot_n / tot_d
    centre = float(num.sum() / den.sum())
    # scaled on the log scale: a ratio's spread is multiplicative, and a linear scaling
    # could push the low end below zero
    if centre > 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            boot = centre * np.exp(np.log(boot / centre) * math.sqrt(r / (r - 1)))
    else:
        boot = centre + (boot - centre) * math.sqrt(r / (r - 1))
    lo, hi = _interval(boot, level)
    t = _T975.get(r - 1, 1.96 if r - 1 > 30 else None) if level == 0.95 else None
    per_round = np.array([gn.sum() / gd.sum() for gn, gd in groups if gd.sum() > 0])
    if t is not None and len(per_round) == r and np.all(per_round > 0) and centre > 0:
        half = t * float(np.std(np.log(per_round), ddof=1)) / math.sqrt(r)
        lo, hi = min(lo, centre * math.exp(-half)), max(hi, centre * math.exp(half))
    return (float(lo), float(hi))


# Student t, two-sided 95% (the 0.975 quantile) by degrees of freedom; between listed
# values the next lower df is used (wider, so on the safe side).
_T975_POINTS = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
                10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}
_T975 = {df: _T975_POINTS[max(k for k in _T975_POINTS if k <= df)] for df in range(1, 31)}
