"""Each summary-row key's formula, registered under the key metrics/registry.py declares.

``FORMULAS[key]`` computes that key of one point from its :class:`PointData`; one
function may give several keys at once (it returns a dict, computed once per point).
:func:`build_row` asks every key of ``row_keys(percentiles)`` in order, so a row is
built in one pass: speedups (widened to sequential stopping's look-level intervals) and
calibration predictions included. Adding a metric = its declaration in the registry plus
one ``@formula`` here (tests/unit/metrics/test_formulas.py fails on a key without one).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from speedbench.metrics.cells import num
from speedbench.client.scrape import SpecCounters
from speedbench.metrics.acceptance import (AL_AGREE_TOLERANCE, acceptance, al_from_counters, overcount_stats,
                                          per_position_rates)
from speedbench.metrics.bootstrap import RoundSpread
from speedbench.metrics.headline import HEADLINE_KEYS, headline_of
from speedbench.metrics.inputs import ArmInfo, PointInfo
from speedbench.metrics.latency import good_requests, latency_stats
from speedbench.metrics.numbers import NAN, mean, pct, plain
from speedbench.metrics.registry import ROW_KEYS, SummaryRow, row_keys
from speedbench.metrics.speedup import proxy_speedup, speedup
from speedbench.metrics.timing import timing_block
from speedbench.records import PointKey

_STATUS_ORDER = {"ok": 0, "partial": 1, "failed": 2}
Predict = Callable[[PointKey, Any], tuple[float, float, float]]


@dataclass
class Pairing:
    """A speculative point and the baseline's point at the same concurrency and variant."""

    spec_ok: pd.DataFrame
    base_ok: pd.DataFrame
    spreads: dict[str, RoundSpread | None]
    base_bursts: int  # baseline requests whose client-side TPS is undefined


@dataclass
class RowExtras:
    """What a run adds to its rows beyond records and counters."""

    stopping: list[dict[str, Any]] = field(default_factory=list)  # stopping.summary.stopping_rows entries
    predict: Predict | None = None  # (point, AL) -> (speedup, low, high) from the arm's calibration; NaN: none


@dataclass
class PointData:
    """Everything a formula reads about one point."""

    key: PointKey
    g: pd.DataFrame  # measured requests (request_table rows)
    itl: tuple[np.ndarray, np.ndarray]  # pooled (per chunk, per token) inter-token latencies
    arm: ArmInfo
    point: PointInfo  # wall_s filled
    prom: SpecCounters | None
    percentiles: tuple[float, ...]
    slo: dict[str, Any] | None = None
    pairing: Pairing | None = None
    stopped: list[dict[str, Any]] = field(default_factory=list)  # stopping.summary.stopping_rows entries
    predict: Predict | None = None  # the arm's calibration: (speedup, low, high) at (point, AL)
    memo: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def ok(self) -> pd.DataFrame:
        return self.g[self.g["ok"]] if len(self.g) else self.g

    def col(self, c: str) -> Any:
        return self.ok[c] if len(self.ok) else []

    @property
    def wall(self) -> float:
        return self.point.wall_s or 0.0


Formula = Callable[[PointData], Any]
FORMULAS: dict[str, tuple[Formula, bool]] = {}  # key -> (function, gives a dict of several keys)


def formula(*keys: str) -> Callable[[Formula], Formula]:
    def register(fn: Formula) -> Formula:
        for k in keys:
            FORMULAS[k] = (fn, len(keys) > 1)
        return fn
    return register


def value(d: PointData, key: str) -> Any:
    """One key of the point's row (a latency family's key outside ROW_KEYS: the latency block)."""
    fn, multi = FORMULAS.get(key) or (_latency, True)
    return block(d, fn)[key] if multi else fn(d)


def block(d: PointData, fn: Formula) -> dict[str, Any]:
    """The dict a several-keys formula gives, computed once per point."""
    if fn.__name__ not in d.memo:
        d.memo[fn.__name__] = fn(d)
    return d.memo[fn.__name__]


def build_row(d: PointData) -> SummaryRow:
    """The point's typed row: each declared field from its formula, then the latency block."""
    cells = {k: plain(value(d, k)) for k in row_keys(d.percentiles)}
    return SummaryRow(**{k: cells.pop(k) for k in ROW_KEYS}, more=cells)


