"""Summary rows: one per (arm, concurrency, variant), from request records.

Inputs of :func:`summarize`:

* ``records``: ``RequestRecord`` list of the whole run (warmup records are dropped here);
  a ``Requests`` (metrics/table.py) shares its request table with the run's other readers.
* ``prom_deltas``: ``{(arm, concurrency, variant): SpecCounters}``, the Prometheus
  counter deltas around each point (summed over repeats; ideally scraped after warmup).
* ``baseline_arm``: the arm speedups divide by (None: no speedups).
* ``arm_info``: ``{arm: ArmInfo}`` (plain dicts with the same keys are accepted).
* ``points``: ``{(arm, concurrency, variant): PointInfo}`` (dicts accepted), one per
  point that was attempted, including points of arms that never started (so failed
  points still get a row). ``PointInfo.from_point`` reads a point's marks (its rounds
  folded by ``fold_rounds``, as ``RunDir.all_points`` gives them);
  ``PointInfo.from_results([PointResult, ...])`` folds in-memory rounds the same way.
  Without a PointInfo, wall time comes from the records and the status from the error
  count.
* ``extra``: :class:`RowExtras`, what the run adds: sequential stopping's entries (a
  stopped point's speedup intervals are widened to their look-level ones) and the
  calibrations' predictions (results/summary.py builds them).

Each key's computation is declared with it (metrics/row_*.py); metrics/formulas.py builds a row in one pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pandas as pd

from speedbench.client.scrape import SpecCounters
from speedbench.metrics.formulas import Pairing, PointData, RowExtras, build_row
from speedbench.metrics.inputs import ArmInfo, PointInfo, coerce
from speedbench.metrics.registry import DEFAULT_PERCENTILES
from speedbench.metrics.speedup import pooled_spreads
from speedbench.metrics.registry import SummaryRow
from speedbench.metrics.table import Requests, itl_values
from speedbench.records import PointKey, RequestRecord, wall_s

__all__ = ["ArmInfo", "PointInfo", "RowExtras", "summarize", "summary_rows"]


def summarize(
    records: Iterable[RequestRecord],
    prom_deltas: dict[PointKey, SpecCounters] | None,
    baseline_arm: str | None,
    arm_info: dict[str, Any],
    points: dict[PointKey, Any] | None = None,
    percentiles: Iterable[float] = DEFAULT_PERCENTILES,
    slo: dict[str, Any] | None = None,
    *,
    extra: RowExtras | None = None,
) -> list[dict[str, Any]]:
    """One row per (arm, concurrency, variant) with exactly ``row_keys(percentiles)``,
    as summary.json stores it. ``slo``: goodput thresholds in ms (``ttft_ms``,
    ``tpot_ms``, ``e2el_ms``)."""
    return [r.to_dict() for r in summary_rows(records, prom_deltas, baseline_arm, arm_info, points, percentiles,
                                              slo, extra=extra)]


def summary_rows(
    records: Iterable[RequestRecord],
    prom_deltas: dict[PointKey, SpecCounters] | None,
    baseline_arm: str | None,
    arm_info: dict[str, Any],
    points: dict[PointKey, Any] | None = None,
    percentiles: Iterable[float] = DEFAULT_PERCENTILES,
    slo: dict[str, Any] | None = None,
    *,
    extra: RowExtras | None = None,
) -> list[SummaryRow]:
    """:func:`summarize`'s rows as typed objects."""
    requests = Requests.of(records)
    measured = [r for r in requests if not r.warmup]
    df = requests.where(lambda t: ~t["warmup"])
    by_key = {PointKey(a, int(c), v): g for (a, c, v), g in df.groupby(["arm", "concurrency", "variant"], sort=False)}
    all_recs, ok_recs = _records_by_point(measured)
    points = points or {}
    keys = _point_keys(list(by_key), points, arm_info)
    groups = {k: by_key.get(k, df.iloc[0:0]) for k in keys}
    pairings = _pairings(groups, baseline_arm)
    stopped: dict[tuple, list[dict[str, Any]]] = {}
    extra = extra or RowExtras()
    for s in extra.stopping:
        stopped.setdefault((s["arm"], s["concurrency"], s["variant"]), []).append(s)
    rows = []
    for k in keys:
        point = coerce(PointInfo, points.get(k))
        if not point.wall_s:  # without a PointInfo, wall time comes from the records
            point = replace(point, wall_s=wall_s(all_recs.get(k, [])))
        data = PointData(k, groups[k], itl_values(ok_recs.get(k, [])), coerce(ArmInfo, arm_info.get(k[0])), point,
                         (prom_deltas or {}).get(k), tuple(percentiles), slo, pairings.get(k),
                         stopped.get((k[0], k[1], k[2] or ""), []), extra.predict)
        rows.append(build_row(data))
    return rows


def _records_by_point(measured: list[RequestRecord]) -> tuple[dict[PointKey, list[RequestRecord]],
                                                                dict[PointKey, list[RequestRecord]]]:
    """Each point's measured records: all of them, and those without an error."""
    ok_recs: dict[PointKey, list[RequestRecord]] = {}
    all_recs: dict[PointKey, list[RequestRecord]] = {}
    for r in measured:
        all_recs.setdefault(PointKey(r.arm, r.concurrency, r.variant), []).append(r)
        if r.error is None:
            ok_recs.setdefault(PointKey(r.arm, r.concurrency, r.variant), []).append(r)
    return all_recs, ok_recs


def _point_keys(measured: list[PointKey], points: dict[PointKey, Any], arm_info: dict[str, Any]) -> list[PointKey]:
    """Every point that has records or was attempted, in the scenario's arm order, then by
    arm name and concurrency."""
    # the points' own keys carry the point's load (workload, rate); the records' do not
    loaded = {k: k for k in points if isinstance(k, PointKey)}
    keys = [loaded.get(k, k) for k in dict.fromkeys([*measured, *(PointKey(a, int(c), v) for a, c, v in points)])]
    arm_order = {a: i for i, a in enumerate(arm_info)}
    keys.sort(key=lambda k: (arm_order.get(k[0], len(arm_order)), k[0], k[1]))
    return keys


def _pairings(groups: dict[PointKey, pd.DataFrame], baseline_arm: str | None) -> dict[PointKey, Pairing]:
    """Each point with measured requests and the baseline's at its concurrency and variant
    (with measured requests too), and the between-round spread pooled over the arm pair."""
    if baseline_arm is None:
        return {}
    pairs = {k: (groups[k][groups[k]["ok"]], groups[bk][groups[bk]["ok"]])
             for k in groups if k[0] != baseline_arm
             and (bk := PointKey(baseline_arm, k[1], k[2])) in groups and len(groups[k]) and len(groups[bk])}
    spreads = pooled_spreads(pairs)
    out = {}
    for k, (s_ok, b_ok) in pairs.items():
        base = groups[PointKey(baseline_arm, k[1], k[2])]
        out[k] = Pairing(s_ok, b_ok, spreads[(k[0], k[2])], int(base["burst"].sum()) if len(base) else 0)
    return out
