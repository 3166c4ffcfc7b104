"""Pure functions: request records -> per-request table -> summary rows.

Nothing here does I/O or reads a clock. Every metric is defined in docs/metrics.md
(name, unit, direction, formula) and declared in speedbench/metrics/registry.py (key,
label, direction); this package is the executable version.

- table.py       records -> one row per request (times, tokens, spec counters); pooled ITL
- latency.py     mean / std / percentiles of TTFT, TPOT, ITL, E2E; goodput against SLOs
- acceptance.py  AL (per-request counters, Prometheus), histogram, per-position rates, overcount
- speedup.py     paired per-user TPS ratios with bootstrap CIs; SPEED-Bench's proxy speedup
- rows.py        summarize(): one summary row per point (ArmInfo, PointInfo, status, warnings)
- breakdown.py   per-category and per-prompt rows
- numbers.py     NaN-skipping mean / percentile / std, ratios, numpy -> Python scalars

Everything other modules use is importable from ``speedbench.metrics``.
"""

from speedbench.metrics.registry import (
    DEFAULT_PERCENTILES,
    LATENCY_METRICS,
    ROW_KEYS,
    latency_keys,
    percentile_tag,
    row_keys,
)
from speedbench.metrics.acceptance import (
    AL_AGREE_TOLERANCE,
    acceptance,
    al_from_counters,
    overcount_stats,
    per_position_rates,
    sum_histograms,
)
from speedbench.metrics.breakdown import CATEGORY_KEYS, PROMPT_KEYS, category_rows, prompt_rows
from speedbench.metrics.latency import SLO_KEYS, good_requests, latency_stats
from speedbench.metrics.numbers import NAN
from speedbench.metrics.rows import ArmInfo, PointInfo, summarize
from speedbench.metrics.speedup import PAIR_KEYS, proxy_speedup, speedup
from speedbench.metrics.table import itl_values, request_table

__all__ = [
    "AL_AGREE_TOLERANCE", "CATEGORY_KEYS", "DEFAULT_PERCENTILES", "LATENCY_METRICS", "NAN", "PAIR_KEYS",
    "PROMPT_KEYS", "ROW_KEYS", "SLO_KEYS", "ArmInfo", "PointInfo", "acceptance", "al_from_counters",
    "category_rows", "good_requests", "itl_values", "latency_keys", "latency_stats", "overcount_stats",
    "per_position_rates", "percentile_tag", "prompt_rows", "proxy_speedup", "request_table", "row_keys",
    "speedup", "sum_histograms", "summarize",
]
