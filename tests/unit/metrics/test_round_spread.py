"""The between-round spread: Student t quantiles, pooling over an arm pair's points, and
the interval that uses the pooled spread."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from speedbench.metrics.bootstrap import RoundSpread, cluster_paired_ratio_ci, t_quantile
from speedbench.metrics.speedup import pooled_round_spread, round_ratios, speedup


@pytest.mark.parametrize("df,level,table", [
    (1, 0.95, 12.706), (2, 0.95, 4.303), (3, 0.95, 3.182), (6, 0.95, 2.447), (30, 0.95, 2.042),
    (1, 0.999, 636.619), (2, 0.999, 31.599), (6, 0.999, 5.959), (10, 0.99, 3.169), (120, 0.95, 1.980)])
def test_t_quantile_matches_the_printed_tables(df, level, table):
    assert t_quantile(df, level) == pytest.approx(table, abs=2e-3)


def test_t_quantile_refuses_nonsense():
    with pytest.raises(ValueError, match="df >= 1"):
        t_quantile(0)
    with pytest.raises(ValueError, match="level"):
        t_quantile(3, 1.0)


def test_pooled_spread_sums_squares_and_degrees_of_freedom():
    a = [1.0, 1.2, 0.9]
    b = [0.8, 0.85]
    logs_a, logs_b = np.log(a), np.log(b)
    ss = ((logs_a - logs_a.mean()) ** 2).sum() + ((logs_b - logs_b.mean()) ** 2).sum()
    got = pooled_round_spread([a, b, [1.1]])  # a single round adds nothing
    assert got is not None and got.df == 3
    assert got.log_sd == pytest.approx(math.sqrt(ss / 3))
    assert pooled_round_spread([[1.0], []]) is None


def _point(ratio_by_round: list[float], n: int = 10, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    rows_b, rows_s = [], []
    for rnd, r in enumerate(ratio_by_round):
        tps = rng.normal(100, 5, n)
        for i, t in enumerate(tps):
            key = {"prompt_index": i, "turn": 0, "repeat": rnd}
            rows_b.append({**key, "per_user_tps": t, "engine_tps": t})
            rows_s.append({**key, "per_user_tps": t * r, "engine_tps": t * r})
    return pd.DataFrame(rows_s), pd.DataFrame(rows_b)


def test_round_ratios_are_each_rounds_own_speedup():
    spec, base = _point([1.5, 1.2])
    assert round_ratios(spec, base, "speedup") == pytest.approx([1.5, 1.2])
    assert round_ratios(spec, base, "speedup_engine") == pytest.approx([1.5, 1.2])


def test_a_round_of_bursts_keeps_its_place_and_leaves_the_spread_to_the_others():
    """On a busy host every request of a round can arrive in one read: no client-side TPS
    in that round. It stays in the list (as NaN), so the list still counts the rounds
    run, and the spread comes from the rounds that have a ratio."""
    spec, base = _point([1.5, 1.2, 1.3])
    spec.loc[spec["repeat"] == 1, "per_user_tps"] = np.nan
    by = round_ratios(spec, base, "speedup")
    assert len(by) == 3 and math.isnan(by[1])
    assert by[0] == pytest.approx(1.5) and by[2] == pytest.approx(1.3)
    out = speedup(spec, base)
    assert len(out["speedup_by_repeat"]) == 3
    assert out["speedup_between_sd"] == pytest.approx(np.std([1.5, 1.3], ddof=1), rel=1e-6)


def test_a_pooled_spread_replaces_a_points_accidentally_tight_one():
    """Three rounds that happen to agree closely: on their own they give a narrow interval;
    with the spread the arm pair showed at its other points, the interval widens to it."""
    spec, base = _point([0.95, 0.951, 0.949])
    own = speedup(spec, base)
    wide = RoundSpread(log_sd=0.08, df=6)
    pooled = speedup(spec, base, {"speedup": wide, "speedup_engine": wide})
    assert own["speedup_ci_high"] < 1.0 < pooled["speedup_ci_high"]
    half = t_quantile(6) * 0.08 / math.sqrt(3)
    assert pooled["speedup_ci_high"] == pytest.approx(pooled["speedup_mean"] * math.exp(half), rel=1e-9)
    assert pooled["speedup_engine_ci_high"] == pytest.approx(pooled["speedup_ci_high"])


def test_one_round_takes_a_pooled_spread_as_one_server_start():
    """A point left with one round (its other rounds lost every pair, e.g. to bursts) is
    still one server start: a pooled spread widens it to the t interval of one round; with
    no spread (a run without rounds) it is the plain paired interval."""
    spec, base = _point([1.3])
    s, b = spec["per_user_tps"].to_numpy(), base["per_user_tps"].to_numpy()
    plain = cluster_paired_ratio_ci(s, b, np.zeros(len(s)))
    lo, hi = cluster_paired_ratio_ci(s, b, np.zeros(len(s)), spread=RoundSpread(0.1, 4))
    centre = s.sum() / b.sum()
    assert hi == pytest.approx(centre * math.exp(t_quantile(4) * 0.1), rel=1e-9)
    assert lo == pytest.approx(centre * math.exp(-t_quantile(4) * 0.1), rel=1e-9)
    assert lo < plain[0] and plain[1] < hi


def test_a_point_noisier_than_its_pool_keeps_its_own_spread():
    """Pooling assumes an arm pair's points share a spread; a point whose own rounds spread
    wider than the pool uses its own sd (at the pool's df), never a narrower one."""
    spec, base = _point([0.8, 1.0, 1.25])
    s, b, rnd = (spec["per_user_tps"].to_numpy(), base["per_user_tps"].to_numpy(), spec["repeat"].to_numpy())
    per_round = np.array([s[rnd == r].sum() / b[rnd == r].sum() for r in range(3)])
    own_sd = float(np.std(np.log(per_round), ddof=1))
    centre = s.sum() / b.sum()
    lo, hi = cluster_paired_ratio_ci(s, b, rnd, spread=RoundSpread(own_sd / 4, 6))
    assert hi >= centre * math.exp(t_quantile(6) * own_sd / math.sqrt(3)) * (1 - 1e-9)
    # a pool wider than the point's own spread is used as it is
    lo, hi = cluster_paired_ratio_ci(s, b, rnd, spread=RoundSpread(own_sd * 2, 6))
    assert hi >= centre * math.exp(t_quantile(6) * own_sd * 2 / math.sqrt(3)) * (1 - 1e-9)




def test_a_widening_past_any_float_reaches_zero_and_infinity():
    # one round left, a pooled spread with 1 degree of freedom, rounds 44% apart, at the
    # 99.975% level of a 4-point A/A family check: exp(t * sd) is past what a float holds
    # (a busy fresh clone raised OverflowError here)
    rng = np.random.default_rng(3)
    b = rng.uniform(90, 110, 12)
    lo, hi = cluster_paired_ratio_ci(b * 1.2, b, np.zeros(12), spread=RoundSpread(0.366, 1),
                                     level=1 - 0.001 / 4)
    assert lo == 0.0 and hi == math.inf
    # at the 95% level the same spread widens to finite ends around the ratio
    lo, hi = cluster_paired_ratio_ci(b * 1.2, b, np.zeros(12), spread=RoundSpread(0.366, 1))
    assert 0 < lo < 1.2 < hi < math.inf
