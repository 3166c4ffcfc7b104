"""Small numeric helpers shared by the metric modules: NaN-skipping statistics and ratios."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

NAN = math.nan


def finite(s: Any) -> np.ndarray:
    """The finite values of a series or sequence, as a float array."""
    a = np.asarray(s, dtype=float)
    return a[np.isfinite(a)]


def mean(s: Any) -> float:
    a = finite(s)
    return float(a.mean()) if len(a) else NAN


def pct(s: Any, q: float) -> float:
    a = finite(s)
    return float(np.percentile(a, q)) if len(a) else NAN


def std(s: Any) -> float:
    # Population std (ddof=0), as `vllm bench serve` reports std_*_ms.
    a = finite(s)
    return float(a.std()) if len(a) else NAN


def ratio(a: float, b: float) -> float:
    return a / b if b and math.isfinite(a) and math.isfinite(b) else NAN


def plain(v: Any) -> Any:
    """numpy scalars -> Python scalars so rows serialise as JSON without surprises."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v
