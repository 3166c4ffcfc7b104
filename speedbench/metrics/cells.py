"""Reading summary-row cells: rows come from summary.json (NaN stored as null) or from
CSV (lists stored as JSON text). The one cell reader of analysis/drift.py and report/."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Protocol


class HasCells(Protocol):
    """A summary row (metrics/registry.py's SummaryRow): its cells by summary.json key."""

    def cell(self, key: str) -> Any: ...


# What the readers below take: a SummaryRow, or a plain dict while a row is being built
# (metrics/formulas.py) or when an old folder's row is upgraded (metrics/headline.py).
Cells = HasCells | Mapping[str, Any]


def cell(row: Cells, key: str) -> Any:
    """One cell of ``row`` by its summary.json key (None when it has none)."""
    return row.get(key) if isinstance(row, Mapping) else row.cell(key)


def num(x: Any) -> float:
    """Summary cell -> float; None, "", booleans and non-numbers are NaN (summary.json
    stores NaN as null). The one cell reader: report/ uses it too."""
    if isinstance(x, bool) or x is None:
        return math.nan
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def as_list(x: Any) -> list[float]:
    if isinstance(x, str):
        try:
            x = json.loads(x) if x.strip() else []
        except ValueError:
            return []
    return [num(v) for v in x] if isinstance(x, (list, tuple)) else []


def al_of(row: Cells | None) -> tuple[float, str]:
    """AL and where it came from: the token-weighted AL from per-request counters first,
    the Prometheus AL otherwise ("tokens" / "prometheus"; NaN and "" without either)."""
    if row is None:
        return math.nan, ""
    for key, source in (("al_tokens", "tokens"), ("al_prometheus", "prometheus")):
        v = num(cell(row, key))
        if math.isfinite(v):
            return v, source
    return math.nan, ""


def pool_by_n_ok(values: Iterable[tuple[Any, Any]], floor: float = 1.0) -> float:
    """The mean of (value, n_ok) pairs weighted by each point's successful requests: how
    acceptance is pooled over concurrency levels (it does not depend on the batch).
    Non-finite values are skipped; a point without a positive n_ok weighs ``floor``
    (0: it does not count). NaN when nothing counts."""
    total = weight = 0.0
    for v, n_ok in values:
        x, n = num(v), num(n_ok)
        w = n if n > 0 else floor
        if math.isfinite(x) and w > 0:
            total, weight = total + x * w, weight + w
    return total / weight if weight else math.nan