def _latency(d: PointData) -> dict[str, Any]:
    return latency_stats(d.ok, d.itl, d.percentiles)


def _fixed(key: str, fn: Formula) -> None:
    formula(key)(fn)


# identity and arm facts
_fixed("arm", lambda d: d.key.arm)
_fixed("template", lambda d: d.arm.template or d.key.arm)
_fixed("concurrency", lambda d: int(d.key.concurrency))
_fixed("series", lambda d: d.arm.series)
_fixed("variant", lambda d: d.key.variant)
# a rate point's label is not its workload: without a stored one it stays unknown (None)
_fixed("workload", lambda d: d.key.workload if d.point.request_rate is None else d.key.stored_workload)
_fixed("speculative", lambda d: bool(d.arm.speculative))
_fixed("method", lambda d: d.arm.method)
_fixed("num_speculative_tokens", lambda d: d.arm.num_speculative_tokens)
_fixed("eagle_version", lambda d: d.arm.eagle_version)


@formula("status", "failure")
def _status(d: PointData) -> dict[str, Any]:
    """Worst of the record-derived status and PointInfo.status. The arm's own status
    only speaks for points without measured requests (an arm that never started, or
    points after it died): points it measured before dying keep their data's status."""
    g, arm, point = d.g, d.arm, d.point
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
    return {"status": status, "failure": failure}


# counts, throughput, latency summary
_fixed("n_requests", lambda d: len(d.g))
_fixed("n_ok", lambda d: len(d.ok))
_fixed("n_errors", lambda d: len(d.g) - len(d.ok))
_fixed("error_rate", lambda d: (len(d.g) - len(d.ok)) / len(d.g) if len(d.g) else NAN)
_fixed("per_user_tps_mean", lambda d: mean(d.col("per_user_tps")))
_fixed("per_user_tps_median", lambda d: pct(d.col("per_user_tps"), 50))
_fixed("per_user_tps_p10", lambda d: pct(d.col("per_user_tps"), 10))
_fixed("per_user_tps_p90", lambda d: pct(d.col("per_user_tps"), 90))
_fixed("per_user_e2e_tps_mean", lambda d: mean(d.col("per_user_e2e_tps")))
_fixed("output_tps", lambda d: float(d.g["n_out"].sum()) / d.wall if len(d.g) and d.wall > 0 else NAN)
_fixed("ttft_ms_mean", lambda d: mean(d.col("ttft_ms")))
_fixed("ttft_ms_median", lambda d: pct(d.col("ttft_ms"), 50))
_fixed("ttft_ms_p90", lambda d: pct(d.col("ttft_ms"), 90))
_fixed("tpot_ms_mean", lambda d: mean(d.col("tpot_ms")))
_fixed("tpot_ms_median", lambda d: pct(d.col("tpot_ms"), 50))
_fixed("itl_chunk_ms_median", lambda d: pct(d.itl[0], 50))
_fixed("itl_token_ms_median", lambda d: pct(d.itl[1], 50))
_fixed("e2e_s_mean", lambda d: mean(d.col("e2e_s")))


@formula("per_user_tps_engine_mean", "tps_agree", "n_burst")
def _timing(d: PointData) -> dict[str, Any]:
    out, notes = timing_block(d.ok, d.point.loop_lag_ms_max)
    return {**out, "notes": notes}


# acceptance
@formula("al_tokens", "al_requests", "al_prometheus", "al_agree", "draft_acceptance_rate", "acceptance_histogram",
         "per_position_joint", "per_position_conditional", "n_spec_malformed")
def _acceptance(d: PointData) -> dict[str, Any]:
    acc, prom = acceptance(d.ok), d.prom
    al_prom = al_from_counters(prom)
    rate = acc["draft_acceptance_rate"]
    if not math.isfinite(rate) and prom is not None and prom.draft_tokens > 0:
        rate = prom.accepted / prom.draft_tokens
    joint, cond = per_position_rates(prom, acc["hist"])
    agree = None
    if math.isfinite(acc["al_tokens"]) and math.isfinite(al_prom):
        agree = bool(abs(acc["al_tokens"] - al_prom) <= AL_AGREE_TOLERANCE * al_prom)
    return {"al_tokens": acc["al_tokens"], "al_requests": acc["al_requests"], "al_prometheus": al_prom,
            "al_agree": agree, "draft_acceptance_rate": rate, "acceptance_histogram": acc["hist"],
            "per_position_joint": joint, "per_position_conditional": cond,
            "n_spec_malformed": int(d.ok["spec_malformed"].sum()) if len(d.ok) else 0}


