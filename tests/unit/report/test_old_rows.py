"""Reports read summary rows by attribute; a row from an old run folder lacks keys added
since, and a point one run lacks is a row of Nones: both print as dashes, never fail."""

from __future__ import annotations

import math

from speedbench.metrics.registry import SummaryRow
from speedbench.report import breakdowns, significance
from speedbench.report.gate import metric_value
from speedbench.results.run import Run

OLD_ROW = {"arm": "eagle3", "concurrency": 1, "variant": "", "speculative": True, "status": "ok"}


def test_an_old_row_without_counts_or_latency_block_prints_dashes():
    run = Run(None, {"rows": [OLD_ROW]})
    assert breakdowns.detail_rows(run)[0][3] == "–/–"  # n_ok / n_requests were not stored
    assert breakdowns.latency_table(run)[1] == []  # no latency block: no rows, not a table of dashes


def test_a_missing_point_reads_as_a_row_of_nones():
    row = SummaryRow.from_dict(OLD_ROW)
    assert math.isnan(metric_value(row, "speedup"))
    assert math.isnan(significance.stored_diff(row, SummaryRow()).value)
