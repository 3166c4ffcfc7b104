"""Pure functions: request records -> per-request table -> summary rows.

Nothing here does I/O or reads a clock. Every metric is defined in docs/metrics.md
(name, unit, direction, formula); this module is the executable version.

Inputs of :func:`summarize`:

* ``records``: ``RequestRecord`` list of the whole run (warmup records are dropped here).
* ``prom_deltas``: ``{(arm, concurrency, variant): SpecCounters}``, the Prometheus
  counter deltas around each point (summed over repeats; ideally scraped after warmup).
* ``baseline_arm``: the arm speedups divide by (None: no speedups).
* ``arm_info``: ``{arm: ArmInfo}`` (plain dicts with the same keys are accepted).
* ``points``: ``{(arm, concurrency, variant): PointInfo}`` (dicts accepted), one per
  point that was attempted, including points of arms that never started (so failed
  points still get a row). ``PointInfo.from_results([PointResult, ...])`` folds the
  repeats of one point. Without a PointInfo, wall time comes from the records and the
  status from the error count.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from speedbench.metric_registry import LATENCY_METRICS, ROW_KEYS
from speedbench.records import PointKey, RequestRecord
from speedbench.scrape import SpecCounters
from speedbench.stats import paired_ratio_ci, unpaired_ratio_ci

NAN = math.nan
PAIR_KEYS = ["prompt_index", "turn", "repeat"]
AL_AGREE_TOLERANCE = 0.01  # relative
_STATUS_ORDER = {"ok": 0, "partial": 1, "failed": 2}

# The fixed row keys and the latency families are declared in metric_registry.py.
CATEGORY_KEYS = ("arm", "concurrency", "variant", "category", "n_ok", "per_user_tps_mean",
                 "speedup_mean", "speedup_ci_low", "speedup_ci_high", "speedup_pairs",
                 "al_tokens", "al_requests")
# One row per (arm, concurrency, variant, prompt_id): what a regression traces back to.
PROMPT_KEYS = ("arm", "concurrency", "variant", "prompt_id", "category", "n_ok", "per_user_tps",
               "baseline_per_user_tps", "speedup", "al_requests")

# What each acceptance length means; reports, gates and docs use these labels.
AL_LABELS = {
    "al_tokens": "AL pooled over steps (1 + Σaccepted / Σsteps, per-request counters)",
    "al_requests": "AL mean over requests (SPEED-Bench's per-category definition)",
    "al_prometheus": "AL pooled over steps (Prometheus counter deltas; vLLM bench serve's definition)",
}

# Latency distributions: for each of LATENCY_METRICS, `<name>_mean`, `<name>_std` and
# `<name>_p<P>` for every chosen percentile P (90 -> p90, 99.9 -> p99_9). Rows keep the
# fixed ROW_KEYS first; `row_keys(percentiles)` appends these (skipping ones already there).
DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0)


def percentile_tag(p: float) -> str:
    """90 -> 'p90', 99.9 -> 'p99_9' (a dot would not survive as a column or gate name)."""
    text = f"{float(p):g}"
    return "p" + text.replace(".", "_")


def latency_keys(percentiles: Iterable[float] = DEFAULT_PERCENTILES) -> tuple[str, ...]:
    tags = [percentile_tag(p) for p in percentiles]
    return tuple(f"{m}_{s}" for m in LATENCY_METRICS for s in ("mean", "std", *tags))


def row_keys(percentiles: Iterable[float] = DEFAULT_PERCENTILES) -> tuple[str, ...]:
    """Every key of a summary row for these percentiles: ROW_KEYS, then the latency block."""
    return ROW_KEYS + tuple(k for k in latency_keys(percentiles) if k not in ROW_KEYS)


@dataclass
class ArmInfo:
    template: str = ""  # sweep template name; "" = the arm's own name
    speculative: bool = False
    method: str = ""
    num_speculative_tokens: int | None = None
    eagle_version: str = ""  # "3", "3.1" or ""
    status: str = "ok"  # "failed" when the arm died or never started (applies to points without records)
    failure: str | None = None

    @classmethod
    def from_arm(cls, arm: Any, *, eagle_version: str = "", status: str = "ok", failure: str | None = None) -> ArmInfo:
        """From a ``scenario.ArmSpec``."""
        sc = arm.speculative_config  # scenario.SpeculativeConfig or None
        return cls(arm.template or arm.name, sc is not None, sc.method if sc else "",
                   sc.k if sc else None, eagle_version, status, failure)


@dataclass
class PointInfo:
    wall_s: float | None = None  # summed over repeats; None = derive from records
    loop_lag_ms_max: float | None = None
    status: str | None = None  # None = derive from records; "failed" when the server died
    failure: str | None = None
    request_rate: float | None = None  # rate mode: requests/s of the arrival schedule; None = closed loop
    burstiness: float | None = None

    @classmethod
    def from_results(cls, results: Iterable[Any]) -> PointInfo:
        """Fold the ``runner.PointResult`` of every repeat of one point."""
        info = cls(wall_s=0.0, loop_lag_ms_max=0.0)
        for r in results:
            info.wall_s += r.wall_s
            info.loop_lag_ms_max = max(info.loop_lag_ms_max, r.loop_lag_ms.get("max", 0.0))
            if r.aborted:
                info.status, info.failure = "failed", r.aborted
        return info


def _coerce(cls: type, v: Any) -> Any:
    if v is None or isinstance(v, cls):
        return v or cls()
    return cls(**{f.name: v[f.name] for f in fields(cls) if f.name in v})


# ---- per request ---------------------------------------------------------------------

_COLUMNS = [
    "arm", "concurrency", "variant", "repeat", "prompt_index", "prompt_id", "turn", "category", "warmup",
    "error", "ok", "n_out", "n_chunks", "ttft_ms", "e2e_s", "decode_s", "tpot_ms", "per_user_tps",
    "per_user_e2e_tps", "queue_wait_ms", "t_sent_ns", "t_end_ns", "spec_steps", "spec_accepted",
    "spec_draft_tokens", "spec_hist", "has_spec", "spec_malformed", "spec_overcount",
]


def request_table(records: Iterable[RequestRecord]) -> pd.DataFrame:
    """One row per record. Times: ttft_ms, tpot_ms, queue_wait_ms in ms; e2e_s, decode_s
    in s. NaN where undefined (no token; fewer than 2 tokens; all tokens in one chunk)."""
    rows = []
    for r in records:
        n = r.n_output
        first = r.chunk_ns[0] if r.chunk_ns else None
        last = r.chunk_ns[-1] if r.chunk_ns else None
        decode_ns = (last - first) if first is not None else 0
        timed = n >= 2 and decode_ns > 0  # (n-1)/(t_last-t_first) needs both
        e2e = (r.t_end_ns - r.t_sent_ns) / 1e9 if r.t_end_ns and r.t_sent_ns else NAN
        sp = r.spec
        rows.append({
            "arm": r.arm, "concurrency": r.concurrency, "variant": r.variant, "repeat": r.repeat,
            "prompt_index": r.prompt_index, "prompt_id": r.prompt_id, "turn": r.turn,
            "category": r.category, "warmup": r.warmup, "error": r.error, "ok": r.error is None,
            "n_out": n, "n_chunks": len(r.chunk_ns),
            "ttft_ms": (first - r.t_sent_ns) / 1e6 if first is not None else NAN,
            "e2e_s": e2e,
            "decode_s": decode_ns / 1e9 if first is not None else NAN,
            "tpot_ms": decode_ns / (n - 1) / 1e6 if timed else NAN,
            "per_user_tps": (n - 1) / (decode_ns / 1e9) if timed else NAN,
            "per_user_e2e_tps": n / e2e if e2e and e2e > 0 else NAN,
            "queue_wait_ms": (r.t_sent_ns - r.t_queued_ns) / 1e6 if r.t_queued_ns else NAN,
            "t_sent_ns": r.t_sent_ns, "t_end_ns": r.t_end_ns,
            "spec_steps": sp.num_spec_steps if sp else 0,
            "spec_accepted": sp.num_accepted_tokens if sp else 0,
            "spec_draft_tokens": sp.num_draft_tokens if sp else 0,
            "spec_hist": list(sp.acceptance_histogram) if sp else [],
            "has_spec": sp is not None and sp.num_spec_steps > 0,
            "spec_malformed": r.spec_error is not None,
            # Tokens the server's counters imply (the prefill token, then 1 + accepted
            # per step) minus the tokens delivered: > 0 when EOS or max_tokens cut a
            # step inside its accepted drafts, which vLLM still counts as accepted.
            "spec_overcount": (1 + sp.num_spec_steps + sp.num_accepted_tokens - n)
            if sp is not None and sp.num_spec_steps > 0 and r.output_tokens is not None else 0,
        })
    return pd.DataFrame(rows, columns=_COLUMNS)


def itl_values(records: Iterable[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Pooled inter-token latencies in ms. Inter-chunk: every gap between consecutive
    token chunks. Per-token: each gap divided by the tokens of the later chunk and
    counted once per such token (token-weighted), so a 3-token chunk after 30 ms gives
    three 10 ms values."""
    chunk: list[np.ndarray] = []
    token: list[np.ndarray] = []
    for r in records:
        if len(r.chunk_ns) < 2:
            continue
        gaps = np.diff(np.asarray(r.chunk_ns, dtype=np.int64)) / 1e6
        n = np.asarray(r.chunk_tokens[1:], dtype=np.int64)
        chunk.append(gaps)
        token.append(np.repeat(gaps / np.maximum(n, 1), np.maximum(n, 1)))
    cat = lambda xs: np.concatenate(xs) if xs else np.empty(0)
    return cat(chunk), cat(token)


