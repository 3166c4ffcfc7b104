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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from speedbench.metrics.headline import headline_of
from speedbench.records import RequestRecord
from speedbench.results.files import atomic_write, atomic_write_with, finite
from speedbench.metrics.stored_outputs import OutputsEntry
from speedbench.results.output_summary import OUTPUT_COLUMNS, output_columns, summary_outputs

if TYPE_CHECKING:
    import pandas as pd


# A table's speedup columns (summary.csv, `export --format csv|parquet`): the headline first,
# under the plain name a reader reaches for, then each clock's figures under its clock's name.
# summary.json keeps the registry's keys (speedup_mean is the client's there, as ever).
HEADLINE_COLUMNS = {"speedup_headline_mean": "speedup", "speedup_headline_clock": "speedup_clock",
                    "speedup_headline_ci_low": "speedup_ci_low", "speedup_headline_ci_high": "speedup_ci_high",
                    "speedup_headline_reason": "speedup_clock_reason"}
CLIENT_COLUMNS = {k: "speedup_client_" + k.removeprefix("speedup_")
                  for k in ("speedup_mean", "speedup_median", "speedup_ci_low", "speedup_ci_high", "speedup_pairs",
                            "speedup_mean_all", "speedup_by_repeat", "speedup_between_sd", "speedup_lag_bound")}
Outputs = Callable[[str, int, str], OutputsEntry]  # (arm, concurrency, variant) -> outputs entry (Run.outputs_of)


def table_rows(rows: list[dict[str, Any]], outputs: Outputs | None = None) -> list[dict[str, Any]]:
    """Summary (or per-category) rows as the table files hold them: the headline's columns
    where the speedup columns begin, the client's renamed, every other key as it is, in
    first-seen order. A row without headline keys (an old folder's) has them derived.
    ``outputs`` (``Run.outputs_of``; point rows only): each point's outputs verdict, its
    identical fraction and reason, right after the headline's columns (same outputs or no
    speedup: the two are read together); "not checked" / "not recorded" for an old folder."""
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    if not any(k in CLIENT_COLUMNS for k in keys):
        return rows  # no speedup here to lead with (nor for a verdict to qualify)
    extra = list(OUTPUT_COLUMNS) if outputs is not None else []
    first = min(i for i, k in enumerate(keys) if k in CLIENT_COLUMNS or k in HEADLINE_COLUMNS)
    rest = [k for k in keys if k not in HEADLINE_COLUMNS and k not in extra]
    order = rest[:first] + list(HEADLINE_COLUMNS) + extra + rest[first:]
    out = []
    for r in rows:
        full = r if "speedup_headline_clock" in r else {**r, **headline_of(r)}
        full = {**full, **_outputs_of(r, outputs)}
        out.append({_column(k): full.get(k) for k in order if k in full})
    return out


def _outputs_of(row: dict[str, Any], outputs: Outputs | None) -> dict[str, Any]:
    if outputs is None:
        return {}
    return output_columns(outputs(str(row.get("arm")), int(row.get("concurrency") or 0), str(row.get("variant") or "")))


def _column(key: str) -> str:
    return HEADLINE_COLUMNS.get(key) or CLIENT_COLUMNS.get(key) or key


def write_summary_csv(path: Path, rows: list[dict[str, Any]], fsync: bool = False,
                      summary: dict[str, Any] | None = None) -> Path:
    """Columns: every key of every row, in first-seen order, the speedups named and ordered
    by :func:`table_rows`, each point's outputs verdict beside them (from ``summary``'s
    ``outputs`` block); lists and dicts as JSON."""
    rows = table_rows(rows, summary_outputs(summary or {}))
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