@formula("spec_overcount_share", "spec_overcount_gt_k_share")
def _overcount(d: PointData) -> dict[str, Any]:
    return overcount_stats(d.ok, d.arm.num_speculative_tokens)


# the client itself, load (rate mode) and goodput
_fixed("loop_lag_ms_max", lambda d: d.point.loop_lag_ms_max if d.point.loop_lag_ms_max is not None else NAN)
_fixed("request_rate", lambda d: d.point.request_rate)
_fixed("burstiness", lambda d: d.point.burstiness)


@formula("goodput", "goodput_share")
def _goodput(d: PointData) -> dict[str, Any]:
    n_good, n = good_requests(d.ok, d.slo), len(d.g)
    return {"goodput": n_good / d.wall if n_good is not None and d.wall > 0 else NAN,
            "goodput_share": n_good / n if n_good is not None and n else NAN}


# speedups against the baseline arm, and what predicts them
@formula("proxy_speedup")
def _proxy(d: PointData) -> float:
    al = value(d, "al_tokens")
    if d.pairing is None or not math.isfinite(al):
        return NAN
    return proxy_speedup(d.pairing.spec_ok, d.pairing.base_ok, al)


@formula("speedup_predicted", "speedup_predicted_ci_low", "speedup_predicted_ci_high")
def _predicted(d: PointData) -> dict[str, Any]:
    """From the matching calibration file (calibration/store.py), at the row's pooled AL."""
    s, lo, hi = d.predict(d.key, plain(value(d, "al_tokens"))) if d.predict is not None else (NAN, NAN, NAN)
    return {"speedup_predicted": s, "speedup_predicted_ci_low": lo, "speedup_predicted_ci_high": hi}


def _no_speedup() -> dict[str, Any]:
    return {"speedup_mean": NAN, "speedup_median": NAN, "speedup_ci_low": NAN, "speedup_ci_high": NAN,
            "speedup_pairs": 0, "speedup_mean_all": NAN, "speedup_by_repeat": [], "speedup_between_sd": NAN,
            "speedup_lag_bound": NAN, "speedup_engine_mean": NAN, "speedup_engine_ci_low": NAN,
            "speedup_engine_ci_high": NAN}


@formula(*_no_speedup())
def _speedups(d: PointData) -> dict[str, Any]:
    """Paired per-user TPS ratios against the baseline (metrics/speedup.py); a stopped
    point's intervals widened to its look-level ones. ``notes`` go to the warnings."""
    out, notes = _no_speedup(), []
    if d.pairing is not None:
        sp = speedup(d.pairing.spec_ok, d.pairing.base_ok, d.pairing.spreads)
        lag_note = sp.pop("speedup_lag_warning", None)
        out.update(sp)
        notes += [lag_note] if lag_note else []
        if math.isfinite(out["speedup_mean_all"]):
            notes.append(f"the arms completed different prompts: speedup {out['speedup_mean']:.3f}x over the "
                         f"{out['speedup_pairs']} prompts both completed (the CI's set), "
                         f"{out['speedup_mean_all']:.3f}x over all completed requests")
        if d.pairing.base_bursts and out["speedup_pairs"]:
            notes.append(f"the client-side speedup pairs only {out['speedup_pairs']} requests: "
                         f"{d.pairing.base_bursts} baseline requests were bursts (no client-side TPS); "
                         "the engine-side speedup counts them")
        if not math.isfinite(out["speedup_mean"]) and math.isfinite(out["speedup_engine_mean"]):
            notes.append("no client-side speedup: no request of one arm had a client-side TPS (each was a "
                         "burst, or had one output token); the engine-side speedup counts them")
    widened = [_widen(out, d.stopped, "speedup", "ci"), _widen(out, d.stopped, "speedup_engine", "engine_ci")]
    all_paired = widened_all = False
    if any(widened):
        widened_all = True
        all_paired = out["speedup_pairs"] == len(d.ok)
        if all_paired:
            # every request of the stopped arm is paired: the baseline's extra prompts are
            # the looks it ran beyond this arm's stop, not prompts this arm lost
            out["speedup_mean_all"] = math.nan
    return {**out, "notes": notes, "stopped": widened_all, "all_paired": all_paired}


