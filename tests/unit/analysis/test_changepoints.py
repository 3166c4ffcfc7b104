"""analysis.changepoints on plain series: steps, one-night changes, noise, the band."""

from __future__ import annotations

import math

import numpy as np

from speedbench.analysis.changepoints import IMPROVEMENT, REGRESSION, SUSPICIOUS, find_changes, robust_sd


def series(n=30, sd=0.02, at=None, step=0.0, seed=0, mean=1.8):
    y = np.random.default_rng(seed).normal(mean, sd, n)
    if at is not None:
        y[at:] += step
    return list(y)


def test_a_step_is_found_where_it_began_and_judged_against_the_nights_before_it():
    y = series(at=20, step=-0.10)  # 5 sd
    (ch,) = find_changes(y)
    assert ch.index == 20 and ch.kind == REGRESSION and ch.nights == 10
    assert math.isclose(ch.before, np.mean(y[6:20])) and math.isclose(ch.after, np.mean(y[20:]))
    # the band: the baseline window's own spread, not widened by the step
    assert ch.noise_sd < 0.03 and ch.sigmas > 3
    assert find_changes(series(at=20, step=0.10))[0].kind == IMPROVEMENT
    assert find_changes(series(at=20, step=0.10), higher_is_better=False)[0].kind == REGRESSION


def test_no_change_and_too_few_nights():
    # 200 series of 30 nights of pure noise: under 1 false call (either way) per 100 series-nights
    calls = sum(len(find_changes(series(seed=s))) for s in range(200))
    assert calls <= 0.01 * 200 * 30
    assert find_changes([1.0, 1.1, 0.5]) == []


def test_one_night_last_is_suspicious_and_one_night_blip_in_the_middle_is_noise():
    y = series(seed=3)
    y[-1] -= 0.2
    (ch,) = find_changes(y)
    assert ch.kind == SUSPICIOUS and ch.index == len(y) - 1 and ch.nights == 1
    y = series(seed=2)
    y[15] -= 0.2
    assert find_changes(y) == []


def test_inside_the_nights_own_intervals_or_the_floor_is_no_change():
    y = series(at=20, step=-0.10)
    assert find_changes(y, half_widths=[0.5] * len(y)) == []  # each night's interval ±0.5: the step is inside
    assert len(find_changes(y, half_widths=[0.03] * len(y))) == 1
    assert find_changes(y, floor_rel=0.08) == []  # the A/A floor ±8% of 1.8 covers a 0.10 step
    assert len(find_changes(y, floor_rel=0.02)) == 1


def test_robust_sd_is_barely_moved_by_a_step():
    flat, stepped = series(seed=3), series(seed=3, at=15, step=0.5)
    assert math.isclose(robust_sd(flat), robust_sd(stepped), rel_tol=0.2)
    assert math.isnan(robust_sd([1.0, 2.0]))


def test_the_charts_band_is_not_widened_by_the_step():
    import datetime as dt

    from speedbench.report import plots

    class Axes:  # records what the band drawing asks of matplotlib
        def __init__(self):
            self.bands, self.marks = [], []

        def fill_between(self, xs, lo, hi, **kw):
            self.bands.append((xs, lo, hi))

        def axvline(self, x, **kw):
            self.marks.append(x)

        def plot(self, *a, **kw):
            pass

    y = series(at=20, step=-0.20, sd=0.02)  # a 10 sd step
    ts = [dt.datetime(2026, 1, 1) + dt.timedelta(days=i) for i in range(len(y))]
    ax = Axes()
    plots._bands_and_marks(ax, ts, y, [float("nan")] * len(y), "#000000")
    assert ax.marks == [ts[20]]
    (x0, lo0, hi0), (x1, lo1, hi1) = ax.bands
    assert x0 == [ts[0], ts[19]] and x1 == [ts[20], ts[29]]
    assert (hi0 - lo0) / 4 < 0.03 and (hi1 - lo1) / 4 < 0.03  # about 2 sd each side, not the step
    assert lo0 > hi1  # the two levels' bands do not overlap
    # the old band, mean ± 2 sd of every night, would have swallowed the step
    assert 2 * np.std(y, ddof=1) > 0.18


