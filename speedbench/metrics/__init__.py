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

Everything other modules use is importable from ``speedbench.metrics`` (the registry's
names from ``speedbench.metrics.registry`` only), loaded on first use: the scenario model
imports ``speedbench.metrics.registry``, which runs this file, and that must not load
pandas with every CLI start (``--help``, ``validate``, ``--dry-run``).
The functions ``acceptance`` and ``speedup`` share their names with their submodules (a
loaded submodule is an attribute of the package), so they are imported from
``speedbench.metrics.acceptance`` / ``.speedup`` only.
"""

from importlib import import_module
from typing import Any

_LAZY = {
    "AL_AGREE_TOLERANCE": "acceptance",
    "al_from_counters": "acceptance",
    "overcount_stats": "acceptance",
    "per_position_rates": "acceptance",
    "sum_histograms": "acceptance",
    "CATEGORY_KEYS": "breakdown",
    "PROMPT_KEYS": "breakdown",
    "category_rows": "breakdown",
    "prompt_rows": "breakdown",
    "SLO_KEYS": "latency",
    "good_requests": "latency",
    "latency_stats": "latency",
    "ArmInfo": "rows",
    "PointInfo": "rows",
    "summarize": "rows",
    "PAIR_KEYS": "speedup",
    "proxy_speedup": "speedup",
    "itl_values": "table",
    "request_table": "table",
}

__all__ = [
    "AL_AGREE_TOLERANCE", "CATEGORY_KEYS", "PAIR_KEYS", "PROMPT_KEYS", "SLO_KEYS", "ArmInfo", "PointInfo",
    "al_from_counters", "category_rows", "good_requests", "itl_values", "latency_stats", "overcount_stats",
    "per_position_rates", "prompt_rows", "proxy_speedup", "request_table", "sum_histograms", "summarize",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"speedbench.metrics.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'speedbench.metrics' has no attribute {name!r}")