# ---- small helpers ---------------------------------------------------------------------


def _arr(s: Any) -> np.ndarray:
    a = np.asarray(s, dtype=float)
    return a[np.isfinite(a)]


def _mean(s: Any) -> float:
    a = _arr(s)
    return float(a.mean()) if len(a) else NAN


def _pct(s: Any, q: float) -> float:
    a = _arr(s)
    return float(np.percentile(a, q)) if len(a) else NAN


def _std(s: Any) -> float:
    # Population std (ddof=0), as `vllm bench serve` reports std_*_ms.
    a = _arr(s)
    return float(a.std()) if len(a) else NAN


def latency_stats(ok: pd.DataFrame, itl: tuple[np.ndarray, np.ndarray],
                  percentiles: Iterable[float] = DEFAULT_PERCENTILES) -> dict[str, float]:
    """Mean, std and percentiles of each LATENCY_METRICS over ok requests (ms).

    TTFT, TPOT and E2E are per request; ITL values are pooled over all requests' gaps
    (per token: token-weighted, see :func:`itl_values`; per chunk: one per gap).
    """
    has = len(ok) > 0
    values = {
        "ttft_ms": ok["ttft_ms"] if has else [],
        "tpot_ms": ok["tpot_ms"] if has else [],
        "itl_token_ms": itl[1],
        "itl_chunk_ms": itl[0],
        "e2e_ms": ok["e2e_s"] * 1000.0 if has else [],
    }
    out: dict[str, float] = {}
    for name, v in values.items():
        a = _arr(v)
        out[f"{name}_mean"] = _mean(a)
        out[f"{name}_std"] = _std(a)
        for p in percentiles:
            out[f"{name}_{percentile_tag(p)}"] = _pct(a, p)
    return out