def _widen(out: dict[str, Any], entries: list[dict[str, Any]], prefix: str, entry_prefix: str) -> bool:
    """A stopped point's 95% interval over its pairs ignores the looks: widen
    ``<prefix>_ci_low/high`` to cover each stopped round's look-level interval (the
    entries the summary's ``stopping`` block holds); False when no look has an interval.
    A look with an estimate but a missing end is unbounded on that side (a stalled
    client's lag widens it without bound): the row's end goes with it (0 or inf), and its
    other end still widens the row's."""
    est_key = "speedup" if entry_prefix == "ci" else "speedup_engine"
    lows, highs = [], []
    for s in entries:
        lo, hi, est = (num(s.get(k)) for k in (f"{entry_prefix}_low", f"{entry_prefix}_high", est_key))
        if not any(math.isfinite(v) for v in (lo, hi, est)):
            continue  # this look had no interval (too few pairs)
        lows.append(lo if math.isfinite(lo) else 0.0)
        highs.append(hi if math.isfinite(hi) else math.inf)
    if not lows:
        return False
    lo, hi = num(out[f"{prefix}_ci_low"]), num(out[f"{prefix}_ci_high"])
    out[f"{prefix}_ci_low"] = min([*lows, *([lo] if not math.isnan(lo) else [])])
    out[f"{prefix}_ci_high"] = max([*highs, *([hi] if not math.isnan(hi) else [])])
    return True


@formula(*HEADLINE_KEYS)
def _headline(d: PointData) -> dict[str, Any]:
    """The clock the point's headline is read from, chosen from the finished (widened)
    intervals, so the choice every reader sees is made once."""
    cells = {k: plain(v) for k, v in block(d, _speedups).items()}
    return headline_of(cells)


@formula("warnings")
def _warnings(d: PointData) -> list[str]:
    """What the point's figures need said next to them, in a fixed order: counters, the
    per-request spec metrics, timing, the speedup, sequential stopping."""
    n_ok, n_bad = len(d.ok), value(d, "n_spec_malformed")
    out = list(d.prom.warnings) if d.prom is not None else []
    if n_bad:
        out.append(f"{n_bad} of {n_ok} requests had malformed per-request spec metrics; "
                   "they count for timing but not for the per-request AL")
    over = block(d, _overcount)
    if over["spec_overcount_share"] > 0:
        out.append(f"{over['spec_overcount_share']:.0%} of requests stopped inside a step's accepted "
                   "drafts (EOS or max_tokens); vLLM still counts those drafts as accepted, so the AL from "
                   f"counters reads {value(d, 'al_tokens'):.3f} where the delivered tokens give "
                   f"{over['al_delivered']:.3f}")
    if over["spec_overcount_gt_k_share"] > 0:
        out.append(f"{over['spec_overcount_gt_k_share']:.0%} of requests report more accepted tokens "
                   "than EOS/max_tokens truncation of one step explains")
    sp = block(d, _speedups)
    out += block(d, _timing)["notes"] + sp["notes"]
    if sp["stopped"]:
        if sp["all_paired"]:
            out = [w for w in out if "completed different prompts" not in w]
        e = d.stopped[0]
        out.append(f"sequential stopping: {e['reason']} after {e['prompts']} prompts (look {e['look']} of "
                   f"{e['n_looks']}); the speedup intervals are taken at the look level {e['level']:.4f} "
                   f"(Bonferroni over the looks), wider than a plain 95% interval")
    return out


def missing_formulas() -> list[str]:
    """ROW_KEYS without a formula (tests/unit/metrics/test_formulas.py keeps it empty)."""
    return [k for k in ROW_KEYS if k not in FORMULAS]
