"""The client's own timing error (metrics/lag.py) on synthetic records with known windows
and known stamp delays: the per-request range, the speedup's range, the widened interval,
its warning, and sequential stopping's looks."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from speedbench.metrics.rows import summarize

from speedbench.metrics.table import request_table
from speedbench.metrics.lag import LAG_WARN_SHARE, LagRange, lag_range, lag_warning
from speedbench.stopping.looks import narrow_enough, speedup_look
from speedbench.records import EngineTiming, RequestRecord

MS = 1_000_000  # ns per ms


def rec(arm: str, idx: int, window_ms: float, *, n: int = 33, late_first_ms: float = 0.0, late_last_ms: float = 0.0,
        lag_ms: float | None = None) -> RequestRecord:
    """A request whose tokens were truly emitted ``window_ms`` apart (first to last), its
    first and last stamps late by the given delays, and ``lag_ms`` recorded as its lag."""
    t0 = 1_000 * MS + idx * 10_000 * MS
    first = t0 + int(late_first_ms * MS)
    last = t0 + int(window_ms * MS) + int(late_last_ms * MS)
    mid = (first + last) // 2
    return RequestRecord(arm=arm, concurrency=4, prompt_index=idx, prompt_id=f"p{idx}", t_sent_ns=t0 - 50 * MS,
                         t_end_ns=last + MS, chunk_ns=[first, mid, last], chunk_tokens=[1, n // 2, n - 1 - n // 2],
                         output_tokens=n, engine=EngineTiming(generation_ms=window_ms),
                         loop_lag_ns=None if lag_ms is None else int(lag_ms * MS))


def test_one_request_lies_between_its_window_stretched_and_shrunk_by_its_lag():
    t = request_table([rec("a", 0, 100.0, lag_ms=10.0), rec("a", 1, 100.0), rec("a", 2, 5.0, lag_ms=8.0)])
    r = t.iloc[0]
    assert r.per_user_tps == pytest.approx(32 / 0.100)
    assert (r.lag_ms, r.tps_lag_low, r.tps_lag_high) == pytest.approx((10.0, 32 / 0.110, 32 / 0.090))
    # no lag recorded (records older than the probe's share): no range
    assert math.isnan(t.iloc[1].lag_ms) and t.iloc[1].tps_lag_low == t.iloc[1].tps_lag_high == t.iloc[1].per_user_tps
    # a lag as long as the window: the true rate has no upper bound
    assert t.iloc[2].tps_lag_high == math.inf


def test_the_speedups_range_is_the_worst_way_every_window_can_move():
    arm = {"tps": np.array([10.0, 20.0]), "low": np.array([9.0, 18.0]), "high": np.array([11.0, 23.0]),
           "lag_ms": np.array([1.0, 2.0]), "decode_s": np.array([0.1, 0.2])}
    base = {"tps": np.array([5.0, 5.0]), "low": np.array([4.0, 4.5]), "high": np.array([6.0, 5.5]),
            "lag_ms": np.array([3.0, np.nan]), "decode_s": np.array([0.3, 0.4])}
    r = lag_range(arm, base)
    est = 15.0 / 5.0
    assert r.low == pytest.approx((13.5 / 5.75) / est) and r.high == pytest.approx((17.0 / 4.25) / est)
    assert r.bound == pytest.approx(max(1 - r.low, r.high - 1)) and r.lag_ms == 3.0
    assert r.widen(2.0, 4.0) == pytest.approx((2.0 * r.low, 4.0 * r.high))
    no_lag = {**base, "lag_ms": np.array([np.nan, np.nan])}
    assert math.isnan(lag_range({**arm, "lag_ms": no_lag["lag_ms"]}, no_lag).bound)


def _records(delay_ms: float | None, lag_ms: float | None, n_prompts: int = 24,
             noise: float = 0.0) -> list[RequestRecord]:
    """True speedup 2.5 exactly (spec windows 40% of the baseline's, same tokens), with
    per-prompt difficulty shared by both arms (and ``noise``: the spec arm's own spread).
    ``delay_ms``: the spec arm's last stamps and the baseline's first stamps come that late
    (the worst case for the ratio: the spec arm reads slow, the baseline fast)."""
    rng = np.random.default_rng(3)
    out = []
    d = delay_ms or 0.0
    for i in range(n_prompts):
        w = 500.0 * float(rng.uniform(0.8, 1.2))
        out.append(rec("base", i, w, late_first_ms=d, lag_ms=lag_ms))
        out.append(rec("spec", i, 0.4 * w * float(rng.uniform(1 - noise, 1 + noise)), late_last_ms=d, lag_ms=lag_ms))
    return out


def _row(records: list[RequestRecord]) -> dict:
    rows = summarize(records, None, "base", {"base": {}, "spec": {}})
    return next(r for r in rows if r["arm"] == "spec")


def test_a_systematic_lag_is_outside_the_bare_interval_and_inside_the_widened_one():
    true = 2.5
    # stamps late by up to 8 ms, in the way that moves the ratio most
    bare = _row(_records(8.0, None))
    row = _row(_records(8.0, 8.0))
    assert bare["speedup_mean"] == row["speedup_mean"] < true
    # the bootstrap cannot see a shift every request shares: the bare interval misses the truth
    assert not bare["speedup_ci_low"] <= true <= bare["speedup_ci_high"]
    assert math.isnan(bare["speedup_lag_bound"]) and not any("event loop lagged" in w for w in bare["warnings"])
    # widened by exactly the lag range over the same pairs, it holds it
    t = request_table(_records(8.0, 8.0))
    side = {a: {k: t[t["arm"] == a][c].to_numpy(dtype=float) for k, c in
                (("tps", "per_user_tps"), ("low", "tps_lag_low"), ("high", "tps_lag_high"), ("lag_ms", "lag_ms"),
                 ("decode_s", "decode_s"))} for a in ("spec", "base")}
    r = lag_range(side["spec"], side["base"])
    assert (row["speedup_ci_low"], row["speedup_ci_high"]) == pytest.approx(
        (bare["speedup_ci_low"] * r.low, bare["speedup_ci_high"] * r.high))
    assert row["speedup_lag_bound"] == pytest.approx(r.bound)
    assert row["speedup_ci_low"] <= true <= row["speedup_ci_high"]
    # and the row says so: the bound is most of the interval
    assert any("event loop lagged up to 8.0 ms" in w for w in row["warnings"])
    # the engine's clock is not the client's: its interval does not move
    assert (row["speedup_engine_ci_low"], row["speedup_engine_ci_high"]) == (
        bare["speedup_engine_ci_low"], bare["speedup_engine_ci_high"])


def test_a_lag_small_against_the_interval_widens_it_a_little_and_says_nothing():
    records = _records(None, 0.001, noise=0.05)
    row, bare = _row(records), _row([replace(r, loop_lag_ns=None) for r in records])
    assert 0 < row["speedup_lag_bound"] < 1e-4
    assert row["speedup_ci_low"] < bare["speedup_ci_low"] and row["speedup_ci_high"] > bare["speedup_ci_high"]
    assert not any("event loop lagged" in w for w in row["warnings"])


def test_the_warning_threshold_is_a_share_of_the_statistical_half_width():
    half = 0.01  # interval [0.99, 1.01] around 1.0
    at = LagRange(1 - LAG_WARN_SHARE * half, 1 + LAG_WARN_SHARE * half, lag_ms=1.0, window_ms=100.0)
    above = LagRange(0.99, 1.01, lag_ms=2.0, window_ms=100.0)  # the whole half-width
    assert lag_warning(1.0, 0.99, 1.01, at) is None
    assert "widened by it to [0.9801, 1.0201]" in (lag_warning(1.0, 0.99, 1.01, above) or "")


def test_a_look_is_widened_by_the_lag_so_stopping_cannot_beat_the_clients_own_error():
    rng = np.random.default_rng(0)
    b = rng.uniform(9.0, 11.0, 64)
    s = 2.0 * b
    bare = speedup_look(s, b, 0.99)
    assert narrow_enough(bare, 0.02)  # no noise at all: the prompts alone say "stop"
    lag = LagRange(0.97, 1.03, lag_ms=5.0, window_ms=300.0)
    look = speedup_look(s, b, 0.99, lag)
    assert (look.ci_low, look.ci_high) == pytest.approx((bare.ci_low * 0.97, bare.ci_high * 1.03))
    assert look.lag_bound == pytest.approx(0.03) and look.halfwidth >= look.lag_bound / 2
    assert not narrow_enough(look, 0.02)


def test_the_warning_reads_for_a_bounded_and_an_unbounded_lag():
    bounded = lag_warning(1.0, 0.99, 1.01, LagRange(0.98, 1.02, lag_ms=2.0, window_ms=100.0)) or ""
    unbounded = lag_warning(1.0, 0.99, 1.01, LagRange(0.0, math.inf, lag_ms=120.0, window_ms=100.0)) or ""
    assert "can move the client-side speedup by up to 2.00%," in bounded
    assert "can move the client-side speedup without bound (a lag as long as a window)," in unbounded
    assert "by without" not in unbounded
