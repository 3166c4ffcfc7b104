"""The summary row's last columns: the client's own loop lag, the load of a rate point,
goodput against the scenario's SLOs, and the point's warnings. Each field declares one
metric with what it uses and its computation (``d``: metrics/formulas.py's PointData)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from speedbench.metrics.declare import ALL, OK, col
from speedbench.metrics.row_point import Num


@dataclass(frozen=True)
class NoteColumns:
    """A summary row's columns after its acceptance (metrics/registry.py's SummaryRow)."""

    # the client itself, and notes
    loop_lag_ms_max: Num = col("ms", "lower", "loop lag max",
        "worst overshoot of a 10 ms sleep on the client's event loop during the point (max over repeats). Large "
        "values mean the client, not the server, delayed timestamps.", "the point",
        uses=("point.loop_lag_ms_max",),
        compute=lambda d: d.point.loop_lag_ms_max if d.point.loop_lag_ms_max is not None else math.nan)
    # load (rate mode) and goodput
    request_rate: Num = col("req/s", "", "request rate",
        "the rate of the point's arrival schedule; `null` in closed loop", "the point", "rate",
        uses=("point.request_rate",), compute=lambda d: d.point.request_rate)
    burstiness: Num = col("", "", "burstiness", "the gamma shape of its gaps (1 = Poisson); `null` in closed loop",
        "the point", "rate", uses=("point.burstiness",), compute=lambda d: d.point.burstiness)
    goodput: Num = col("req/s", "higher", "goodput",
        "ok requests that meet every SLO in the scenario's `slo:` / `wall_s`; NaN without SLOs. A request meets "
        "`ttft_ms` when `ttft_ms ≤ SLO` (no token: never), `tpot_ms` when `tpot_ms ≤ SLO` (fewer than 2 tokens: "
        "TPOT 0, as vLLM), `e2el_ms` when `e2e_s × 1000 ≤ SLO`. Defined in both modes.", OK, "rate",
        uses=("ttft_ms", "tpot_ms", "e2e_s", "slo", "point.wall_s"), compute=lambda d: d.goodput["goodput"])
    goodput_share: Num = col("fraction", "higher", "within SLO", "those requests / `n_requests`", ALL, "rate",
        uses=("ttft_ms", "tpot_ms", "e2e_s", "slo"), compute=lambda d: d.goodput["goodput_share"])
    warnings: list[str] = col("list of text", "", "warnings",
        "what the point's figures need said next to them: counter resets, malformed spec metrics, truncated drafts, "
        "arms that completed different prompts", "the point",
        "acceptance", uses=("prom", "n_spec_malformed", "al_tokens", "spec_overcount_share",
                            "spec_overcount_gt_k_share", "tps_agree", "speedup_mean", "stopped"),
        compute=lambda d: d.warnings())
