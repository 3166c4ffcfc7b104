"""The run folder's table files, written with every summary (the write side; RunDir
calls them): summary.csv (one row per point) and records.parquet (one row per request),
both atomically. ``speedbench export`` (exports.py) reads a run and reuses them.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speedbench.records import RequestRecord
from speedbench.results.files import atomic_write, atomic_write_with, finite

if TYPE_CHECKING:
    import pandas as pd


def write_summary_csv(path: Path, rows: list[dict[str, Any]], fsync: bool = False) -> Path:
    """Columns: every key of every row, in first-seen order; lists and dicts as JSON."""
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=keys)
    w.writeheader()
    for r in rows:
        w.writerow({k: _csv_cell(r.get(k)) for k in keys})
    atomic_write(path, buf.getvalue(), fsync)
    return path


def data_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """``rows`` as a pandas table, for the csv and parquet files."""
    # function-local: pandas takes about a second to import, and the results package (loaded
    # by most commands) needs it only to write csv and parquet tables
    import pandas as pd

    return pd.DataFrame(rows)


def write_parquet(path: Path, records: list[RequestRecord], fsync: bool = False) -> Path:
    """One row per request; the spec counters flattened to ``spec_*`` columns."""
    rows = []
    for r in records:
        d = r.to_dict()
        spec = d.pop("spec") or {}
        for k in ("num_spec_steps", "num_draft_tokens", "num_accepted_tokens",
                  "acceptance_histogram", "mean_acceptance_length"):
            d[f"spec_{k}"] = spec.get(k)
        d["tags"] = json.dumps(d.get("tags") or {})  # parquet cannot store an empty struct
        d["n_output"] = r.n_output
        rows.append(d)
    df = data_frame(rows)
    atomic_write_with(path, lambda f: df.to_parquet(f, index=False), fsync)
    return path


def _csv_cell(v: Any) -> Any:
    if isinstance(v, (list, dict)):
        return json.dumps(finite(v))
    if isinstance(v, float) and not math.isfinite(v):
        return ""
    return v
