"""The A/A noise floor: the "speedup" of a second baseline server over the first, at each
point, as one check of the whole run.

The check asks one question of a run: did two servers of the same configuration differ
by more than the run's error bars allow, at any point? It reads several intervals at
once. At 95% each, three points that are all correct would still flag one correct run in
seven (1 - 0.95^3). So the noise floor's intervals are simultaneous over the A/A points:
each is taken at ``1 - (1 - family) / k`` for k points (Bonferroni), which keeps the
chance that a correct run fails at about ``1 - family``. Both clocks are read at that
level: they time the same requests of the same servers, so they are two readings of one
point rather than two more chances to miss (where they disagree, the chance of a false
alarm is at most twice that). The A/A arm's own rows keep their per-point 95% intervals.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from speedbench.metrics.cells import num
from speedbench.metrics.speedup import pooled_spreads, speedup
from speedbench.metrics.table import Requests
from speedbench.records import PointKey, RequestRecord

FAMILY_LEVEL = 0.95


def family_level(n_intervals: int, family: float = FAMILY_LEVEL) -> float:
    """The level of each of ``n_intervals`` intervals that hold all at once with
    probability at least ``family`` (Bonferroni)."""
    return 1.0 - (1.0 - family) / max(n_intervals, 1)


def _inside(lo: Any, hi: Any) -> bool | None:
    """Whether [lo, hi] holds 1.0; None when an end is undefined (NaN). An infinite end is
    a bound: the client's lag can leave an interval unbounded (metrics/lag.py)."""
    lo, hi = num(lo), num(hi)
    return None if math.isnan(lo) or math.isnan(hi) else bool(lo <= 1.0 <= hi)


def noise_floor(records: Iterable[RequestRecord], baseline_arm: str | None, aa_arm: str | None,
                *, family: float = FAMILY_LEVEL) -> list[dict[str, Any]]:
    """One entry per point of the A/A arm, in concurrency order: its speedup over the
    baseline from both clocks, with intervals simultaneous over the points (see the
    module text), the between-round spread pooled over the A/A pair's concurrencies as in
    the summary rows. ``contains_one``: every defined interval of the entry holds 1.0
    (None: none defined). ``records``: a ``Requests`` shares its request table."""
    if not baseline_arm or not aa_arm:
        return []
    table = Requests.of(records).where(lambda t: ~t["warmup"] & t["arm"].isin([baseline_arm, aa_arm]))
    if table.empty:
        return []
    ok = table[table["ok"]]
    pairs: dict[PointKey, tuple[pd.DataFrame, pd.DataFrame]] = {}
    for (c, v), aa in ok[ok["arm"] == aa_arm].groupby(["concurrency", "variant"], sort=True):
        base = ok[(ok["arm"] == baseline_arm) & (ok["concurrency"] == c) & (ok["variant"] == v)]
        if len(base):
            pairs[PointKey(aa_arm, int(c), str(v))] = (aa, base)
    return floor_entries(pairs, family=family)


def floor_entries(pairs: dict[PointKey, tuple[pd.DataFrame, pd.DataFrame]],
                  *, family: float = FAMILY_LEVEL) -> list[dict[str, Any]]:
    """The entries of :func:`noise_floor` from its pairs: ``{PointKey of the A/A arm: (aa ok
    rows, baseline ok rows)}`` as :func:`request_table` rows (the pair keys and both TPS
    columns), in the order given."""
    spreads = pooled_spreads(pairs)
    level = family_level(len(pairs), family)
    out = []
    for k, (aa, base) in pairs.items():
        sp = speedup(aa, base, spreads[(k.arm, k.variant)], level=level)
        client = _inside(sp["speedup_ci_low"], sp["speedup_ci_high"])
        engine = _inside(sp["speedup_engine_ci_low"], sp["speedup_engine_ci_high"])
        known = [x for x in (client, engine) if x is not None]
        out.append({"concurrency": k.concurrency, "variant": k.variant, "speedup": sp["speedup_mean"],
                    "ci_low": sp["speedup_ci_low"], "ci_high": sp["speedup_ci_high"],
                    "speedup_engine": sp["speedup_engine_mean"], "engine_ci_low": sp["speedup_engine_ci_low"],
                    "engine_ci_high": sp["speedup_engine_ci_high"], "level": level,
                    "contains_one": all(known) if known else None})
    return out
