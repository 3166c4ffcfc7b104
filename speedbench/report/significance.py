"""Is a difference real? Bootstrap tests on the stored per-request records, for
``speedbench compare`` and the noise-aware relative gates.

All intervals are 95% percentile bootstraps with a fixed seed (a re-run of a report
gives the same numbers). Requests are the resampling unit; within one run, arms are
paired by prompt (same prompt_index, repeat and turn), which removes prompt-to-prompt
variation from speedups; across runs, the two runs are resampled independently. Speedup is a ratio of mean
per-user TPS over prompt pairs, as in the summary (metrics.speedup).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from speedbench.metrics.headline import headline, headline_clock
from speedbench.metrics.registry import SummaryRow
from speedbench.records import RequestRecord
from speedbench.report.noise import rounds
from speedbench.results import Run

N_BOOT = 2000
SEED = 20260

Key = tuple[int, int, int]  # (prompt_index, repeat, turn): the pairing key across arms


@dataclass
class Interval:
    value: float
    low: float
    high: float
    n: int
    test: str  # what produced the interval, shown to the reader

    @property
    def excludes_zero(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high) and (self.low > 0 or self.high < 0)


NAN_INTERVAL = Interval(value=math.nan, low=math.nan, high=math.nan, n=0, test="no data")


def decode_tps(rec: RequestRecord) -> float:
    """(output tokens - 1) / (last chunk - first chunk), the per-user TPS of one request."""
    if not rec.ok or len(rec.chunk_ns) < 2 or rec.n_output < 2:
        return math.nan
    span = (rec.chunk_ns[-1] - rec.chunk_ns[0]) / 1e9
    return (rec.n_output - 1) / span if span > 0 else math.nan


def tps_by_key(run: Run, arm: str, concurrency: int, variant: str) -> dict[Key, float]:
    out = {}
    for r in run.records:
        if r.arm == arm and r.concurrency == concurrency and (r.variant or "") == variant and not r.warmup:
            v = decode_tps(r)
            if math.isfinite(v):
                out[(r.prompt_index, r.repeat, r.turn)] = v
    return out


def _resample_idx(n: int, rng: np.random.Generator) -> np.ndarray:
    """N_BOOT rows of n indices drawn with replacement (vectorised bootstrap)."""
    return rng.integers(0, n, size=(N_BOOT, n))


def _pct(vals: np.ndarray) -> tuple[float, float]:
    vals = vals[np.isfinite(vals)]
    if not len(vals):
        return math.nan, math.nan
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))


def speedup_pairs(run: Run, arm: str, concurrency: int, variant: str) -> tuple[np.ndarray, np.ndarray]:
    """(speculative, baseline) per-user TPS of the prompts both arms completed, aligned."""
    if not run.baseline:
        return np.array([]), np.array([])
    base = tps_by_key(run, run.baseline, concurrency, variant)
    spec = tps_by_key(run, arm, concurrency, variant)
    keys = sorted(spec.keys() & base.keys())
    return np.array([spec[k] for k in keys]), np.array([base[k] for k in keys])


def _ratio_boot(spec: np.ndarray, base: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap distribution of mean(spec)/mean(base), resampling prompt pairs: the same
    statistic as the summary's speedup_mean (a ratio of means, not a mean of ratios)."""
    idx = _resample_idx(len(spec), rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        return spec[idx].mean(axis=1) / base[idx].mean(axis=1)


def _mean_diff(a: np.ndarray, b: np.ndarray, test: str) -> Interval:
    """mean(b) - mean(a), resampling a and b independently."""
    if len(a) < 2 or len(b) < 2:
        return NAN_INTERVAL
    rng = np.random.default_rng(SEED)
    diffs = b[_resample_idx(len(b), rng)].mean(axis=1) - a[_resample_idx(len(a), rng)].mean(axis=1)
    lo, hi = _pct(diffs)
    return Interval(value=float(b.mean() - a.mean()), low=lo, high=hi, n=min(len(a), len(b)), test=test)


def mean_ci(x: np.ndarray, test: str) -> Interval:
    if len(x) < 2:
        return NAN_INTERVAL
    lo, hi = _pct(x[_resample_idx(len(x), np.random.default_rng(SEED))].mean(axis=1))
    return Interval(value=float(x.mean()), low=lo, high=hi, n=len(x), test=test)


def speedup_diff_runs(first: Run, other: Run, arm: str, concurrency: int, variant: str) -> Interval:
    """Speedup(other) - speedup(first) for one arm: prompt pairs resampled within each
    run, the two runs independently."""
    sa, ba = speedup_pairs(first, arm, concurrency, variant)
    sb, bb = speedup_pairs(other, arm, concurrency, variant)
    if len(sa) < 2 or len(sb) < 2:
        return NAN_INTERVAL
    rng = np.random.default_rng(SEED)
    diffs = _ratio_boot(sb, bb, rng) - _ratio_boot(sa, ba, rng)
    lo, hi = _pct(diffs)
    value = float(sb.mean() / bb.mean() - sa.mean() / ba.mean())
    return Interval(value=value, low=lo, high=hi, n=min(len(sa), len(sb)),
                    test="bootstrap over prompt pairs, runs resampled independently")


def tps_diff_runs(first: Run, other: Run, arm: str, concurrency: int, variant: str) -> Interval:
    a = np.array(list(tps_by_key(first, arm, concurrency, variant).values()))
    b = np.array(list(tps_by_key(other, arm, concurrency, variant).values()))
    return _mean_diff(a, b, "bootstrap over requests, runs resampled independently")


def speedup_diff_arms(run: Run, arm_a: str, arm_b: str, concurrency: int, variant: str) -> Interval:
    """Speedup(arm_b) - speedup(arm_a) within one run, paired by prompt: both arms saw
    the same prompts (and the same baseline requests), so prompt difficulty cancels."""
    if not run.baseline:
        return NAN_INTERVAL
    base = tps_by_key(run, run.baseline, concurrency, variant)
    a = tps_by_key(run, arm_a, concurrency, variant)
    b = tps_by_key(run, arm_b, concurrency, variant)
    keys = sorted(base.keys() & a.keys() & b.keys())
    if len(keys) < 2:
        return NAN_INTERVAL
    x, y, z = (np.array([d[k] for k in keys]) for d in (a, b, base))
    idx = _resample_idx(len(keys), np.random.default_rng(SEED))
    with np.errstate(divide="ignore", invalid="ignore"):
        diffs = (y[idx].mean(axis=1) - x[idx].mean(axis=1)) / z[idx].mean(axis=1)
    lo, hi = _pct(diffs)
    return Interval(value=float((y.mean() - x.mean()) / z.mean()), low=lo, high=hi, n=len(keys),
                    test="paired bootstrap over prompts")


def mean_tps_ci(run: Run, arm: str, concurrency: int, variant: str) -> Interval:
    x = np.array(list(tps_by_key(run, arm, concurrency, variant).values()))
    return mean_ci(x, "bootstrap over requests")


def al_ci(run: Run, arm: str, concurrency: int, variant: str) -> Interval:
    """Token-weighted AL, 1 + sum(accepted) / sum(steps), resampling requests."""
    recs = [r for r in run.records if r.arm == arm and r.concurrency == concurrency and (r.variant or "") == variant
            and r.ok and not r.warmup and r.spec and r.spec.num_spec_steps > 0]
    if len(recs) < 2:
        return NAN_INTERVAL
    specs = [r.spec for r in recs if r.spec]
    acc = np.array([s.num_accepted_tokens for s in specs], dtype=np.float64)
    steps = np.array([s.num_spec_steps for s in specs], dtype=np.float64)
    idx = _resample_idx(len(recs), np.random.default_rng(SEED))
    lo, hi = _pct(1 + acc[idx].sum(axis=1) / steps[idx].sum(axis=1))
    return Interval(value=float(1 + acc.sum() / steps.sum()), low=lo, high=hi, n=len(recs),
                    test="bootstrap over requests")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a proportion (error rates: exact-ish even at 0 errors)."""
    if n <= 0:
        return math.nan, math.nan
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def speedup_ci(run: Run, arm: str, concurrency: int, variant: str) -> Interval:
    """Speedup (ratio of mean per-user TPS over prompt pairs) with a paired bootstrap CI."""
    spec, base = speedup_pairs(run, arm, concurrency, variant)
    if len(spec) < 2:
        return NAN_INTERVAL
    lo, hi = _pct(_ratio_boot(spec, base, np.random.default_rng(SEED)))
    return Interval(value=float(spec.mean() / base.mean()), low=lo, high=hi, n=len(spec),
                    test="paired bootstrap over prompts")


# Differences of two points' stored headline figures (compare, the leaderboard's pairs)

def stored_overlap(a: SummaryRow, b: SummaryRow) -> Interval:
    """Without a standard error from both intervals: the difference of the shown figures,
    significant iff the two stored intervals do not overlap (conservative)."""
    (ma, la, ha), (mb, lb, hb) = headline(a), headline(b)
    if not all(map(math.isfinite, (ma, mb, la, ha, lb, hb))):
        return NAN_INTERVAL if not (math.isfinite(ma) and math.isfinite(mb)) else \
            Interval(mb - ma, math.nan, math.nan, 0, "an unbounded interval: no test")
    apart = hb < la or lb > ha
    # encode "significant" through the interval sign, so callers treat both tests alike
    lo, hi = (mb - ma, mb - ma) if apart else (min(lb - ha, 0.0), max(hb - la, 0.0))
    return Interval(mb - ma, lo, hi, 0, "the two stored 95% intervals overlap or not")


def stored_diff(a: SummaryRow, b: SummaryRow) -> Interval:
    """The difference of the two figures shown (so its sign is theirs), with the two
    stored intervals combined as normal errors. Those intervals cover rounds of server
    starts where a point has 2 or more (the two-level bootstrap); a bootstrap over prompt
    pairs alone would call server-to-server noise real."""
    (ma, la, ha), (mb, lb, hb) = headline(a), headline(b)
    se = math.hypot(*((hi - lo) / (2 * 1.96) for lo, hi in ((la, ha), (lb, hb))))
    if not (math.isfinite(ma) and math.isfinite(mb) and math.isfinite(se)):
        return stored_overlap(a, b)
    d = mb - ma
    n = max(rounds(a), rounds(b))
    clocks = {headline_clock(a), headline_clock(b)} - {""}
    mixed = f" (the points lead with different clocks: {' and '.join(sorted(clocks))})" if len(clocks) > 1 else ""
    return Interval(d, d - 1.96 * se, d + 1.96 * se, max(n, 1),
                    "each point's stored interval (over rounds of server starts where there are 2 or more), "
                    "combined as normal errors" + mixed)
