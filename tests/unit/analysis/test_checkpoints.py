"""analysis.checkpoints: pooling over nights, night-paired contrasts, BH in two levels."""

from __future__ import annotations

import math

import numpy as np

from speedbench.analysis.checkpoints import (BETTER, INSUFFICIENT, SAME, WORSE, bh_qvalues, call, contrast, pool,
                                             simes, two_level_q)


def test_pool_is_the_geometric_mean_with_a_t_interval_over_nights():
    p = pool([1.0, 2.0, 4.0, math.nan, -1.0])
    assert p.nights == 3 and math.isclose(p.value, 2.0)
    # log2 values 0, 1, 2: mean 1, sd 1, t(2) = 4.303
    assert math.isclose(p.low, 2 * math.exp(-4.303 * math.log(2) / math.sqrt(3)), rel_tol=1e-3)
    one = pool([1.5])
    assert one.nights == 1 and math.isnan(one.low)


def test_night_to_night_variation_is_in_the_interval_and_it_covers_the_truth():
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(400):
        nights = 5
        night = rng.normal(0, 0.05, nights)  # a night effect shared by both checkpoints (cancels)
        between = rng.normal(0, 0.02, nights)  # the difference itself varies night to night
        ref = 1.5 * np.exp(night + rng.normal(0, 0.01, nights))
        ck = 1.5 * 1.04 * np.exp(night + between + rng.normal(0, 0.01, nights))
        c = contrast(list(zip(ck, ref)))
        covered += c.low <= 1.04 <= c.high
    assert 0.92 <= covered / 400 <= 0.98


def test_too_few_nights_is_insufficient():
    c = contrast([(1.1, 1.0), (1.12, 1.0)])
    assert c.nights == 2 and math.isnan(c.p) and call(c, math.nan) == INSUFFICIENT
    c = contrast([(1.1, 1.0), (1.12, 1.0), (1.11, 1.0), (1.09, 1.0)])
    assert c.ratio > 1.08 and c.p < 0.001
    assert call(c, 0.01) == BETTER and call(c, 0.2) == SAME
    assert call(contrast([(0.9, 1.0), (0.91, 1.0), (0.89, 1.0)]), 0.01) == WORSE


def test_benjamini_hochberg():
    q = bh_qvalues([0.01, 0.04, 0.03, math.nan, 0.5])
    assert math.isnan(q[3])
    assert [round(x, 4) for x in (q[0], q[2], q[1], q[4])] == [0.04, 0.0533, 0.0533, 0.5]
    assert simes([0.04, 0.01, 0.5]) == 0.03


def test_a_checkpoint_that_differs_a_lot_does_not_lower_the_bar_for_the_others():
    big = [1e-12] * 5  # an untrained draft: every comparison tiny
    null = [0.02, 0.3, 0.6, 0.8, 0.9]  # one smallish p by luck
    flat = bh_qvalues(big + null)
    assert flat[5] <= 0.05  # one flat BH would call it
    two = two_level_q([big, null])
    assert all(q <= 0.05 for q in two[0]) and two[1][0] > 0.05  # two levels do not
    assert two_level_q([[0.001, 0.002], [0.5]])[0] == [0.004, 0.004]  # 1 of 2 selected: within-BH q · 2