def test_identical_nights_have_a_floor_not_a_zero_spread():
    """Copies of one night (a spread of exactly zero) once gave "500000000.0 night-to-night
    sd": the floor keeps a change's size in sds meaningful (issue 47)."""
    from speedbench.analysis.changepoints import SD_FLOOR_REL, floored_sd

    y = [2.0] * 8 + [1.0] * 3
    changes = find_changes(y)
    assert changes and changes[-1].kind == REGRESSION
    assert changes[-1].noise_sd == SD_FLOOR_REL * 2.0
    assert changes[-1].sigmas == 1.0 / (SD_FLOOR_REL * 2.0)
    assert floored_sd(0.0, 1.5) == SD_FLOOR_REL * 1.5 and floored_sd(0.2, 1.5) == 0.2
    assert math.isnan(floored_sd(math.nan, 1.5))

def test_a_bad_last_night_is_never_merged_into_a_longer_regression():
    # 200 flat series of 30 nights whose last night alone is 10% (6.7 sd) low: at most a
    # suspicious last night, never a change that began earlier (issue 48: 2 in 11 were)
    for s in range(200):
        y = series(seed=s, sd=0.027)
        y[-1] *= 0.9
        for ch in find_changes(y):
            if ch.index + ch.nights == len(y):  # a level that reaches the last night
                assert ch.kind == SUSPICIOUS and ch.index == len(y) - 1, (s, ch)


def test_one_bad_night_in_the_past_is_not_a_change_point():
    calls = 0
    for s in range(150):
        y = series(seed=s, sd=0.027)
        y[15] *= 0.88
        calls += any(abs(ch.index - 15) <= 4 for ch in find_changes(y))
    assert calls <= 1


def test_steps_held_two_nights_or_more_are_still_found():
    for held, want in ((2, 0.9), (3, 0.95), (5, 0.97)):
        hits = 0
        for s in range(100):
            y = series(seed=s, sd=0.027)
            y[30 - held:] = [v * 0.9 for v in y[30 - held:]]
            hits += any(ch.kind == REGRESSION and abs(ch.index - (30 - held)) <= 1 for ch in find_changes(y))
        assert hits >= want * 100, (held, hits)


def test_a_known_draft_change_is_judged_with_one_night_before_it_and_called_suspicious_at_most():
    # a swapped checkpoint: AL 2.90 -> 2.60 from night 1; no history to speak of
    (ch,) = find_changes([2.90, 2.60], known=[1], short=True)
    assert ch.kind == "suspicious" and ch.index == 1 and ch.baseline_nights == 1
    assert find_changes([2.90, 2.60]) == []  # the same figures with no known change: too few nights
    # two equal nights before it: the step is not taken for the series' spread
    (ch,) = find_changes([3.333, 3.333, 2.870], known=[2], short=True)
    assert ch.kind == "suspicious" and ch.baseline_nights == 2
    # held for three nights, still with fewer than MIN_BASELINE before it: suspicious, not a regression
    (ch,) = find_changes([2.90, 2.91, 2.60, 2.61, 2.60], known=[2], short=True)
    assert ch.kind == "suspicious" and ch.nights == 3 and ch.baseline_nights == 2
    # with enough nights before it, the same change is a regression
    (ch,) = find_changes([2.90, 2.91, 2.90, 2.89, 2.90, 2.91, 2.60, 2.61], known=[6], short=True)
    assert ch.kind == "regression" and ch.index == 6


def test_a_known_draft_change_that_moves_nothing_is_no_change():
    assert find_changes([2.90, 2.905], known=[1], short=True) == []  # inside the 0.5% floor's 3.5 standard errors
    # nights' own intervals that overlap the move: not called
    assert find_changes([2.90, 2.78], [0.15, 0.15], known=[1], short=True) == []


def test_a_timed_figure_at_a_known_change_still_needs_five_nights_before_it():
    # speedup and TPS move from night to night by themselves: a known change is no shortcut
    assert find_changes([1.50, 1.20], [0.05, 0.05], known=[1]) == []
    assert find_changes([2.90, 2.60], known=[1], short=True)[0].kind == "suspicious"