def _ratio(a: float, b: float) -> float:
    return a / b if b and math.isfinite(a) and math.isfinite(b) else NAN


# ---- acceptance ------------------------------------------------------------------------


def al_from_counters(c: SpecCounters | None) -> float:
    """AL = 1 + accepted / drafts from Prometheus counter deltas."""
    return 1.0 + c.accepted / c.drafts if c is not None and c.drafts > 0 else NAN


def sum_histograms(hists: Iterable[list[int]]) -> list[int]:
    out: list[int] = []
    for h in hists:
        if len(h) > len(out):
            out += [0] * (len(h) - len(out))
        for j, v in enumerate(h):
            out[j] += int(v)
    return out


def per_position_rates(c: SpecCounters | None, hist: list[int]) -> tuple[list[float], list[float]]:
    """Joint rate[i] = accepted_at_pos[i] / drafts (P(at least i+1 accepted)); conditional
    rate[i] = accepted_at_pos[i] / accepted_at_pos[i-1] (i = 0: / drafts). From counter
    deltas when present, else from the summed histogram (accepted_at_pos[i] =
    sum(h[i+1:]); exact when every step drafts k tokens)."""
    if c is not None and c.drafts > 0 and c.per_position:
        drafts, at = c.drafts, list(c.per_position)
    elif hist and sum(hist) > 0:
        drafts, at = float(sum(hist)), [float(sum(hist[i + 1:])) for i in range(len(hist) - 1)]
    else:
        return [], []
    joint = [a / drafts for a in at]
    cond = [_ratio(a, prev) for a, prev in zip(at, [drafts] + at[:-1])]
    return joint, cond


