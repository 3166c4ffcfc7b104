"""The A/A noise floor as one check of a run: intervals simultaneous over its points, so
a run of identical servers fails the check about 1 time in 20."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.simulate import aa_point

from speedbench.metrics.noise_floor import family_level, floor_entries
from speedbench.metrics.speedup import TPS_COLUMNS, pooled_round_spread, round_ratios, speedup
from speedbench.records import PointKey


def test_family_level_is_bonferroni():
    assert family_level(6) == pytest.approx(1 - 0.05 / 6)
    assert family_level(1) == pytest.approx(0.95)
    assert family_level(0) == pytest.approx(0.95)
    assert family_level(4, 0.99) == pytest.approx(1 - 0.01 / 4)


def test_entries_carry_both_clocks_at_the_family_level():
    rng = np.random.default_rng(3)
    pairs = {PointKey("aa", c): aa_point(rng, 0.05) for c in (1, 4, 16)}
    floor = floor_entries(pairs)
    spreads = {p: pooled_round_spread(round_ratios(s, b, p) for s, b in pairs.values()) for p in TPS_COLUMNS}
    assert [f["concurrency"] for f in floor] == [1, 4, 16]
    for f, (aa, base) in zip(floor, pairs.values(), strict=True):
        assert f["level"] == pytest.approx(1 - 0.05 / 3)
        assert f["speedup"] == pytest.approx(aa["per_user_tps"].mean() / base["per_user_tps"].mean())
        assert f["ci_low"] <= f["speedup"] <= f["ci_high"]
        assert f["engine_ci_low"] <= f["speedup_engine"] <= f["engine_ci_high"]
        inside = f["ci_low"] <= 1 <= f["ci_high"] and f["engine_ci_low"] <= 1 <= f["engine_ci_high"]
        assert f["contains_one"] == inside
        # the same spread at 95% gives a narrower interval inside it
        at95 = speedup(aa, base, spreads, level=0.95)
        assert f["ci_low"] < at95["speedup_ci_low"] and at95["speedup_ci_high"] < f["ci_high"]
