"""Sequential stopping's statistics: the look schedule, the look level, and the coverage of
the rule the run uses (stopping/point.py's PointStop, fed seeded synthetic records batch by
batch as run/point.py feeds it): issue 21's done-when, at a 2% half-width the truth stays
inside the final interval in at least 95% of 40 seeded repetitions, with fewer prompts than
the fixed count."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pytest

from speedbench.records import PointKey, RequestRecord
from speedbench.scenario import validate_data
from speedbench.stopping.looks import EXHAUSTED, MAX_PROMPTS, REACHED, Look, resamples, speedup_look
from speedbench.stopping.point import point_stop
from speedbench.stopping.schedule import look_level, look_schedule, prompt_order

FIXED = 880  # SPEED-Bench qualitative: the fixed prompt count a point spends without stopping
TRUE_SPEEDUP = 2.0


def test_look_schedule_doubles_from_min_and_ends_at_the_cap():
    assert look_schedule(880, 16, 880) == [16, 32, 64, 128, 256, 512, 880]
    assert look_schedule(880, 16, 100) == [16, 32, 64, 100]
    assert look_schedule(50, 16, None) == [16, 32, 50]  # fewer prompts than max: every prompt is the last look
    assert look_schedule(64, 16, 64) == [16, 32, 64]
    assert look_schedule(10, 16, 880) == [10]
    assert look_schedule(0, 16, 880) == []


def test_look_level_splits_alpha_over_the_looks():
    assert look_level(0.05, 7) == pytest.approx(1 - 0.05 / 7)
    assert look_level(0.05, 1) == pytest.approx(0.95)


def test_far_levels_get_more_resamples():
    assert resamples(0.95) == 2000 and resamples(1 - 0.05 / 7) == 7000


def test_prompt_order_is_a_seeded_permutation():
    a = prompt_order(100, 3)
    assert sorted(a) == list(range(100)) and a == prompt_order(100, 3) and a != prompt_order(100, 4)
    assert a != list(range(100))


def test_halfwidth_is_relative_and_infinite_when_undefined():
    assert Look(2.0, 1.9, 2.1).halfwidth == pytest.approx(0.05)
    assert Look(math.nan, 1.0, 2.0).halfwidth == math.inf
    assert math.isnan(speedup_look(np.array([1.0]), np.array([1.0]), 0.95).estimate)  # one pair: no interval


def _arms(rep: int, sigma: float, n: int = FIXED) -> tuple[np.ndarray, np.ndarray]:
    """Per-prompt per-user TPS of both arms, in send order. Prompts differ in difficulty
    (lognormal, shared by both arms); each request has its own speed noise g of mean 1,
    independent between arms, so mean(spec) / mean(base) estimates TRUE_SPEEDUP exactly."""
    rng = np.random.default_rng(10_000 + rep)
    difficulty = rng.lognormal(0.0, 0.3, n)
    g_base = rng.lognormal(-sigma ** 2 / 2, sigma, n)
    g_spec = rng.lognormal(-sigma ** 2 / 2, sigma, n)
    return TRUE_SPEEDUP * 100 * difficulty * g_spec, 100 * difficulty * g_base


S = 1_000_000_000


def _record(arm: str, i: int, tps: float) -> RequestRecord:
    """Prompt ``i``'s request: 17 tokens, the last 16 at ``tps`` per-user TPS."""
    last = S + round(16 / tps * S)
    return RequestRecord(arm=arm, concurrency=1, prompt_index=i, prompt_id=f"p{i}", t_sent_ns=S - 1000,
                         t_end_ns=last + 1, chunk_ns=[S, last], chunk_tokens=[1, 16], output_tokens=17)


class _Baseline:
    """The baseline's records of the prompts sent so far: it runs every look, so each of
    the arm's prompts has its pair (the prompts beyond them would pair with nothing)."""

    def __init__(self, tps: np.ndarray):
        self.all = [_record("base", i, float(t)) for i, t in enumerate(tps)]
        self.sent: list[RequestRecord] = []

    def records(self, key: PointKey, repeat: int) -> list[RequestRecord]:
        return self.sent


class Stopped(NamedTuple):
    reason: str
    prompts: int
    look: int
    n_looks: int
    level: float
    ci_low: float
    ci_high: float


