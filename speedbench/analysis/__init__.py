"""Studies over finished runs' summary rows (pure; report/ renders them).

- drift.py  drift analysis: optimal k, depth/context curves, EAGLE 3 vs 3.1
- cells.py  summary-row cell readers (num, as_list): summary.json nulls, CSV lists
"""
