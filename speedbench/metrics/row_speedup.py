"""The summary row's speedup columns: paired per-user TPS ratios against the baseline arm
on both clocks, the headline read from one of them, the proxy, and the calibration's
prediction. Each field declares one metric with what it uses and its computation (``d``:
metrics/formulas.py's PointData, whose ``speedups`` block computes a point's ratios once)."""

from __future__ import annotations

from dataclasses import dataclass

from speedbench.metrics.declare import (ENGINE_CI, HEADLINE_CI, OK, PAIRS, PREDICTED_CI, SPEEDUP_CI, col)
from speedbench.metrics.row_point import Num

# what the headline's choice of clock reads (metrics/headline.py)
_CLOCKS = ("speedup_mean", "speedup_ci_low", "speedup_ci_high", "speedup_engine_mean", "speedup_engine_ci_low",
           "speedup_engine_ci_high", "speedup_lag_bound")


@dataclass(frozen=True)
class SpeedupColumns:
    """A summary row's speedup columns, after the point's own (metrics/registry.py's SummaryRow)."""

    speedup_mean: Num = col("ratio", "higher", "speedup",
        "`mean(per_user_tps of arm) / mean(per_user_tps of baseline)` over the **pairs** both arms completed: the "
        "same requests the CI describes", PAIRS, "speedup",
        uses=("per_user_tps", "pairing"), compute=lambda d: d.speedups["speedup_mean"])
    speedup_median: Num = col("ratio", "higher", "speedup (median)",
        "`median(arm) / median(baseline)` over the same pairs", PAIRS, "speedup",
        uses=("per_user_tps", "pairing"), compute=lambda d: d.speedups["speedup_median"])
    speedup_ci_low: Num = col("ratio", "", "speedup CI low", SPEEDUP_CI, PAIRS, "speedup",
        uses=("per_user_tps", "pairing", "stopped"), compute=lambda d: d.speedups["speedup_ci_low"])
    speedup_ci_high: Num = col("ratio", "", "speedup CI high", SPEEDUP_CI, PAIRS, "speedup",
        uses=("per_user_tps", "pairing", "stopped"), compute=lambda d: d.speedups["speedup_ci_high"])
    speedup_pairs: int = col("count", "", "pairs",
        "number of (prompt_index, turn, repeat) keys both arms completed. When ≥ 2 the bootstrap is **paired**: "
        "resampling draws pairs, which takes per-prompt difficulty out of the interval. Otherwise (0) each arm is "
        "resampled on its own and the point estimates use every ok request.", PAIRS,
        "speedup", uses=("prompt_index", "turn", "repeat", "pairing"), compute=lambda d: d.speedups["speedup_pairs"])
    speedup_mean_all: Num = col("ratio", "higher", "speedup (all requests)",
        "the mean ratio over every ok request of each arm; reported only when one arm completed a request the other "
        "did not (a prompt lost to a timeout in one arm), with a warning on the point. Bursts (undefined TPS) do not "
        "count as lost. NaN when the sets are the same.", OK, "speedup",
        uses=("per_user_tps", "pairing", "stopped"), compute=lambda d: d.speedups["speedup_mean_all"])
    speedup_by_repeat: list[float] = col("list of ratios", "", "speedup per repeat",
        "the mean ratio within each repeat, in repeat order: one value per round of server starts, null for a round "
        "with no pair with a defined TPS (on a busy host every request of a round can arrive in one read)", PAIRS,
        "speedup", uses=("per_user_tps", "repeat", "pairing"), compute=lambda d: d.speedups["speedup_by_repeat"])
    speedup_between_sd: Num = col("ratio", "lower", "between-server spread",
        "sample standard deviation (ddof 1) of the non-null `speedup_by_repeat`; NaN with fewer than 2. The "
        "between-server spread on its own.", PAIRS, "speedup",
        uses=("speedup_by_repeat",), compute=lambda d: d.speedups["speedup_between_sd"])
    speedup_lag_bound: Num = col("fraction", "lower", "client lag bound",
        "the most the client's event-loop lag can have moved the client-side speedup, relative, either way: "
        "`max(1 − f_low, f_high − 1)` of \"The client's own timing error\" below; the interval above is widened by "
        "it. `null` (NaN) when no record carries its lag (runs written before it existed), `null` (inf) when a lag "
        "was as long as a decode window", PAIRS, "speedup",
        uses=("lag_ms", "tps_lag_low", "tps_lag_high", "pairing"), compute=lambda d: d.speedups["speedup_lag_bound"])
    speedup_engine_mean: Num = col("ratio", "higher", "speedup (engine)",
        "`speedup_mean` computed from `engine_tps` instead of `per_user_tps`, over the pairs that have engine timing "
        "on both sides (bursts count here)", "pairs with engine timing", "speedup",
        uses=("engine_tps", "pairing"), compute=lambda d: d.speedups["speedup_engine_mean"])
    speedup_engine_ci_low: Num = col("ratio", "", "speedup (engine) CI low", ENGINE_CI, "pairs with engine timing",
        "speedup", uses=("engine_tps", "pairing", "stopped"), compute=lambda d: d.speedups["speedup_engine_ci_low"])
    speedup_engine_ci_high: Num = col("ratio", "", "speedup (engine) CI high", ENGINE_CI, "pairs with engine timing",
        "speedup", uses=("engine_tps", "pairing", "stopped"), compute=lambda d: d.speedups["speedup_engine_ci_high"])
    speedup_headline_clock: str = col("text", "", "headline clock",
        "which clock the headline speedup is read from: `engine` where the client-side interval is unbounded (a "
        "missing or infinite end, or a low end of 0), where the loop-lag bound (`speedup_lag_bound` > 0) widened it "
        "past the engine's, or where there is no client-side speedup; `client` otherwise; empty on the baseline's "
        "rows. Chosen when the row is built (metrics/headline.py); derived on read for run folders written before it "
        "existed", "the point", "speedup", uses=_CLOCKS, compute=lambda d: d.headline["speedup_headline_clock"])
    speedup_headline_reason: str = col("text", "", "headline reason",
        "why that clock leads, in words (reports print it beside the figure)", "the point",
        "speedup", uses=("speedup_headline_clock",), compute=lambda d: d.headline["speedup_headline_reason"])
    speedup_headline_mean: Num = col("ratio", "higher", "speedup (headline)",
        "`speedup_mean` or `speedup_engine_mean`, by `speedup_headline_clock`: the figure every report table, the "
        "dashboard's ★, `compare` and the `speedup` gate read", "that clock's pairs", "speedup",
        uses=("speedup_headline_clock",), compute=lambda d: d.headline["speedup_headline_mean"])
    speedup_headline_ci_low: Num = col("ratio", "", "speedup (headline) CI low", HEADLINE_CI, "that clock's pairs",
        "speedup", uses=("speedup_headline_clock",), compute=lambda d: d.headline["speedup_headline_ci_low"])
    speedup_headline_ci_high: Num = col("ratio", "", "speedup (headline) CI high", HEADLINE_CI, "that clock's pairs",
        "speedup", uses=("speedup_headline_clock",), compute=lambda d: d.headline["speedup_headline_ci_high"])
    proxy_speedup: Num = col("ratio", "higher", "proxy speedup",
        "SPEED-Bench proxy `S = t_ar · AL / t_sd`: `t_ar` = baseline time per decode step = `Σ decode_s / Σ (n - 1)` "
        "over baseline requests (step-weighted mean TPOT); `t_sd` = speculative time per verify step = "
        "`Σ decode_s / Σ num_spec_steps` over the arm's requests; `AL` = `al_tokens`. Bursts count on neither side "
        "(their client window is the delivery, not the decoding); null when either side has none left. Needs "
        "per-request spec metrics. When every step of both arms takes a fixed time, S equals the true speedup.", OK,
        "speedup", uses=("decode_s", "spec_steps", "al_tokens", "pairing"), compute=lambda d: d.proxy())
    speedup_predicted: Num = col("ratio", "higher", "speedup (predicted)",
        "the matching calibration's curve at the row's concurrency, at the row's `al_tokens`; NaN without a "
        "calibration (or a curve at that level)", "the calibration file", "prediction",
        uses=("al_tokens", "predict"), compute=lambda d: d.predicted[0])
    speedup_predicted_ci_low: Num = col("ratio", "", "speedup (predicted) CI low", PREDICTED_CI,
        "the calibration file", "prediction", uses=("al_tokens", "predict"), compute=lambda d: d.predicted[1])
    speedup_predicted_ci_high: Num = col("ratio", "", "speedup (predicted) CI high", PREDICTED_CI,
        "the calibration file", "prediction", uses=("al_tokens", "predict"), compute=lambda d: d.predicted[2])
