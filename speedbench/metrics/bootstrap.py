"""Bootstrap confidence intervals for ratios of two arms (speedups).

Percentile bootstrap with a fixed seed, so the same records always give the same
interval. Paired: both arms ran the same prompts, so resampling prompt pairs keeps
per-prompt difficulty out of the noise (prompts differ far more from each other than
the arms do, and pairing cancels that). Unpaired: each arm resampled on its own.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

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


@dataclass(frozen=True)
class RoundSpread:
    """The spread between rounds of fresh server starts, on the log scale: the sd of a
    point's per-round log ratio, and its degrees of freedom. Pooled over the points of one
    arm pair (``metrics.speedup.pooled_round_spread``), because 2 or 3 rounds of one
    point estimate their own spread too poorly to build an interval on."""

    log_sd: float
    df: int


def cluster_paired_ratio_ci(
    num: np.ndarray, den: np.ndarray, clusters: np.ndarray, *, spread: RoundSpread | None = None,
    n_resamples: int = N_RESAMPLES, seed: int = SEED, level: float = 0.95,
) -> tuple[float, float]:
    """CI of mean(num)/mean(den) over pairs that fall into clusters (one cluster per
    round of fresh server starts). With one cluster this is :func:`paired_ratio_ci`,
    widened by a given ``spread`` as one round of part 2 below (``R = 1``).

    Two parts, and the interval covers both:

    1. A two-level bootstrap: resample the clusters with replacement, then the pairs
       inside each drawn cluster with replacement (Davison & Hinkley 1997, section 3.8).
       Server-to-server differences widen it, which a bootstrap over prompts alone
       cannot see. With R clusters the bootstrap of their spread is biased low by
       ``(R-1)/R``, so each resample's deviation from the estimate is scaled by
       ``sqrt(R/(R-1))`` (on the log scale, as a ratio's spread is multiplicative).
    2. With few clusters a bootstrap still undercovers (percentiles of R values cannot
       know the tails), so the interval is widened, where needed, to the cluster-level
       t interval ``exp(log S ± t(df) · sd / sqrt(R))``. ``sd`` and ``df`` come from
       ``spread`` when given (pooled over points; this point's own ``sd`` instead when
       its rounds spread wider, see :func:`_wider`), else from this point's own
       per-round ratios ``S_r`` (``df = R - 1``: with 2 rounds t is 12.7, and the
       interval says how little two servers tell about a third).
    """
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    clusters = np.asarray(clusters)
    keep = np.isfinite(num) & np.isfinite(den)
    num, den, clusters = num[keep], den[keep], clusters[keep]
    ids = list(dict.fromkeys(clusters.tolist()))
    if len(ids) <= 1:
        return _one_round_ci(num, den, spread, n_resamples, seed, level)
    groups = [(num[clusters == c], den[clusters == c]) for c in ids]
    if len(num) < 2 or den.sum() <= 0:
        return (math.nan, math.nan)
    r = len(groups)
    centre = float(num.sum() / den.sum())
    lo, hi = _interval(_two_level_resamples(groups, centre, n_resamples, seed), level)
    return _t_widened(lo, hi, centre, _wider(spread, _own_spread(groups)), r, level)


def _one_round_ci(num: np.ndarray, den: np.ndarray, spread: RoundSpread | None, n_resamples: int, seed: int,
                  level: float) -> tuple[float, float]:
    """One round left (its other rounds lost every pair, e.g. to bursts) still stands for
    one server start: with a pooled spread, the t interval of a single round applies."""
    lo, hi = paired_ratio_ci(num, den, n_resamples=n_resamples, seed=seed, level=level)
    if spread is None or len(num) < 2 or den.sum() <= 0:
        return (lo, hi)
    return _t_widened(lo, hi, float(num.sum() / den.sum()), spread, 1, level)


def _own_spread(groups: list[tuple[np.ndarray, np.ndarray]]) -> RoundSpread | None:
    """The spread of this point's own per-round ratios S_r on the log scale (df = R - 1);
    None unless every round has a positive ratio."""
    r = len(groups)
    per_round = np.array([gn.sum() / gd.sum() for gn, gd in groups if gd.sum() > 0])
    return (RoundSpread(float(np.std(np.log(per_round), ddof=1)), r - 1)
            if len(per_round) == r and np.all(per_round > 0) else None)


_MAX_LOG = math.log(sys.float_info.max)  # the largest x whose exp(x) is a finite float


def _t_widened(lo: float, hi: float, centre: float, spread: RoundSpread | None, r: int,
               level: float) -> tuple[float, float]:
    """The interval widened, where needed, to ``exp(log centre ± t(df) · sd / sqrt(r))``.
    A widening past what a float holds reaches 0 and infinity: with one degree of freedom
    the t quantile grows without bound as the level nears 1 (a busy fresh clone's A/A
    check at a 99.975% level, rounds 44% apart, asked for exp(932))."""
    if spread is not None and spread.df >= 1 and math.isfinite(spread.log_sd) and centre > 0:
        half = t_quantile(spread.df, level) * spread.log_sd / math.sqrt(r)
        up = math.exp(half) if half < _MAX_LOG else math.inf  # exp(-half) only underflows to 0
        lo, hi = min(lo, centre * math.exp(-half)), max(hi, centre * up)
    return (float(lo), float(hi))


def _wider(pooled: RoundSpread | None, own: RoundSpread | None) -> RoundSpread | None:
    """The spread an interval uses: the pooled one, unless this point's own rounds spread
    wider, then theirs (at the pool's df). Pooling assumes an arm pair's concurrencies share
    one spread; on the CPU host c=16 points spread more, and holding out each round of six
    runs showed the pool alone under-covering such points (docs/metrics.md)."""
    if pooled is None or own is None or not math.isfinite(own.log_sd):
        return pooled or own
    return RoundSpread(own.log_sd, pooled.df) if own.log_sd > pooled.log_sd else pooled


def _two_level_resamples(groups: list[tuple[np.ndarray, np.ndarray]], centre: float, n_resamples: int,
                         seed: int) -> np.ndarray:
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
    # scaled on the log scale: a ratio's spread is multiplicative, and a linear scaling
    # could push the low end below zero
    scale = math.sqrt(r / (r - 1))
    if centre > 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(centre * np.exp(np.log(boot / centre) * scale))
    return np.asarray(centre + (boot - centre) * scale)


def t_quantile(df: int, level: float = 0.95) -> float:
    """The two-sided Student t quantile: the t with P(|T| < t) = level for ``df`` (whole)
    degrees of freedom. The CDF of an integer df has a closed form (Abramowitz & Stegun
    26.7.3-4), inverted here by bisection, so no statistics library is needed."""
    if df < 1 or not 0 < level < 1:
        raise ValueError(f"t_quantile needs df >= 1 and 0 < level < 1, got df={df}, level={level}")
    lo, hi = 0.0, 1.0
    while _t_central(hi, df) < level:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_central(mid, df) < level:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _t_central(t: float, df: int) -> float:
    """P(|T| < t) for T ~ Student t with an integer df."""
    theta = math.atan(t / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        term, total = 1.0, 0.0
        for j in range(1, (df - 1) // 2 + 1):
            total += term
            term *= c2 * (2 * j) / (2 * j + 1)
        return 2 / math.pi * (theta + s * math.cos(theta) * total) if df > 1 else 2 * theta / math.pi
    term, total = 1.0, 0.0  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
    for j in range(1, df // 2 + 1):
        total += term
        term *= c2 * (2 * j - 1) / (2 * j)
    return s * total