def acceptance(df: pd.DataFrame) -> dict[str, Any]:
    """Token-weighted AL = 1 + sum(accepted)/sum(steps); request-weighted AL = mean over
    requests of 1 + accepted/steps. Only requests that reported spec stats count."""
    s = df[df["has_spec"]] if len(df) else df
    if len(s) == 0:
        return {"al_tokens": NAN, "al_requests": NAN, "draft_acceptance_rate": NAN, "hist": []}
    steps, acc, drafts = s["spec_steps"].sum(), s["spec_accepted"].sum(), s["spec_draft_tokens"].sum()
    return {
        "al_tokens": 1.0 + acc / steps,
        "al_requests": float((1.0 + s["spec_accepted"] / s["spec_steps"]).mean()),
        "draft_acceptance_rate": acc / drafts if drafts else NAN,
        "hist": sum_histograms(s["spec_hist"]),
    }


# ---- speedups --------------------------------------------------------------------------


def speedup(spec: pd.DataFrame, base: pd.DataFrame) -> dict[str, Any]:
    """Ratios of per-user TPS (spec / baseline) over ok requests, of the means and of
    the medians, with a 95% bootstrap CI of the mean ratio. The point estimate and its
    CI come from the same requests: the pairs (prompt_index, turn, repeat) both arms
    completed, when there are at least 2. ``speedup_mean_all`` is the ratio over every
    ok request of each arm, reported only when the two sets differ (a prompt lost to a
    timeout in one arm); it is not what the CI describes. With fewer than 2 pairs the
    estimate and an unpaired CI use all requests (speedup_pairs = 0)."""
    a, b = spec[np.isfinite(spec["per_user_tps"])], base[np.isfinite(base["per_user_tps"])]
    all_mean = _ratio(_mean(a["per_user_tps"]), _mean(b["per_user_tps"]))
    out = {"speedup_mean": all_mean,
           "speedup_median": _ratio(_pct(a["per_user_tps"], 50), _pct(b["per_user_tps"], 50)),
           "speedup_ci_low": NAN, "speedup_ci_high": NAN, "speedup_pairs": 0, "speedup_mean_all": NAN}
    if len(a) == 0 or len(b) == 0:
        return out
    pairs = a[PAIR_KEYS + ["per_user_tps"]].merge(b[PAIR_KEYS + ["per_user_tps"]], on=PAIR_KEYS, suffixes=("_s", "_b"))
    if len(pairs) >= 2:
        s_tps, b_tps = pairs["per_user_tps_s"].to_numpy(), pairs["per_user_tps_b"].to_numpy()
        lo, hi = paired_ratio_ci(s_tps, b_tps)
        out["speedup_pairs"] = len(pairs)
        out["speedup_mean"] = _ratio(_mean(s_tps), _mean(b_tps))
        out["speedup_median"] = _ratio(_pct(s_tps, 50), _pct(b_tps, 50))
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
    t_ar = _ratio(b["decode_s"].sum(), float((b["n_out"] - 1).sum()))
    t_sd = _ratio(s["decode_s"].sum(), float(s["spec_steps"].sum()))
    return _ratio(t_ar * al, t_sd)


