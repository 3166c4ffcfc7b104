"""Summary rows: one per (arm, concurrency, variant), from request records.

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
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import pandas as pd

from speedbench.metrics.registry import DEFAULT_PERCENTILES, row_keys
from speedbench.metrics.acceptance import (AL_AGREE_TOLERANCE, acceptance, al_from_counters, overcount_stats,
                                          per_position_rates)
from speedbench.metrics.latency import good_requests, latency_stats
from speedbench.metrics.numbers import NAN, mean, pct, plain
from speedbench.metrics.speedup import pooled_spreads, proxy_speedup, speedup
from speedbench.metrics.timing import timing_block
from speedbench.metrics.table import itl_values, request_table
from speedbench.records import PointKey, RequestRecord, wall_s
from speedbench.client.scrape import SpecCounters

_STATUS_ORDER = {"ok": 0, "partial": 1, "failed": 2}


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
        """Fold the ``loadgen.PointResult`` of every repeat of one point."""
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


def _point_row(key: PointKey, g: pd.DataFrame, itl: tuple[np.ndarray, np.ndarray], arm: ArmInfo,
               point: PointInfo, prom: SpecCounters | None,
               percentiles: Iterable[float] = DEFAULT_PERCENTILES, slo: dict[str, Any] | None = None) -> dict[str, Any]:
    name, conc, variant = key
    ok = g[g["ok"]] if len(g) else g
    n, n_ok = len(g), len(ok)
    status, failure = _status(g, arm, point)
    wall = point.wall_s or 0.0  # summarize() fills it from the records when the point has none
    acc = acceptance(ok)
    al_prom = al_from_counters(prom)
    rate = acc["draft_acceptance_rate"]
    if not math.isfinite(rate) and prom is not None and prom.draft_tokens > 0:
        rate = prom.accepted / prom.draft_tokens
    joint, cond = per_position_rates(prom, acc["hist"])
    agree = None
    if math.isfinite(acc["al_tokens"]) and math.isfinite(al_prom):
        agree = bool(abs(acc["al_tokens"] - al_prom) <= AL_AGREE_TOLERANCE * al_prom)

    def col(c: str):
        return ok[c] if n_ok else []

    overcount = overcount_stats(ok, arm.num_speculative_tokens)
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
    timing, timing_warnings = timing_block(ok, point.loop_lag_ms_max)
    warnings += timing_warnings
    n_good = good_requests(ok, slo)
    # the latency block first, so the fixed keys below keep their own definitions
    return {**latency_stats(ok, itl, percentiles),
        "arm": name, "template": arm.template or name, "concurrency": int(conc), "variant": variant,
        "speculative": bool(arm.speculative), "method": arm.method,
        "num_speculative_tokens": arm.num_speculative_tokens, "eagle_version": arm.eagle_version,
        "status": status, "failure": failure,
        "n_requests": n, "n_ok": n_ok, "n_errors": n - n_ok, "error_rate": (n - n_ok) / n if n else NAN,
        "per_user_tps_mean": mean(col("per_user_tps")), "per_user_tps_median": pct(col("per_user_tps"), 50),
        "per_user_tps_p10": pct(col("per_user_tps"), 10), "per_user_tps_p90": pct(col("per_user_tps"), 90),
        "per_user_e2e_tps_mean": mean(col("per_user_e2e_tps")),
        **timing,
        "output_tps": float(g["n_out"].sum()) / wall if n and wall > 0 else NAN,
        "ttft_ms_mean": mean(col("ttft_ms")), "ttft_ms_median": pct(col("ttft_ms"), 50),
        "ttft_ms_p90": pct(col("ttft_ms"), 90),
        "tpot_ms_mean": mean(col("tpot_ms")), "tpot_ms_median": pct(col("tpot_ms"), 50),
        "itl_chunk_ms_median": pct(itl[0], 50), "itl_token_ms_median": pct(itl[1], 50),
        "e2e_s_mean": mean(col("e2e_s")),
        "speedup_mean": NAN, "speedup_median": NAN, "speedup_ci_low": NAN, "speedup_ci_high": NAN, "speedup_pairs": 0,
        "speedup_mean_all": NAN, "speedup_by_repeat": [], "speedup_between_sd": NAN, "speedup_lag_bound": NAN,
        "speedup_engine_mean": NAN, "speedup_engine_ci_low": NAN, "speedup_engine_ci_high": NAN,
        "proxy_speedup": NAN,
        # filled from a matching calibration file by results/summary.py (calibration/store.py)
        "speedup_predicted": NAN, "speedup_predicted_ci_low": NAN, "speedup_predicted_ci_high": NAN,
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
    by_key = {PointKey(a, int(c), v): g for (a, c, v), g in df.groupby(["arm", "concurrency", "variant"], sort=False)}
    recs_by_key: dict[PointKey, list[RequestRecord]] = {}  # the ok ones
    all_by_key: dict[PointKey, list[RequestRecord]] = {}
    for r in measured:
        all_by_key.setdefault(PointKey(r.arm, r.concurrency, r.variant), []).append(r)
        if r.error is None:
            recs_by_key.setdefault(PointKey(r.arm, r.concurrency, r.variant), []).append(r)
    points = points or {}
    prom_deltas = prom_deltas or {}
    keys = list(dict.fromkeys([*by_key, *(PointKey(a, int(c), v) for a, c, v in points)]))
    arm_order = {a: i for i, a in enumerate(arm_info)}
    keys.sort(key=lambda k: (arm_order.get(k[0], len(arm_order)), k[0], k[1]))
    groups = {k: by_key.get(k, df.iloc[0:0]) for k in keys}
    rows = {}
    for k in keys:
        arm = _coerce(ArmInfo, arm_info.get(k[0]))
        point = _coerce(PointInfo, points.get(k))
        if not point.wall_s:  # without a PointInfo, wall time comes from the records
            point = replace(point, wall_s=wall_s(all_by_key.get(k, [])))
        rows[k] = _point_row(k, groups[k], itl_values(recs_by_key.get(k, [])), arm, point, prom_deltas.get(k),
                             percentiles, slo)
    if baseline_arm is not None:
        pairs = {k: (groups[k][groups[k]["ok"]], groups[bk][groups[bk]["ok"]])
                 for k in rows if k[0] != baseline_arm
                 and (bk := PointKey(baseline_arm, k[1], k[2])) in rows and len(groups[k]) and len(groups[bk])}
        spreads = pooled_spreads(pairs)
        for k, (s_ok, b_ok) in pairs.items():
            row = rows[k]
            bk = PointKey(baseline_arm, k[1], k[2])
            sp = speedup(s_ok, b_ok, spreads[(k[0], k[2])])
            lag_note = sp.pop("speedup_lag_warning", None)
            row.update(sp)
            if lag_note:
                row["warnings"] = row["warnings"] + [lag_note]
            if math.isfinite(row["speedup_mean_all"]):
                row["warnings"] = row["warnings"] + [
                    f"the arms completed different prompts: speedup {row['speedup_mean']:.3f}x over the "
                    f"{row['speedup_pairs']} prompts both completed (the CI's set), {row['speedup_mean_all']:.3f}x "
                    "over all completed requests"]
            lost = int(groups[bk]["burst"].sum()) if len(groups[bk]) else 0
            if lost and row["speedup_pairs"]:
                row["warnings"] = row["warnings"] + [
                    f"the client-side speedup pairs only {row['speedup_pairs']} requests: {lost} baseline requests "
                    "were bursts (no client-side TPS); the engine-side speedup counts them"]
            if math.isfinite(row["al_tokens"]):
                row["proxy_speedup"] = proxy_speedup(s_ok, b_ok, row["al_tokens"])
    keys_out = row_keys(percentiles)
    return [{key: plain(rows[k][key]) for key in keys_out} for k in keys]
