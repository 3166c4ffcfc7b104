"""The summary row's columns about the point itself: identity and arm facts, status,
counts, throughput and the latency summary. Each field declares one metric: unit,
direction, label, formula text, what it is taken over, what it uses and its computation
(``d``: the point's data, metrics/formulas.py's PointData)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from speedbench.metrics.declare import ALL, OK, col

Num = float | None  # a number; None where summary.json stored NaN as null


@dataclass(frozen=True)
class PointColumns:
    """The first columns of a summary row (metrics/registry.py's SummaryRow)."""

    # identity and arm facts (no docs table row: they describe the point, they measure nothing)
    arm: str = col("", "", "arm", "arm name", section="identity", uses=("key",), compute=lambda d: d.key.arm)
    template: str = col("", "", "template", "sweep template name, or the arm's own name", section="identity",
        uses=("arm.template", "key"), compute=lambda d: d.arm.template or d.key.arm)
    series: str = col("", "", "series",
        "arms that differ only in k share it (a sweep's arm name without its k part); \"\" in run folders from "
        "before it was stored", section="identity", uses=("arm.series",), compute=lambda d: d.arm.series)
    concurrency: int = col("", "", "c", "closed-loop concurrency level", section="identity",
        uses=("key",), compute=lambda d: int(d.key.concurrency))
    variant: str = col("", "", "variant", "workload variant (\"\" without variants)", section="identity",
        uses=("key",), compute=lambda d: d.key.variant)
    # a rate point's label is not its workload: without a stored one it stays unknown (None)
    workload: str = col("", "", "workload",
        "the workload variant whose prompts the point sent: `variant` in a closed loop, the stored workload in rate "
        "mode (never read from the rate label; null where only the label is known)", section="identity",
        uses=("key", "point.request_rate"),
        compute=lambda d: d.key.workload if d.point.request_rate is None else d.key.stored_workload)
    speculative: bool = col("", "", "speculative", "the arm sets a speculative_config", section="identity",
        uses=("arm.speculative",), compute=lambda d: bool(d.arm.speculative))
    method: str = col("", "", "method", "speculative_config.method", section="identity",
        uses=("arm.method",), compute=lambda d: d.arm.method)
    num_speculative_tokens: int | None = col("", "", "k",
        "speculative_config.num_speculative_tokens", section="identity",
        uses=("arm.num_speculative_tokens",), compute=lambda d: d.arm.num_speculative_tokens)
    eagle_version: str = col("", "", "EAGLE", "\"3\", \"3.1\" or \"\" (from the draft's config)", section="identity",
        uses=("arm.eagle_version",), compute=lambda d: d.arm.eagle_version)
    # status, counts, throughput, latency summary
    status: str = col("", "", "status",
        "`ok`; `partial` (some errors); `failed` (no ok request, the server died, or the arm never started): the "
        "worst of the record-derived status and `PointInfo.status`; `ArmInfo.status` counts only for points without "
        "measured requests, so points an arm finished before it died keep their status", ALL,
        uses=("error", "point.status", "arm.status"), compute=lambda d: d.status["status"])
    failure: str | None = col("text", "", "failure",
        "the explicit failure message, else a count of error kinds (`\"2 of 40 requests failed: timeout x2\"`)", ALL,
        uses=("error", "point.failure", "arm.failure"), compute=lambda d: d.status["failure"])
    n_requests: int = col("count", "", "requests", "measured requests (warmup excluded)", ALL, uses=("error",),
        compute=lambda d: len(d.g))
    n_ok: int = col("count", "", "ok", "measured requests without an error", ALL, uses=("error",),
        compute=lambda d: len(d.ok))
    n_errors: int = col("count", "", "errors", "measured requests with an error", ALL, uses=("error",),
        compute=lambda d: len(d.g) - len(d.ok))
    error_rate: Num = col("fraction", "lower", "error rate", "`n_errors / n_requests`", ALL,
        uses=("n_errors", "n_requests"),
        compute=lambda d: d.row["n_errors"] / d.row["n_requests"] if d.row["n_requests"] else math.nan)
    per_user_tps_mean: Num = col("tokens/s", "higher", "per-user TPS", "mean of `per_user_tps`", OK,
        uses=("per_user_tps",), compute=lambda d: d.mean("per_user_tps"))
    per_user_tps_median: Num = col("tokens/s", "higher", "per-user TPS median", "median of `per_user_tps`", OK,
        uses=("per_user_tps",), compute=lambda d: d.pct("per_user_tps", 50))
    per_user_tps_p10: Num = col("tokens/s", "higher", "per-user TPS p10", "10th percentile of `per_user_tps`", OK,
        uses=("per_user_tps",), compute=lambda d: d.pct("per_user_tps", 10))
    per_user_tps_p90: Num = col("tokens/s", "higher", "per-user TPS p90", "90th percentile of `per_user_tps`", OK,
        uses=("per_user_tps",), compute=lambda d: d.pct("per_user_tps", 90))
    per_user_e2e_tps_mean: Num = col("tokens/s", "higher", "per-user E2E TPS", "mean of `per_user_e2e_tps`", OK,
        uses=("per_user_e2e_tps",), compute=lambda d: d.mean("per_user_e2e_tps"))
    per_user_tps_engine_mean: Num = col("tokens/s", "higher", "per-user TPS (engine)",
        "mean of `engine_tps` = `(n - 1) / generation_time_ms`, from the engine's own per-request timing "
        "(`--enable-per-request-metrics`); NaN without it. The second, independent source of per-user TPS (see "
        "\"Engine-side TPS and bursts\" below).", OK,
        uses=("engine_tps",), compute=lambda d: d.timing["per_user_tps_engine_mean"])
    tps_agree: bool | None = col("bool", "", "TPS agree",
        "`abs(client - engine) ≤ 5% · engine`, the means of `per_user_tps` and `engine_tps` over the ok requests "
        "that have both; None when either is missing. A false comes with a warning naming the likely cause.", OK,
        uses=("per_user_tps", "engine_tps"), compute=lambda d: d.timing["tps_agree"])
    n_burst: int = col("count", "lower", "bursts",
        "ok requests with at least 2 tokens that all arrived in one socket read, or (with engine timing) in a client "
        "window under half the engine's generation time: their client-side TPS is undefined (the server batched its "
        "output, or the client lagged). Never counted as a lost prompt.", OK, uses=("burst",),
        compute=lambda d: d.timing["n_burst"])
    output_tps: Num = col("tokens/s", "higher", "output TPS",
        "`sum(n over all measured requests) / wall_s`; `wall_s` = first send → last end, summed over repeats (from "
        "`PointInfo.wall_s`, else from the records). Errored streams' tokens count: the server produced them.", ALL,
        uses=("n_out", "point.wall_s"),
        compute=lambda d: float(d.g["n_out"].sum()) / d.wall if len(d.g) and d.wall > 0 else math.nan)
    ttft_ms_mean: Num = col("ms", "lower", "TTFT mean", "mean of `ttft_ms`", OK, uses=("ttft_ms",),
        compute=lambda d: d.mean("ttft_ms"))
    ttft_ms_median: Num = col("ms", "lower", "TTFT median", "median of `ttft_ms`", OK, uses=("ttft_ms",),
        compute=lambda d: d.pct("ttft_ms", 50))
    ttft_ms_p90: Num = col("ms", "lower", "TTFT p90", "90th percentile of `ttft_ms`", OK, uses=("ttft_ms",),
        compute=lambda d: d.pct("ttft_ms", 90))
    tpot_ms_mean: Num = col("ms", "lower", "TPOT mean", "mean of `tpot_ms`", OK, uses=("tpot_ms",),
        compute=lambda d: d.mean("tpot_ms"))
    tpot_ms_median: Num = col("ms", "lower", "TPOT median", "median of `tpot_ms`", OK, uses=("tpot_ms",),
        compute=lambda d: d.pct("tpot_ms", 50))
    itl_chunk_ms_median: Num = col("ms", "lower", "ITL per chunk median", "median of pooled inter-chunk gaps", OK,
        uses=("itl",), compute=lambda d: d.itl_median(0))
    itl_token_ms_median: Num = col("ms", "lower", "ITL per token median",
        "median of pooled per-token ITL (token-weighted)", OK, uses=("itl",), compute=lambda d: d.itl_median(1))
    e2e_s_mean: Num = col("s", "lower", "E2E mean", "mean of `e2e_s`", OK, uses=("e2e_s",),
        compute=lambda d: d.mean("e2e_s"))