# ---- goodput ---------------------------------------------------------------------------

SLO_KEYS = ("ttft_ms", "tpot_ms", "e2el_ms")


def good_requests(ok: pd.DataFrame, slo: dict[str, Any] | None) -> int | None:
    """Ok requests that meet every SLO given (ms): ``ttft_ms``, ``tpot_ms`` (a request
    with fewer than 2 tokens has TPOT 0 here, as in vLLM's goodput), ``e2el_ms``
    (end-to-end). None when no SLO is given."""
    slo = {k: v for k, v in (slo or {}).items() if k in SLO_KEYS and v is not None}
    if not slo:
        return None
    if len(ok) == 0:
        return 0
    good = np.ones(len(ok), dtype=bool)
    if "ttft_ms" in slo:
        good &= (ok["ttft_ms"] <= slo["ttft_ms"]).to_numpy()  # NaN (no token) is never good
    if "tpot_ms" in slo:
        good &= (ok["tpot_ms"].fillna(0.0) <= slo["tpot_ms"]).to_numpy()
    if "e2el_ms" in slo:
        good &= (ok["e2e_s"] * 1000.0 <= slo["e2el_ms"]).to_numpy()
    return int(good.sum())


# ---- summary rows ----------------------------------------------------------------------


def _wall_from_records(g: pd.DataFrame) -> float:
    total = 0.0
    for _, rep in g.groupby("repeat"):
        sent = rep["t_sent_ns"][rep["t_sent_ns"] > 0]
        ends = rep["t_end_ns"][rep["t_end_ns"] > 0]
        if len(sent) and len(ends):
            total += (ends.max() - sent.min()) / 1e9
    return total


def _status(g: pd.DataFrame, arm: ArmInfo, point: PointInfo) -> tuple[str, str | None]:
    """Worst of the record-derived status and PointInfo.status. The arm's own status
    only speaks for points without measured requests (an arm that never started, or
    points after it died): points it measured before dying keep their data's status."""
    n_err = int((~g["ok"]).sum()) if len(g) else 0
    derived = "failed" if len(g) == 0 or n_err == len(g) else ("partial" if n_err else "ok")
    candidates = [derived, point.status or "ok"] + ([arm.status or "ok"] if len(g) == 0 else [])
    status = max(candidates, key=lambda s: _STATUS_ORDER.get(s, 2))
    failure = point.failure or (arm.failure if len(g) == 0 else None)
    if failure is None and n_err:
        kinds = Counter(g.loc[~g["ok"], "error"])
        failure = f"{n_err} of {len(g)} requests failed: " + ", ".join(f"{k} x{v}" for k, v in kinds.most_common())
    if failure is None and len(g) == 0:
        failure = "no measured requests"
    return status, failure


