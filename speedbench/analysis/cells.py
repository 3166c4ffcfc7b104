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
