"""Latency distributions of a point (mean, std, percentiles) and goodput against SLOs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from speedbench.metrics.registry import DEFAULT_PERCENTILES, percentile_tag
from speedbench.metrics.numbers import finite, mean, pct, std

SLO_KEYS = ("ttft_ms", "tpot_ms", "e2el_ms")


def latency_stats(ok: pd.DataFrame, itl: tuple[np.ndarray, np.ndarray],
                  percentiles: Iterable[float] = DEFAULT_PERCENTILES) -> dict[str, float]:
    """Mean, std and percentiles of each LATENCY_METRICS over ok requests (ms).

    TTFT, TPOT and E2E are per request; ITL values are pooled over all requests' gaps
    (per token: token-weighted, see :func:`speedbench.metrics.itl_values`; per chunk:
    one per gap).
    """
    has = len(ok) > 0
    values = {
        "ttft_ms": ok["ttft_ms"] if has else [],
        "tpot_ms": ok["tpot_ms"] if has else [],
        "itl_token_ms": itl[1],
        "itl_chunk_ms": itl[0],
        "e2e_ms": ok["e2e_s"] * 1000.0 if has else [],
    }
    out: dict[str, float] = {}
    for name, v in values.items():
        a = finite(v)
        out[f"{name}_mean"] = mean(a)
        out[f"{name}_std"] = std(a)
        for p in percentiles:
            out[f"{name}_{percentile_tag(p)}"] = pct(a, p)
    return out


def good_requests(ok: pd.DataFrame, slo: dict[str, Any] | None) -> int | None:
    """Ok requests that meet every SLO given (ms): ``ttft_ms``, ``tpot_ms`` (a request
    with fewer than 2 tokens has TPOT 0 here, as in vLLM's goodput), ``e2el_ms``
    (end-to-end). None when no SLO is given."""
    slo = {k: v for k, v in (slo or {}).items() if k in SLO_KEYS and v is not None}
    if not slo:
        return None
    if len(ok) == 0:
        return 0
    good = np.ones(len(ok), dtype=bool)
    if "ttft_ms" in slo:
        good &= (ok["ttft_ms"] <= slo["ttft_ms"]).to_numpy()  # NaN (no token) is never good
    if "tpot_ms" in slo:
        good &= (ok["tpot_ms"].fillna(0.0) <= slo["tpot_ms"]).to_numpy()
    if "e2el_ms" in slo:
        good &= (ok["e2e_s"] * 1000.0 <= slo["e2el_ms"]).to_numpy()
    return int(good.sum())