def _overcount(ok: pd.DataFrame, k: Any) -> dict[str, Any]:
    """Share of spec requests whose counters imply more tokens than were delivered, and
    share where the excess exceeds k (one step's drafts, the most a single cut step
    can explain); ``al_delivered`` is the pooled AL with those tokens taken out. A
    negative difference is no error: decode steps that drafted nothing (n-gram lookup
    without a match) deliver a token but are no spec step, so they are ignored here."""
    s = ok[ok["has_spec"]] if len(ok) else ok
    if len(s) == 0:
        return {"spec_overcount_share": NAN, "spec_overcount_gt_k_share": NAN, "al_delivered": NAN}
    excess = np.maximum(s["spec_overcount"].to_numpy(), 0)
    kk = int(k) if isinstance(k, (int, float)) and k and k > 0 else 0
    steps = float(s["spec_steps"].sum())
    return {"spec_overcount_share": float((excess > 0).mean()),
            "spec_overcount_gt_k_share": float((excess > kk).mean()) if kk else NAN,
            "al_delivered": 1.0 + (float(s["spec_accepted"].sum()) - float(excess.sum())) / steps if steps else NAN}


def _point_row(key: PointKey, g: pd.DataFrame, itl: tuple[np.ndarray, np.ndarray], arm: ArmInfo,
               point: PointInfo, prom: SpecCounters | None,
               percentiles: Iterable[float] = DEFAULT_PERCENTILES, slo: dict[str, Any] | None = None) -> dict[str, Any]:
    name, conc, variant = key
    ok = g[g["ok"]] if len(g) else g
    n, n_ok = len(g), len(ok)
    status, failure = _status(g, arm, point)
    wall = point.wall_s if point.wall_s else (_wall_from_records(g) if n else 0.0)
    acc = acceptance(ok)
    al_prom = al_from_counters(prom)
    rate = acc["draft_acceptance_rate"]
    if not math.isfinite(rate) and prom is not None and prom.draft_tokens > 0:
        rate = prom.accepted / prom.draft_tokens
    joint, cond = per_position_rates(prom, acc["hist"])
    agree = None
    if math.isfinite(acc["al_tokens"]) and math.isfinite(al_prom):
        agree = bool(abs(acc["al_tokens"] - al_prom) <= AL_AGREE_TOLERANCE * al_prom)
    col = lambda c: ok[c] if n_ok else []
    overcount = _overcount(ok, arm.num_speculative_tokens)
    warnings = list(prom.warnings) if prom is not None else []
    n_bad = int(ok["spec_malformed"].sum()) if n_ok else 0
    if n_bad:
        warnings.append(f"{n_bad} of {n_ok} requests had malformed per-request spec metrics; "
                        "they count for timing but not for the per-request AL")
    al_delivered = overcount.pop("al_delivered")
    if overcount["spec_overcount_share"] > 0:
        warnings.append(f"{overcount['spec_overcount_share']:.0%} of requests stopped inside a step's accepted "
                        "drafts (EOS or max_tokens); vLLM still counts those drafts as accepted, so the AL from "
                        f"counters reads {acc['al_tokens']:.3f} where the delivered tokens give {al_delivered:.3f}")
    if overcount["spec_overcount_gt_k_share"] > 0:
        warnings.append(f"{overcount['spec_overcount_gt_k_share']:.0%} of requests report more accepted tokens "
                        "than EOS/max_tokens truncation of one step explains")
    n_good = good_requests(ok, slo)
    # the latency block first, so the fixed keys below keep their own definitions
    return {**latency_stats(ok, itl, percentiles),
        "arm": name, "template": arm.template or name, "concurrency": int(conc), "variant": variant,
        "speculative": bool(arm.speculative), "method": arm.method,
        "num_speculative_tokens": arm.num_speculative_tokens, "eagle_version": arm.eagle_version,
        "status": status, "failure": failure,
        "n_requests": n, "n_ok": n_ok, "n_errors": n - n_ok, "error_rate": (n - n_ok) / n if n else NAN,
        "per_user_tps_mean": _mean(col("per_user_tps")), "per_user_tps_median": _pct(col("per_user_tps"), 50),
        "per_user_tps_p10": _pct(col("per_user_tps"), 10), "per_user_tps_p90": _pct(col("per_user_tps"), 90),
        "per_user_e2e_tps_mean": _mean(col("per_user_e2e_tps")),
        "output_tps": float(g["n_out"].sum()) / wall if n and wall > 0 else NAN,
        "ttft_ms_mean": _mean(col("ttft_ms")), "ttft_ms_median": _pct(col("ttft_ms"), 50),
        "ttft_ms_p90": _pct(col("ttft_ms"), 90),
        "tpot_ms_mean": _mean(col("tpot_ms")), "tpot_ms_median": _pct(col("tpot_ms"), 50),
        "itl_chunk_ms_median": _pct(itl[0], 50), "itl_token_ms_median": _pct(itl[1], 50),
        "e2e_s_mean": _mean(col("e2e_s")),
        "speedup_mean": NAN, "speedup_median": NAN, "speedup_ci_low": NAN, "speedup_ci_high": NAN, "speedup_pairs": 0,
        "speedup_mean_all": NAN, "proxy_speedup": NAN,
        "al_tokens": acc["al_tokens"], "al_requests": acc["al_requests"], "al_prometheus": al_prom, "al_agree": agree,
        "draft_acceptance_rate": rate, "n_spec_malformed": n_bad,
        "acceptance_histogram": acc["hist"], "per_position_joint": joint, "per_position_conditional": cond,
        **overcount,
        "loop_lag_ms_max": point.loop_lag_ms_max if point.loop_lag_ms_max is not None else NAN,
        "request_rate": point.request_rate, "burstiness": point.burstiness,
        "goodput": n_good / wall if n_good is not None and wall > 0 else NAN,
        "goodput_share": n_good / n if n_good is not None and n else NAN,
        "warnings": warnings,
    }


