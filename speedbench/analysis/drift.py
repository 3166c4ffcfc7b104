"""Drift analysis: pure functions over a run's summary rows (docs/drift.md).

Rows are SummaryRow objects (metrics/registry.py), read by field. Nothing here reads files or
draws; ``speedbench.report.drift`` renders what these functions return.

A *series* is a set of arms that differ only in ``num_speculative_tokens`` (k): the arm
name with its ``-k<K>`` part removed, e.g. ``self-draft-k3`` -> ``self-draft`` and
``eagle-kimi-k2.6-eagle3.1-mla-k5`` -> ``eagle-kimi-k2.6-eagle3.1-mla``. Sweep expansion
puts the k part after the draft part, so the last ``-k<K>`` match is the right one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

from speedbench.metrics.headline import headline  # a point's speedup is the one every report shows
from speedbench.metrics.cells import al_of, as_list, num
from speedbench.metrics.registry import SummaryRow

USABLE_STATUS = ("ok", "partial")  # failed arms carry no measurements


# ---- row facts: k, AL, series, per-position rates (cells are read by speedbench/metrics/cells.py)


# A row from an old run folder may lack a cell (the field reads as None); these keep the
# defaults the analysis has always assumed for a missing one.


def _arm(row: SummaryRow) -> str:
    return "" if row.arm is None else str(row.arm)


def variant_of(row: SummaryRow) -> str:
    return "" if row.variant is None else str(row.variant)


def _status(row: SummaryRow) -> str:
    return "ok" if row.status is None else row.status


def may_speculate(row: SummaryRow) -> bool:
    """False only for a row that says it runs no draft. A row from before the ``speculative``
    column has no say, and the drift analysis has always read such rows by their k
    (report/tables.py's ``is_speculative``, for tables, reads a missing column as no)."""
    return True if row.speculative is None else bool(row.speculative)


def k_of(row: SummaryRow) -> int | None:
    v = num(row.num_speculative_tokens)
    return int(v) if math.isfinite(v) and v >= 1 else None


def series_of(row: SummaryRow) -> str:
    """The row's stored ``series`` (arms that differ only in k share it). ``template`` is not
    one: a sweep may cross drafts and k under one template."""
    if row.series:
        return row.series
    # A run folder from before the series was stored: the arm name without its ``-k<K>``.
    arm, k = _arm(row), k_of(row)
    if k is None:
        return arm
    hits = list(re.finditer(rf"-k{k}(?=-|$)", arm))
    if not hits:
        return arm
    return arm[: hits[-1].start()] + arm[hits[-1].end():]


def conditional_of(row: SummaryRow) -> list[float]:
    """Conditional per-position acceptance; derived from the joint rates when absent.

    joint[i] = accepted_at_pos[i] / drafts, so joint[i] / joint[i-1] =
    accepted_at_pos[i] / accepted_at_pos[i-1], the conditional rate.
    """
    cond = as_list(row.per_position_conditional)
    if cond:
        return cond
    joint = as_list(row.per_position_joint)
    out = joint[:1]
    for prev, cur in zip(joint, joint[1:]):
        out.append(cur / prev if prev > 0 else math.nan)
    return out


def usable(rows: Iterable[SummaryRow]) -> list[SummaryRow]:
    return [r for r in rows if _status(r) in USABLE_STATUS]


def _variant_order(rows: list[SummaryRow]) -> dict[str, int]:
    order: dict[str, int] = {}
    for r in rows:
        order.setdefault(variant_of(r), len(order))
    return order


def _series_groups(rows: list[SummaryRow]) -> dict[tuple[str, str, str, int], dict[int, SummaryRow]]:
    """(template, series, variant, concurrency) -> {k: row}, speculative rows with k only."""
    groups: dict[tuple[str, str, str, int], dict[int, SummaryRow]] = {}
    for r in usable(rows):
        k = k_of(r)
        if k is None or not may_speculate(r):
            continue
        key = (str(r.template or r.arm), series_of(r), variant_of(r),
               int(num(r.concurrency)))
        groups.setdefault(key, {})[k] = r
    return groups


def _sorted_keys(groups: dict, rows: list[SummaryRow]) -> list:
    vo = _variant_order(rows)
    return sorted(groups, key=lambda g: (g[0], g[1], vo.get(g[2], 0), g[3]))


# ---- optimal k -------------------------------------------------------------------------


@dataclass(frozen=True)
class KPoint:
    k: int
    arm: str
    speedup: float
    ci_low: float
    ci_high: float
    per_user_tps: float
    proxy_speedup: float
    al: float


@dataclass(frozen=True)
class OptimalK:
    template: str
    series: str
    variant: str
    concurrency: int
    best_k: int
    best_arm: str
    speedup: float
    ci_low: float
    ci_high: float
    per_user_tps: float
    argmax_k: int  # the k with the highest mean, before the tie rule
    contenders: tuple[int, ...]  # ks whose CI overlaps the argmax's CI (itself included)
    proxy_best_k: int | None
    proxy_speedup: float
    speculative_config: dict[str, Any]  # the chosen k's config, as a scenario writes it (the engine renders the flag)
    points: tuple[KPoint, ...]

    @property
    def tie(self) -> bool:
        return len(self.contenders) > 1


def _interval(p: KPoint, score: float) -> tuple[float, float]:
    # A missing CI (too few pairs, no baseline) is a point interval at the mean: it ties
    # only with an equal mean, so we never claim a tie we cannot see.
    lo = p.ci_low if math.isfinite(p.ci_low) else score
    hi = p.ci_high if math.isfinite(p.ci_high) else score
    return lo, hi


def choose_k(points: list[KPoint]) -> tuple[KPoint, KPoint, list[KPoint]]:
    """-> (chosen, argmax, contenders). The rule (docs/drift.md):

    1. argmax = the k with the highest mean speedup (per-user TPS over the baseline's at
       the same concurrency and variant); per-user TPS when no speedup is known.
    2. contenders = every k whose speedup CI overlaps argmax's CI. Their means are not
       distinguishable from the best, so picking the highest mean would pick noise.
    3. chosen = the contender with the highest CI lower bound: the speedup we can most
       confidently promise. Equal lower bounds go to the smaller k: the cheaper draft
       (less draft compute and KV cache), which degrades less as concurrency grows.
    """
    use_speedup = all(math.isfinite(p.speedup) for p in points)

    def score(p: KPoint) -> float:
        return p.speedup if use_speedup else p.per_user_tps

    def lo_hi(p: KPoint) -> tuple[float, float]:
        return _interval(p, score(p)) if use_speedup else (score(p), score(p))

    argmax = max(points, key=lambda p: (score(p), lo_hi(p)[0], -p.k))
    a_lo, a_hi = lo_hi(argmax)
    contenders = [p for p in points if lo_hi(p)[0] <= a_hi and a_lo <= lo_hi(p)[1]]
    chosen = max(contenders, key=lambda p: (lo_hi(p)[0], -p.k))
    return chosen, argmax, sorted(contenders, key=lambda p: p.k)


def speculative_config_for(k: int, method: str = "", arm_spec: dict | None = None) -> dict[str, Any]:
    """The speculative config for k, from the arm's resolved config when known (method
    first, then model and k, then the other keys as written)."""
    rest = dict(arm_spec or {})
    cfg: dict[str, Any] = {"method": rest.pop("method", None) or method or None}
    model = rest.pop("model", None)
    if model:
        cfg["model"] = model
    rest.pop("num_speculative_tokens", None)
    cfg["num_speculative_tokens"] = int(k)
    cfg.update(rest)
    if cfg["method"] is None:
        del cfg["method"]
    return cfg


def optimal_k(rows: list[SummaryRow], template: str | None = None,
              arms_spec: dict[str, dict] | None = None) -> list[OptimalK]:
    """Best k per (template, series, variant, concurrency) for series with two or more ks.

    ``template`` keeps one template (or series); ``arms_spec`` maps arm name -> resolved
    speculative_config so the chosen config carries the draft model and extra keys.
    """
    groups = _series_groups(rows)
    out: list[OptimalK] = []
    for key in _sorted_keys(groups, rows):
        tmpl, series, variant, conc = key
        by_k = groups[key]
        if len(by_k) < 2 or (template is not None and template not in (tmpl, series)):
            continue
        points = [
            KPoint(k=k, arm=str(r.arm), speedup=headline(r)[0], ci_low=headline(r)[1],
                   ci_high=headline(r)[2], per_user_tps=num(r.per_user_tps_mean),
                   proxy_speedup=num(r.proxy_speedup),
                   al=al_of(r)[0])
            for k, r in sorted(by_k.items())
        ]
        points = [p for p in points if math.isfinite(p.speedup) or math.isfinite(p.per_user_tps)]
        if not points:
            continue
        chosen, argmax, contenders = choose_k(points)
        proxied = [p for p in points if math.isfinite(p.proxy_speedup)]
        proxy = max(proxied, key=lambda p: (p.proxy_speedup, -p.k)) if proxied else None
        row = by_k[chosen.k]
        config = speculative_config_for(chosen.k, str(row.method or ""), (arms_spec or {}).get(chosen.arm))
        out.append(OptimalK(
            template=tmpl, series=series, variant=variant, concurrency=conc,
            best_k=chosen.k, best_arm=chosen.arm, speedup=chosen.speedup, ci_low=chosen.ci_low, ci_high=chosen.ci_high,
            per_user_tps=chosen.per_user_tps, argmax_k=argmax.k, contenders=tuple(p.k for p in contenders),
            proxy_best_k=proxy.k if proxy else None, proxy_speedup=proxy.proxy_speedup if proxy else math.nan,
            speculative_config=config, points=tuple(points),
        ))
    return out


# ---- acceptance vs depth and vs context --------------------------------------------------


@dataclass(frozen=True)
class DepthCurve:
    template: str
    series: str
    variant: str
    concurrency: int
    eagle_version: str
    ks: tuple[int, ...]
    al: tuple[float, ...]
    conditional: tuple[tuple[float, ...], ...]  # per k: the rate at positions 1..k
    joint: tuple[tuple[float, ...], ...]


def depth_curves(rows: list[SummaryRow]) -> list[DepthCurve]:
    """AL vs k and per-position acceptance, per series, variant and concurrency."""
    groups = _series_groups(rows)
    out = []
    for key in _sorted_keys(groups, rows):
        by_k = groups[key]
        if len(by_k) < 2:
            continue
        ks = sorted(by_k)
        rs = [by_k[k] for k in ks]
        template, series, variant, concurrency = key
        out.append(DepthCurve(
            template=template, series=series, variant=variant, concurrency=concurrency,
            eagle_version=str(rs[0].eagle_version or ""), ks=tuple(ks), al=tuple(al_of(r)[0] for r in rs),
            conditional=tuple(tuple(conditional_of(r)) for r in rs),
            joint=tuple(tuple(as_list(r.per_position_joint)) for r in rs),
        ))
    return out


@dataclass(frozen=True)
class ContextCurve:
    arm: str
    series: str
    k: int | None
    concurrency: int
    eagle_version: str
    variants: tuple[str, ...]
    tokens: tuple[int, ...]
    al: tuple[float, ...]
    speedup: tuple[float, ...]


def context_curves(rows: list[SummaryRow], variant_tokens: dict[str, int]) -> list[ContextCurve]:
    """AL vs context bucket per speculative arm and concurrency (two or more buckets)."""
    groups: dict[tuple[str, int], list[SummaryRow]] = {}
    for r in usable(rows):
        if may_speculate(r) and variant_of(r) in variant_tokens:
            groups.setdefault((str(r.arm), int(num(r.concurrency))), []).append(r)
    out = []
    for (arm, conc), rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: variant_tokens[variant_of(r)])
        if len(rs) < 2:
            continue
        out.append(ContextCurve(
            arm=arm, series=series_of(rs[0]), k=k_of(rs[0]), concurrency=conc,
            eagle_version=str(rs[0].eagle_version or ""),
            variants=tuple(variant_of(r) for r in rs),
            tokens=tuple(variant_tokens[variant_of(r)] for r in rs),
            al=tuple(al_of(r)[0] for r in rs), speedup=tuple(headline(r)[0] for r in rs),
        ))
    return out
