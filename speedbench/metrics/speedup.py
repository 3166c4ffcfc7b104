"""Speedups against the baseline arm: paired per-user TPS ratios with a bootstrap CI (from
the client's clock and from the engine's), the spread between server starts, and
SPEED-Bench's proxy speedup."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from speedbench.metrics.numbers import NAN, mean, pct, ratio
from speedbench.metrics.bootstrap import RoundSpread, cluster_paired_ratio_ci, unpaired_ratio_ci
from speedbench.metrics.lag import LagRange, lag_range, lag_warning
from speedbench.records import PointKey

PAIR_KEYS = ["prompt_index", "turn", "repeat"]


TPS_COLUMNS = {"speedup": "per_user_tps", "speedup_engine": "engine_tps"}  # key prefix -> TPS source
# request_table columns the client-side lag bound needs (metrics/lag.py); the engine's
# clock is not the client's, so the engine-side interval is never widened by it
LAG_COLUMNS = ("tps_lag_low", "tps_lag_high", "lag_ms", "decode_s")


def speedup(spec: pd.DataFrame, base: pd.DataFrame,
            spreads: dict[str, RoundSpread | None] | None = None, *, level: float = 0.95) -> dict[str, Any]:
    """Ratios of per-user TPS (spec / baseline) over ok requests, of the means and of
    the medians, with a 95% CI of the mean ratio. The point estimate and its CI come
    from the same requests: the pairs (prompt_index, turn, repeat) both arms completed
    with a defined TPS, when there are at least 2. Repeats are rounds of fresh server
    starts, so the CI resamples rounds and then prompts (a two-level bootstrap, see
    ``bootstrap.cluster_paired_ratio_ci``); ``speedup_by_repeat`` gives each round's own
    ratio and ``speedup_between_sd`` their spread. ``spreads`` (by key prefix, see
    ``TPS_COLUMNS``) gives the between-round spread pooled over the arm pair's points
    (:func:`pooled_round_spread`), which the CI then uses instead of this point's own.
    ``level``: the CIs' confidence level.

    ``speedup_mean_all`` is the ratio over every ok request of each arm, reported only
    when one arm completed a prompt the other did not (a timeout, an error); requests
    whose TPS is undefined (a burst: every token in one read) do not count as missing.
    With fewer than 2 pairs the estimate and an unpaired CI use all requests
    (speedup_pairs = 0). The same is computed from the engine's timing
    (``engine_tps``) into the ``speedup_engine_*`` keys.

    The client-side interval is widened by the client's own timing error (metrics/lag.py):
    ``speedup_lag_bound`` says by how much, and ``speedup_lag_warning`` (not a row key:
    the caller adds it to the row's warnings) is a warning when that is a visible part of
    the interval, else None."""
    spreads = spreads or {}
    out = _ratio_block(spec, base, "speedup", spreads.get("speedup"), level)
    eng = _ratio_block(spec, base, "speedup_engine", spreads.get("speedup_engine"), level)
    out.update({k: v for k, v in eng.items() if k in ENGINE_KEYS})
    ok_s, ok_b = set(_keys(spec)), set(_keys(base))
    out["speedup_mean_all"] = NAN
    if ok_s != ok_b and out["speedup_pairs"] >= 2:
        out["speedup_mean_all"] = ratio(mean(spec["per_user_tps"]), mean(base["per_user_tps"]))
    return out


ENGINE_KEYS = ("speedup_engine_mean", "speedup_engine_ci_low", "speedup_engine_ci_high")


def _keys(df: pd.DataFrame) -> list[tuple]:
    return [tuple(k) for k in df[PAIR_KEYS].itertuples(index=False)]


def round_ratios(spec: pd.DataFrame, base: pd.DataFrame, prefix: str) -> list[float]:
    """Each round's own speedup (ratio of mean TPS over the pairs of that round), in round
    order, from the TPS source of ``prefix``."""
    col = TPS_COLUMNS[prefix]
    return _by_round(_pairs(spec, base, col), col, _rounds(spec, base))


def _rounds(spec: pd.DataFrame, base: pd.DataFrame) -> list[int]:
    """The rounds either arm completed a request in, whatever their TPS."""
    return sorted({int(r) for df in (spec, base) for r in df["repeat"]})


def _by_round(pairs: pd.DataFrame, col: str, rounds: list[int]) -> list[float]:
    """One ratio per round in ``rounds``, NaN where the round has no pair with a defined TPS
    (on a busy host every request of a round can arrive as a burst): a round keeps its
    place, so the list's length is the number of rounds run."""
    by = {int(r): ratio(mean(g[f"{col}_s"]), mean(g[f"{col}_b"])) for r, g in pairs.groupby("repeat", sort=True)}
    return [by.get(r, NAN) for r in rounds]


def pooled_round_spread(by_point: Iterable[list[float]]) -> RoundSpread | None:
    """The between-round spread of the log speedup, pooled over points: the sum of each
    point's squared deviations from its own mean over the sum of their degrees of freedom
    (R - 1 per point). With 3 concurrencies of 3 rounds that is 6 degrees of freedom
    where one point alone has 2. It assumes the points of one arm pair share a spread,
    which the A/A arm measures directly. None when no point has 2 rounds."""
    ss, df = 0.0, 0
    for ratios in by_point:
        logs = np.log([v for v in ratios if np.isfinite(v) and v > 0])
        if len(logs) >= 2:
            ss += float(((logs - logs.mean()) ** 2).sum())
            df += len(logs) - 1
    return RoundSpread(float(np.sqrt(ss / df)), df) if df else None


def pooled_spreads(pairs: dict[PointKey, tuple[pd.DataFrame, pd.DataFrame]]
                   ) -> dict[tuple[str, str], dict[str, RoundSpread | None]]:
    """Per (arm, variant) and TPS source (``TPS_COLUMNS``): the between-round spread pooled
    over the arm's concurrencies (:func:`pooled_round_spread`), so each point's interval
    rests on all its rounds, not on its own 2 or 3. ``pairs``: (arm ok rows, baseline ok
    rows) per point."""
    by_arm: dict[tuple[str, str], list[PointKey]] = {}
    for k in pairs:
        by_arm.setdefault((k.arm, k.variant), []).append(k)
    return {arm: {prefix: pooled_round_spread(round_ratios(*pairs[k], prefix) for k in keys)
                  for prefix in TPS_COLUMNS}
            for arm, keys in by_arm.items()}


def _pairs(spec: pd.DataFrame, base: pd.DataFrame, col: str) -> pd.DataFrame:
    a, b = spec[np.isfinite(spec[col])], base[np.isfinite(base[col])]
    cols = PAIR_KEYS + [col] + _lag_columns(spec, base, col)
    return a[cols].merge(b[cols], on=PAIR_KEYS, suffixes=("_s", "_b"))


def _lag_columns(spec: pd.DataFrame, base: pd.DataFrame, col: str) -> list[str]:
    if col != TPS_COLUMNS["speedup"]:  # the client's lag moves the client's clock only
        return []
    return [c for c in LAG_COLUMNS if c in spec and c in base]


def _lag_side(df: pd.DataFrame, suffix: str) -> dict[str, np.ndarray] | None:
    """One arm's client-side columns for :func:`lag_range`; None without them (hand-made frames)."""
    names = {"tps": "per_user_tps", "low": "tps_lag_low", "high": "tps_lag_high", "lag_ms": "lag_ms",
             "decode_s": "decode_s"}
    if not all(f"{c}{suffix}" in df for c in names.values()):
        return None
    return {k: df[f"{c}{suffix}"].to_numpy(dtype=float) for k, c in names.items()}


def _client_lag(a: pd.DataFrame, b: pd.DataFrame, suffixes: tuple[str, str] = ("", "")) -> LagRange:
    """The client's lag range (metrics/lag.py) of the client-side ratio ``a / b``; ``suffixes``:
    the arms' column suffixes (a pairs frame holds both arms)."""
    sa, sb = _lag_side(a, suffixes[0]), _lag_side(b, suffixes[1])
    return lag_range(sa, sb) if sa is not None and sb is not None else LagRange()


def pairs_lag(pairs: pd.DataFrame) -> LagRange:
    """The client's lag range of the client-side speedup over ``pairs``: request-table rows
    of both arms merged on ``PAIR_KEYS`` (suffixes ``_s`` / ``_b``), each with a defined
    ``per_user_tps``."""
    return _client_lag(pairs, pairs, ("_s", "_b"))


def _ratio_block(spec: pd.DataFrame, base: pd.DataFrame, prefix: str, spread: RoundSpread | None,
                 level: float) -> dict[str, Any]:
    col = TPS_COLUMNS[prefix]
    a, b = spec[np.isfinite(spec[col])], base[np.isfinite(base[col])]
    out: dict[str, Any] = {f"{prefix}_mean": ratio(mean(a[col]), mean(b[col])),
                           f"{prefix}_median": ratio(pct(a[col], 50), pct(b[col], 50)),
                           f"{prefix}_ci_low": NAN, f"{prefix}_ci_high": NAN, f"{prefix}_pairs": 0,
                           f"{prefix}_by_repeat": [], f"{prefix}_between_sd": NAN}
    if prefix == "speedup":
        out.update({"speedup_lag_bound": NAN, "speedup_lag_warning": None})
    if len(a) == 0 or len(b) == 0:
        return out
    pairs = _pairs(spec, base, col)
    if len(pairs) >= 2:
        s_tps, b_tps = pairs[f"{col}_s"].to_numpy(), pairs[f"{col}_b"].to_numpy()
        lo, hi = cluster_paired_ratio_ci(s_tps, b_tps, pairs["repeat"].to_numpy(), spread=spread,
                                          level=level)
        out[f"{prefix}_pairs"] = len(pairs)
        out[f"{prefix}_mean"] = ratio(mean(s_tps), mean(b_tps))
        out[f"{prefix}_median"] = ratio(pct(s_tps, 50), pct(b_tps, 50))
        by = _by_round(pairs, col, _rounds(spec, base))
        out[f"{prefix}_by_repeat"] = by
        measured = [v for v in by if np.isfinite(v)]
        if len(measured) >= 2:
            out[f"{prefix}_between_sd"] = float(np.std(measured, ddof=1))
    else:
        lo, hi = unpaired_ratio_ci(a[col].to_numpy(), b[col].to_numpy(), level=level)
    if prefix == "speedup":  # the client's lag moves the client's clock only
        lag = pairs_lag(pairs) if len(pairs) >= 2 else _client_lag(a, b)
        out["speedup_lag_bound"] = lag.bound
        out["speedup_lag_warning"] = lag_warning(out["speedup_mean"], lo, hi, lag)
        lo, hi = lag.widen(lo, hi)
    out[f"{prefix}_ci_low"], out[f"{prefix}_ci_high"] = lo, hi
    return out


def proxy_speedup(spec: pd.DataFrame, base: pd.DataFrame, al: float) -> float:
    """SPEED-Bench proxy S = t_ar * AL / t_sd. t_ar = baseline time per decode step =
    sum(decode_s) / sum(n_out - 1) (the step-weighted mean TPOT); t_sd = speculative
    time per verify step = sum(decode_s) / sum(num_spec_steps); decode_s = last token
    time - first token time. Over ok requests with at least one decode step, bursts
    left out on both sides: their client window is the delivery, not the decoding (an
    all-burst baseline has a window of 0 s, which would read as a proxy of 0)."""
    b = base[(base["n_out"] >= 2) & ~base["burst"] & np.isfinite(base["decode_s"])]
    s = spec[spec["has_spec"] & ~spec["burst"] & np.isfinite(spec["decode_s"])]
    if len(b) == 0 or len(s) == 0:
        return NAN
    t_ar = ratio(b["decode_s"].sum(), float((b["n_out"] - 1).sum()))
    t_sd = ratio(s["decode_s"].sum(), float(s["spec_steps"].sum()))
    return ratio(t_ar * al, t_sd)
