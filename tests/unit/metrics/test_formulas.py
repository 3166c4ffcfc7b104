"""Each row key's formula, found through its registry key; a row built in one pass."""

from __future__ import annotations

import math

import numpy as np
import pytest

from speedbench.metrics.formulas import FORMULAS, PointData, build_row, missing_formulas
from speedbench.metrics.inputs import ArmInfo, PointInfo
from speedbench.metrics.registry import ROW_KEYS, row_keys
from speedbench.stopping.looks import MAX_PROMPTS, REACHED
from speedbench.metrics.summary_row import SummaryRow
from speedbench.metrics.table import request_table
from speedbench.records import PointKey


def test_every_registered_key_has_a_formula_and_every_formula_a_key():
    assert missing_formulas() == []
    assert set(FORMULAS) == set(ROW_KEYS)


def _empty_point(key: PointKey, stopped=(), predict=None) -> PointData:
    empty = np.array([])
    return PointData(key, request_table([]), (empty, empty), ArmInfo(), PointInfo(wall_s=1.0), None, (50.0, 99.0),
                     stopped=list(stopped), predict=predict)


def test_a_stopped_point_takes_the_look_level_interval_when_built():
    stopping = [{"arm": "spec", "concurrency": 4, "variant": "", "reason": REACHED, "prompts": 64, "look": 3,
                 "n_looks": 5, "level": 0.99, "ci_low": 1.93, "ci_high": 2.06},
                {"arm": "spec", "concurrency": 4, "variant": "", "reason": MAX_PROMPTS, "prompts": 128, "look": 5,
                 "n_looks": 5, "level": 0.99, "ci_low": 1.9, "ci_high": math.nan}]
    row = build_row(_empty_point(PointKey("spec", 4), stopping))
    assert (row["speedup_ci_low"], row["speedup_ci_high"]) == (1.9, 2.06)
    assert "after 64 prompts" in row["warnings"][-1] and "Bonferroni" in row["warnings"][-1]
    plain = build_row(_empty_point(PointKey("base", 4)))
    assert math.isnan(plain["speedup_ci_low"]) and not any("sequential" in w for w in plain["warnings"])


def test_predictions_come_from_the_arms_calibration_at_the_rows_al():
    seen = []

    def predict(key, al):
        seen.append((key, al))
        return (1.5, 1.4, 1.6)

    row = build_row(_empty_point(PointKey("spec", 2, "v"), predict=predict))
    assert (row["speedup_predicted"], row["speedup_predicted_ci_low"], row["speedup_predicted_ci_high"]) == (
        1.5, 1.4, 1.6)
    assert seen[0][0] == PointKey("spec", 2, "v") and math.isnan(seen[0][1])


def test_a_summary_row_has_the_registry_keys_in_order_and_refuses_others():
    row = build_row(_empty_point(PointKey("a", 1)))
    assert tuple(row) == row_keys((50.0, 99.0)) and row.key == PointKey("a", 1)
    assert SummaryRow.from_dict(row.to_dict()) == row
    with pytest.raises(KeyError):
        row["speedup_ci_lo"]  # a typo is an error, not an empty cell
    with pytest.raises(KeyError):
        SummaryRow({"speedup_ci_lo": 1.0})
