"""Reading summary-row cells: rows come from summary.json (NaN stored as null) or from
CSV (lists stored as JSON text). The one cell reader of analysis/drift.py and report/."""

from __future__ import annotations

import json
import math
from typing import Any


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


def al_of(row: dict[str, Any] | None) -> tuple[float, str]:
    """AL and where it came from: the token-weighted AL from per-request counters first,
    the Prometheus AL otherwise ("tokens" / "prometheus"; NaN and "" without either)."""
    if not row:
        return math.nan, ""
    for key, source in (("al_tokens", "tokens"), ("al_prometheus", "prometheus")):
        v = num(row.get(key))
        if math.isfinite(v):
            return v, source
    return math.nan, ""
