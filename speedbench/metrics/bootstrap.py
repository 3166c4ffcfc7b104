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