def summarize(
    records: Iterable[RequestRecord],
    prom_deltas: dict[PointKey, SpecCounters] | None,
    baseline_arm: str | None,
    arm_info: dict[str, Any],
    points: dict[PointKey, Any] | None = None,
    percentiles: Iterable[float] = DEFAULT_PERCENTILES,
    slo: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One row per (arm, concurrency, variant) with exactly ``row_keys(percentiles)``.
    ``slo``: goodput thresholds in ms (``ttft_ms``, ``tpot_ms``, ``e2el_ms``)."""
    percentiles = tuple(percentiles)
    measured = [r for r in records if not r.warmup]
    df = request_table(measured)
    by_key = {(a, int(c), v): g for (a, c, v), g in df.groupby(["arm", "concurrency", "variant"], sort=False)}
    recs_by_key: dict[PointKey, list[RequestRecord]] = {}
    for r in measured:
        if r.error is None:
            recs_by_key.setdefault((r.arm, r.concurrency, r.variant), []).append(r)
    points = points or {}
    prom_deltas = prom_deltas or {}
    keys = list(dict.fromkeys([*by_key, *((a, int(c), v) for a, c, v in points)]))
    arm_order = {a: i for i, a in enumerate(arm_info)}
    keys.sort(key=lambda k: (arm_order.get(k[0], len(arm_order)), k[0], k[1]))
    groups = {k: by_key.get(k, df.iloc[0:0]) for k in keys}
    rows = {}
    for k in keys:
        arm = _coerce(ArmInfo, arm_info.get(k[0]))
        rows[k] = _point_row(k, groups[k], itl_values(recs_by_key.get(k, [])), arm,
                             _coerce(PointInfo, points.get(k)), prom_deltas.get(k), percentiles, slo)
    if baseline_arm is not None:
        for k, row in rows.items():
            bk = (baseline_arm, k[1], k[2])
            if k[0] == baseline_arm or bk not in rows or len(groups[k]) == 0 or len(groups[bk]) == 0:
                continue
            s_ok, b_ok = groups[k][groups[k]["ok"]], groups[bk][groups[bk]["ok"]]
            row.update(speedup(s_ok, b_ok))
            if math.isfinite(row["speedup_mean_all"]):
                row["warnings"] = row["warnings"] + [
                    f"the arms completed different prompts: speedup {row['speedup_mean']:.3f}x over the "
                    f"{row['speedup_pairs']} prompts both completed (the CI's set), {row['speedup_mean_all']:.3f}x "
                    "over all completed requests"]
            if math.isfinite(row["al_tokens"]):
                row["proxy_speedup"] = proxy_speedup(s_ok, b_ok, row["al_tokens"])
    keys_out = row_keys(percentiles)
    return [{key: _plain(rows[k][key]) for key in keys_out} for k in keys]


def category_rows(records: Iterable[RequestRecord], baseline_arm: str | None = None) -> list[dict[str, Any]]:
    """Per (arm, concurrency, variant, category) over ok measured requests: per-user TPS,
    the speedup against the baseline arm's requests of the same category at the same
    concurrency and variant (paired as :func:`speedup`, with its bootstrap CI), and AL
    pooled over steps (``al_tokens``) and as the mean over requests (``al_requests``)."""
    df = request_table([r for r in records if not r.warmup and r.error is None])
    groups = {(a, int(c), v, cat): g
              for (a, c, v, cat), g in df.groupby(["arm", "concurrency", "variant", "category"], sort=False)}
    out = []
    for (arm, conc, variant, cat), g in groups.items():
        acc = acceptance(g)
        row = {"arm": arm, "concurrency": conc, "variant": variant, "category": cat, "n_ok": len(g),
               "per_user_tps_mean": _mean(g["per_user_tps"]),
               "speedup_mean": NAN, "speedup_ci_low": NAN, "speedup_ci_high": NAN, "speedup_pairs": 0,
               "al_tokens": acc["al_tokens"], "al_requests": acc["al_requests"]}
        base = groups.get((baseline_arm, conc, variant, cat))
        if baseline_arm is not None and arm != baseline_arm and base is not None:
            sp = speedup(g, base)
            row.update({k: sp[k] for k in ("speedup_mean", "speedup_ci_low", "speedup_ci_high", "speedup_pairs")})
        out.append({k: _plain(row[k]) for k in CATEGORY_KEYS})
    return out


def prompt_rows(records: Iterable[RequestRecord], baseline_arm: str | None = None) -> list[dict[str, Any]]:
    """Per (arm, concurrency, variant, prompt_id) over ok measured requests (every turn
    and repeat of the prompt): mean per-user TPS, the baseline's mean for the same prompt
    at the same point, their ratio, and the mean over requests of the request AL."""
    df = request_table([r for r in records if not r.warmup and r.error is None])
    if len(df) == 0:
        return []
    df = df.assign(al_req=np.where(df["has_spec"], 1.0 + df["spec_accepted"] / df["spec_steps"].where(
        df["spec_steps"] > 0), NAN))
    keys = ["arm", "concurrency", "variant", "prompt_id"]
    agg = {}
    for (arm, conc, variant, pid), g in df.groupby(keys, sort=False):
        agg[(arm, int(conc), variant, pid)] = (str(g["category"].iloc[0]), len(g), _mean(g["per_user_tps"]),
                                               _mean(g["al_req"]))
    out = []
    for (arm, conc, variant, pid), (cat, n, tps, al) in agg.items():
        base = agg.get((baseline_arm, conc, variant, pid)) if baseline_arm is not None and arm != baseline_arm else None
        b_tps = base[2] if base else NAN
        out.append({"arm": arm, "concurrency": conc, "variant": variant, "prompt_id": pid, "category": cat,
                    "n_ok": n, "per_user_tps": tps, "baseline_per_user_tps": b_tps, "speedup": _ratio(tps, b_tps),
                    "al_requests": al})
    return [{k: _plain(r[k]) for k in PROMPT_KEYS} for r in out]


def _plain(v: Any) -> Any:
    """numpy scalars -> Python scalars so rows serialise as JSON without surprises."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v
