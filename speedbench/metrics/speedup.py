"""Speedups against the baseline arm: paired per-user TPS ratios with a bootstrap CI, and
SPEED-Bench's proxy speedup."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from speedbench.metrics.numbers import NAN, mean, pct, ratio
from speedbench.metrics.bootstrap import paired_ratio_ci, unpaired_ratio_ci

PAIR_KEYS = ["prompt_index", "turn", "repeat"]


def speedup(spec: pd.DataFrame, base: pd.DataFrame) -> dict[str, Any]:
    """Ratios of per-user TPS (spec / baseline) over ok requests, of the means and of
    the medians, with a 95% bootstrap CI of the mean ratio. The point estimate and its
    CI come from the same requests: the pairs (prompt_index, turn, repeat) both arms
    completed, when there are at least 2. ``speedup_mean_all`` is the ratio over every
    ok request of each arm, reported only when the two sets differ (a prompt lost to a
    timeout in one arm); it is not what the CI describes. With fewer than 2 pairs the
    estimate and an unpaired CI use all requests (speedup_pairs = 0)."""
    a, b = spec[np.isfinite(spec["per_user_tps"])], base[np.isfinite(base["per_user_tps"])]
    all_mean = ratio(mean(a["per_user_tps"]), mean(b["per_user_tps"]))
    out = {"speedup_mean": all_mean,
           "speedup_median": ratio(pct(a["per_user_tps"], 50), pct(b["per_user_tps"], 50)),
           "speedup_ci_low": NAN, "speedup_ci_high": NAN, "speedup_pairs": 0, "speedup_mean_all": NAN}
    if len(a) == 0 or len(b) == 0:
        return out
    pairs = a[PAIR_KEYS + ["per_user_tps"]].merge(b[PAIR_KEYS + ["per_user_tps"]], on=PAIR_KEYS, suffixes=("_s", "_b"))
    if len(pairs) >= 2:
        s_tps, b_tps = pairs["per_user_tps_s"].to_numpy(), pairs["per_user_tps_b"].to_numpy()
        lo, hi = paired_ratio_ci(s_tps, b_tps)
        out["speedup_pairs"] = len(pairs)
        out["speedup_mean"] = ratio(mean(s_tps), mean(b_tps))
        out["speedup_median"] = ratio(pct(s_tps, 50), pct(b_tps, 50))
        if len(pairs) != len(a) or len(pairs) != len(b):
            out["speedup_mean_all"] = all_mean
    else:
        lo, hi = unpaired_ratio_ci(a["per_user_tps"].to_numpy(), b["per_user_tps"].to_numpy())
    out["speedup_ci_low"], out["speedup_ci_high"] = lo, hi
    return out


def proxy_speedup(spec: pd.DataFrame, base: pd.DataFrame, al: float) -> float:
    """SPEED-Bench proxy S = t_ar * AL / t_sd. t_ar = baseline time per decode step =
    sum(decode_s) / sum(n_out - 1) (the step-weighted mean TPOT); t_sd = speculative
    time per verify step = sum(decode_s) / sum(num_spec_steps); decode_s = last token
    time - first token time. Over ok requests with at least one decode step."""
    b = base[(base["n_out"] >= 2) & np.isfinite(base["decode_s"])]
    s = spec[spec["has_spec"] & np.isfinite(spec["decode_s"])]
    if len(b) == 0 or len(s) == 0:
        return NAN
    t_ar = ratio(b["decode_s"].sum(), float((b["n_out"] - 1).sum()))
    t_sd = ratio(s["decode_s"].sum(), float(s["spec_steps"].sum()))
    return ratio(t_ar * al, t_sd)
