"""The speedup-vs-AL fit: exact on exact data, honest intervals on noisy data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from speedbench.calibration.fit import Curve, CurvePoint, curves_from_rows, fit_curve, point_from_row
from speedbench.metrics.registry import SummaryRow


def test_origin_fit_recovers_an_exact_slope_and_predicts_proportionally():
    pts = [CurvePoint(al, 0.4 * al, 0.4 * al * 0.98, 0.4 * al * 1.02) for al in (1.0, 2.0, 3.0, 4.0)]
    c = fit_curve(pts, 4)
    assert c.slope == pytest.approx(0.4) and c.intercept == 0.0
    s, lo, hi = c.predict(2.5)
    assert s == pytest.approx(1.0) and lo < 1.0 < hi
    # the interval scales with AL: the slope is what is uncertain
    s1, lo1, hi1 = c.predict(1.0)
    assert (hi - lo) == pytest.approx(2.5 * (hi1 - lo1))


def test_one_point_is_enough_for_the_origin_model_and_its_interval_comes_from_the_point():
    c = fit_curve([CurvePoint(1.0, 0.5, 0.45, 0.55)], 1)
    assert c.slope == pytest.approx(0.5)
    s, lo, hi = c.predict(3.0)
    assert s == pytest.approx(1.5)
    assert (lo, hi) == pytest.approx((1.35, 1.65), rel=1e-3)  # the point's own interval, times 3
    assert math.isnan(c.chi2_dof)


def test_affine_fit_finds_an_intercept_and_needs_two_als():
    pts = [CurvePoint(al, 0.1 + 0.3 * al, 0.1 + 0.3 * al - 0.01, 0.1 + 0.3 * al + 0.01) for al in (1, 2.5, 4)]
    c = fit_curve(pts, 1, "affine")
    assert (c.intercept, c.slope) == pytest.approx((0.1, 0.3))
    with pytest.raises(ValueError, match="2 distinct AL"):
        fit_curve(pts[:1], 1, "affine")


def test_scatter_beyond_the_points_intervals_widens_the_interval():
    tight = [CurvePoint(al, 0.4 * al, 0.4 * al - 0.001, 0.4 * al + 0.001) for al in (1, 2, 3)]
    bad = [CurvePoint(1, 0.3, 0.299, 0.301), CurvePoint(2, 0.9, 0.899, 0.901), CurvePoint(3, 1.2, 1.199, 1.201)]
    w_tight = np.diff(fit_curve(tight, 1).predict(2)[1:])[0]
    w_bad = np.diff(fit_curve(bad, 1).predict(2)[1:])[0]
    assert fit_curve(bad, 1).chi2_dof > 100
    assert w_bad > 10 * w_tight


def test_coverage_of_the_slope_interval_on_simulated_points():
    """Points with known noise: the 95% interval of the curve at AL 3 holds the truth in
    about 95% of 400 fits (not far below: the interval must not be overconfident)."""
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(400):
        pts = []
        for al in (1.0, 2.0, 3.0, 4.0):
            sd = 0.02 * 0.4 * al
            y = 0.4 * al + rng.normal(0, sd)
            pts.append(CurvePoint(al, y, y - 1.96 * sd, y + 1.96 * sd))
        _, lo, hi = fit_curve(pts, 1).predict(3.0)
        hits += lo <= 1.2 <= hi
    assert hits / 400 >= 0.92


def test_rows_give_points_from_engine_speedups_and_fall_back_to_the_client():
    row = {"arm": "a", "concurrency": 4, "status": "ok", "al_tokens": 2.0, "speedup_engine_mean": 0.8,
           "speedup_engine_ci_low": 0.7, "speedup_engine_ci_high": 0.9, "speedup_mean": 0.75,
           "speedup_ci_low": 0.6, "speedup_ci_high": 0.9}
    typed = SummaryRow.from_dict
    assert point_from_row(typed(row)) == CurvePoint(2.0, 0.8, 0.7, 0.9, "a")
    assert point_from_row(typed(row), "client") == CurvePoint(2.0, 0.75, 0.6, 0.9, "a")
    no_engine = {**row, "speedup_engine_mean": None}
    assert point_from_row(typed(no_engine)).speedup == 0.75
    assert point_from_row(typed({**row, "al_tokens": None})) is None
    rows = [row, {**row, "arm": "b", "al_tokens": 4.0, "speedup_engine_mean": 1.6}, {**row, "arm": "base"},
            {**row, "arm": "b", "concurrency": 1, "status": "failed"}]
    curves = curves_from_rows([typed(r) for r in rows], ["a", "b"])
    assert [c.concurrency for c in curves] == [4] and len(curves[0].points) == 2


def test_a_curve_survives_its_json_form():
    c = fit_curve([CurvePoint(1.0, 0.5, math.nan, math.nan, "x"), CurvePoint(3.0, 1.5, 1.4, 1.6)], 16)
    back = Curve.from_dict(c.to_dict())
    assert back.slope == c.slope and back.cov == c.cov and back.points[1] == c.points[1]
    assert back.predict(2.0) == pytest.approx(c.predict(2.0))
    # nulls from strict JSON (NaN written as null) read back as NaN
    d = c.to_dict()
    d["chi2_dof"] = None
    d["points"][0]["ci_low"] = None
    assert math.isnan(Curve.from_dict(d).points[0].ci_low)
