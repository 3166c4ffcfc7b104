"""The computation of a summary row: each metric's own computation is declared with it
(metrics/row_*.py, through metrics/registry.py); here is the point's data they read
(:class:`PointData`) and the blocks several metrics share, computed once per point (the
status, timing, acceptance, overcount, goodput, speedup, headline and prediction blocks).
:func:`build_row` computes every declared key in the order the declarations' ``uses`` give
(``ORDER``: a metric after the row keys it uses), so a row is built in one pass: speedups
(widened to sequential stopping's look-level intervals) and calibration predictions
included. A use that is neither a row key, a request column nor one of ``INPUTS`` fails
when this module is imported (metrics/declare.py's ``computation_order``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from speedbench.metrics.cells import num
from speedbench.client.scrape import SpecCounters
from speedbench.metrics.acceptance import (AL_AGREE_TOLERANCE, acceptance, al_from_counters, overcount_stats,
                                          per_position_rates)
from speedbench.metrics.bootstrap import RoundSpread
from speedbench.metrics.declare import computation_order
from speedbench.metrics.headline import headline_of
from speedbench.metrics.inputs import ArmInfo, PointInfo
from speedbench.metrics.latency import good_requests, latency_stats
from speedbench.metrics.numbers import NAN, mean, pct, plain
from speedbench.metrics.registry import ROW_KEYS, ROW_METRICS, SummaryRow, row_keys
from speedbench.metrics.speedup import proxy_speedup, speedup
from speedbench.metrics.table import COLUMNS
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
    row: dict[str, Any] = field(default_factory=dict)  # the row's cells computed so far (ORDER)

    @cached_property
    def ok(self) -> pd.DataFrame:
        return self.g[self.g["ok"]] if len(self.g) else self.g

    def col(self, c: str) -> Any:
        return self.ok[c] if len(self.ok) else []

    def mean(self, c: str) -> float:
        return mean(self.col(c))

    def pct(self, c: str, p: float) -> float:
        return pct(self.col(c), p)

    def itl_median(self, which: int) -> float:
        """The median of the pooled inter-token latencies: 0 per chunk, 1 per token."""
        return pct(self.itl[which], 50)

    @property
    def wall(self) -> float:
        return self.point.wall_s or 0.0

    @cached_property
    def status(self) -> dict[str, Any]:
        return _status(self)

    @cached_property
    def timing(self) -> dict[str, Any]:
        out, notes = timing_block(self.ok, self.point.loop_lag_ms_max)
        return {**out, "notes": notes}

    @cached_property
    def acceptance(self) -> dict[str, Any]:
        return _acceptance(self)

    @cached_property
    def overcount(self) -> dict[str, Any]:
        return overcount_stats(self.ok, self.arm.num_speculative_tokens)

    @cached_property
    def goodput(self) -> dict[str, Any]:
        return _goodput(self)

    @cached_property
    def speedups(self) -> dict[str, Any]:
        return _speedups(self)

    @cached_property
    def headline(self) -> dict[str, Any]:
        """The clock the point's headline is read from, chosen from the finished (widened)
        intervals, so the choice every reader sees is made once."""
        return headline_of({k: plain(v) for k, v in self.speedups.items()})

    @cached_property
    def predicted(self) -> tuple[float, float, float]:
        """From the matching calibration file (calibration/store.py), at the row's pooled AL."""
        return self.predict(self.key, self.row["al_tokens"]) if self.predict is not None else (NAN, NAN, NAN)

    def proxy(self) -> float:
        al = self.row["al_tokens"]
        if self.pairing is None or not math.isfinite(al):
            return NAN
        return proxy_speedup(self.pairing.spec_ok, self.pairing.base_ok, al)

    def warnings(self) -> list[str]:
        return _warnings(self)


# What a metric may use besides other row keys: a request column (metrics/table.py), or an
# input of the point (a field of PointData; its ArmInfo and PointInfo fields as arm.* and point.*).
INPUTS = frozenset([*COLUMNS, "key", "itl", "prom", "pairing", "stopped", "predict", "slo",
                    *(f"arm.{f.name}" for f in fields(ArmInfo)), *(f"point.{f.name}" for f in fields(PointInfo))])
ORDER = computation_order(ROW_METRICS, INPUTS)  # every declared metric, each after the row keys it uses


def build_row(d: PointData) -> SummaryRow:
    """The point's typed row: each declared field from its computation, in ``ORDER``, then
    the latency block (row_keys' order)."""
    for m in ORDER:
        assert m.compute is not None  # computation_order refused a metric without one
        d.row[m.key] = plain(m.compute(d))
    latency = latency_stats(d.ok, d.itl, d.percentiles)
    more = {k: plain(latency[k]) for k in row_keys(d.percentiles) if k not in d.row}
    return SummaryRow(**{k: d.row[k] for k in ROW_KEYS}, more=more)


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


def _goodput(d: PointData) -> dict[str, Any]:
    n_good, n = good_requests(d.ok, d.slo), len(d.g)
    return {"goodput": n_good / d.wall if n_good is not None and d.wall > 0 else NAN,
            "goodput_share": n_good / n if n_good is not None and n else NAN}


def _no_speedup() -> dict[str, Any]:
    return {"speedup_mean": NAN, "speedup_median": NAN, "speedup_ci_low": NAN, "speedup_ci_high": NAN,
            "speedup_pairs": 0, "speedup_mean_all": NAN, "speedup_by_repeat": [], "speedup_between_sd": NAN,
            "speedup_lag_bound": NAN, "speedup_engine_mean": NAN, "speedup_engine_ci_low": NAN,
            "speedup_engine_ci_high": NAN}


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


def _warnings(d: PointData) -> list[str]:
    """What the point's figures need said next to them, in a fixed order: counters, the
    per-request spec metrics, timing, the speedup, sequential stopping."""
    n_ok, n_bad = len(d.ok), d.row["n_spec_malformed"]
    out = list(d.prom.warnings) if d.prom is not None else []
    if n_bad:
        out.append(f"{n_bad} of {n_ok} requests had malformed per-request spec metrics; "
                   "they count for timing but not for the per-request AL")
    over = d.overcount
    if over["spec_overcount_share"] > 0:
        out.append(f"{over['spec_overcount_share']:.0%} of requests stopped inside a step's accepted "
                   "drafts (EOS or max_tokens); vLLM still counts those drafts as accepted, so the AL from "
                   f"counters reads {d.row['al_tokens']:.3f} where the delivered tokens give "
                   f"{over['al_delivered']:.3f}")
    if over["spec_overcount_gt_k_share"] > 0:
        out.append(f"{over['spec_overcount_gt_k_share']:.0%} of requests report more accepted tokens "
                   "than EOS/max_tokens truncation of one step explains")
    sp = d.speedups
    out += d.timing["notes"] + sp["notes"]
    if sp["stopped"]:
        if sp["all_paired"]:
            out = [w for w in out if "completed different prompts" not in w]
        e = d.stopped[0]
        out.append(f"sequential stopping: {e['reason']} after {e['prompts']} prompts (look {e['look']} of "
                   f"{e['n_looks']}); the speedup intervals are taken at the look level {e['level']:.4f} "
                   f"(Bonferroni over the looks), wider than a plain 95% interval")
    return out
