"""Pure functions: request records -> per-request table -> summary rows.

Nothing here does I/O or reads a clock. Every metric is defined in docs/metrics.md
(name, unit, direction, formula) and declared once, by subject, in speedbench/metrics/row_*.py
(key, unit, direction, label, what it uses, its computation), gathered by registry.py; this
package is the executable version.

- table.py        records -> one row per request (times, tokens, spec counters); pooled ITL
- latency.py      mean / std / percentiles of TTFT, TPOT, ITL, E2E; goodput against SLOs
- acceptance.py   AL (per-request counters, Prometheus), histogram, per-position rates, overcount
- speedup.py      paired per-user TPS ratios with bootstrap CIs; SPEED-Bench's proxy speedup
- formulas.py     the point's data and the blocks metrics share; one row built in one pass, in the
                  order the declarations' uses give
- row_*.py        the summary row's columns by subject (point, speedup, acceptance, notes): each
                  field declares one metric with its computation
- registry.py     SummaryRow, a row as a frozen typed object whose fields are those columns
- inputs.py       ArmInfo, PointInfo: what a row knows besides its records
- rows.py         summarize(): one summary row per point
- breakdown.py    per-category and per-prompt rows
- numbers.py      NaN-skipping mean / percentile / std, ratios, numpy -> Python scalars

This file imports nothing: import the submodules (``speedbench.metrics.rows`` etc.). The
scenario model imports ``speedbench.metrics.registry``, which runs this file, and that
must not load pandas with every CLI start (``--help``, ``validate``, ``--dry-run``).
"""