def _drive(spec_tps: np.ndarray, base_tps: np.ndarray, target: float, max_prompts: int | None,
           alpha: float = 0.05) -> Stopped:
    """One round of the speculative arm's point under PointStop, batch by batch as
    run/point.py sends it: the prompts of each batch in the point's send order, then the look."""
    sc = validate_data({"name": "t", "server": {"model": "m"}, "concurrency": [1],
                        "arms": [{"name": "base"}, {"name": "spec", "speculative_config": {
                            "method": "eagle3", "model": "d", "num_speculative_tokens": 3}}],
                        "stop": {"speedup_ci_halfwidth": target, "min_prompts": 16, "max_prompts": max_prompts,
                                 "alpha": alpha}})
    n = len(spec_tps)
    base = _Baseline(base_tps)
    stop = point_stop(sc, PointKey("spec", 1, ""), 0, n, base)
    assert stop is not None
    records: list[RequestRecord] = []
    for batch in stop.batches():
        records += [_record("spec", i, float(spec_tps[i])) for i in batch]
        base.sent += [base.all[i] for i in batch]
        if not stop.go_on(records, len(records)):
            break
    marks = stop.marks(n)
    kept = marks["stop_intervals"]
    return Stopped(marks["stop_reason"], marks["stop_prompts"], marks["stop_look"], marks["stop_looks"],
                   look_level(alpha, len(stop.looks)), kept["ci_low"], kept["ci_high"])


def _repetitions(n_reps: int, sigma_of, target: float = 0.02):
    return [_drive(*_arms(rep, sigma_of(rep)), target, FIXED) for rep in range(n_reps)]


def test_coverage_at_a_2pct_halfwidth_over_40_seeded_repetitions(capsys):
    """The done-when figure. Noise varies by repetition (sigma 4%..12% per request), so
    points stop at different looks; each must still hold the truth."""
    stops = _repetitions(40, lambda rep: 0.04 + 0.08 * (rep % 5) / 4)
    covered = sum(s.ci_low <= TRUE_SPEEDUP <= s.ci_high for s in stops)
    mean_prompts = float(np.mean([s.prompts for s in stops]))
    with capsys.disabled():
        print(f"\nsequential stopping, 40 seeded repetitions: coverage {covered}/40 = {covered / 40:.1%}, "
              f"mean prompts {mean_prompts:.0f} vs fixed {FIXED}; stopped at {sorted({s.prompts for s in stops})}")
    assert covered >= 38  # at least 95% of 40
    assert mean_prompts < FIXED
    assert {s.reason for s in stops} == {REACHED}  # every repetition reached the target
    assert len({s.prompts for s in stops}) >= 3  # the looks differed: the test exercises optional stopping


def test_coverage_holds_over_more_repetitions():
    """Bonferroni is conservative: over 200 repetitions the coverage stays at 95% or more."""
    stops = _repetitions(200, lambda rep: 0.04 + 0.08 * (rep % 7) / 6)
    covered = sum(s.ci_low <= TRUE_SPEEDUP <= s.ci_high for s in stops)
    assert covered / 200 >= 0.95


def test_the_correction_widens_each_look():
    """Without the correction (each look at 95%) the same rule stops no later, on a
    narrower interval: the look level is what pays for looking more than once."""
    s, b = _arms(1, 0.08)
    looks = look_schedule(FIXED, 16, FIXED)
    corrected = _drive(s, b, 0.02, FIXED)
    naive = _drive(s, b, 0.02, FIXED, alpha=0.05 * len(looks))  # level 1 - alpha / L = 0.95
    assert naive.level == pytest.approx(0.95) and corrected.level == pytest.approx(1 - 0.05 / 7)
    assert naive.prompts <= corrected.prompts
    sent = prompt_order(FIXED, 0)[:corrected.prompts]  # the prompts the point sent, in its send order
    same_n = speedup_look(s[sent], b[sent], 0.95)
    assert corrected.ci_high - corrected.ci_low > 1.2 * (same_n.ci_high - same_n.ci_low)


def test_reasons_when_the_target_is_not_reached():
    s, b = _arms(2, 0.3, n=100)
    assert _drive(s, b, 0.001, None).reason == EXHAUSTED
    stop = _drive(s, b, 0.001, 40)
    assert stop.reason == MAX_PROMPTS and stop.prompts == 40 and stop.look == stop.n_looks == 3
