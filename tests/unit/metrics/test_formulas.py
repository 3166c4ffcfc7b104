"""Each row key's computation, declared with it; a row built in one pass, in the order the
declarations' uses give; a use nothing declares is caught when the declarations are read."""

from __future__ import annotations

import math

import numpy as np
import pytest

from speedbench.metrics.declare import DeclarationError, Metric, computation_order
from speedbench.metrics.formulas import INPUTS, ORDER, PointData, _widen, build_row
from speedbench.metrics.inputs import ArmInfo, PointInfo
from speedbench.metrics.registry import ROW_KEYS, ROW_METRICS, row_keys
from speedbench.stopping.looks import MAX_PROMPTS, REACHED
from speedbench.metrics.registry import SummaryRow
from speedbench.metrics.table import request_table
from speedbench.records import PointKey


def test_every_declared_key_is_computed_once_each_after_the_row_keys_it_uses():
    assert sorted(m.key for m in ORDER) == sorted(ROW_KEYS) and all(m.compute is not None for m in ORDER)
    position = {m.key: i for i, m in enumerate(ORDER)}
    for m in ORDER:
        assert all(position[u] < position[m.key] for u in m.uses if u in position), m.key
    # the uses do order it: the warnings read the AL, declared after them in the row
    assert position["al_tokens"] < position["warnings"] and position["n_errors"] < position["error_rate"]


def _metric(key: str, *uses: str) -> Metric:
    return Metric(key=key, unit="", better="", label=key, formula="", uses=uses, compute=lambda d: 0)


def test_a_metric_that_uses_an_undeclared_one_is_refused_by_name():
    declared = [*ROW_METRICS, _metric("speedup_squared", "speedup_mean", "speedup_cubed")]
    with pytest.raises(DeclarationError, match="'speedup_squared' uses 'speedup_cubed'"):
        computation_order(declared, INPUTS)
    # a request column or an input of the point is a use too; a misspelt one is not
    assert computation_order([_metric("x", "per_user_tps", "point.wall_s", "arm.method")], INPUTS)
    with pytest.raises(DeclarationError, match="'x' uses 'per_user_tsp'"):
        computation_order([_metric("x", "per_user_tsp")], INPUTS)


def test_metrics_that_use_each_other_and_one_without_a_computation_are_refused():
    with pytest.raises(DeclarationError, match="circle: a, b"):
        computation_order([_metric("a", "b"), _metric("b", "a")], INPUTS)
    with pytest.raises(DeclarationError, match="'c' declares no computation"):
        computation_order([Metric(key="c", unit="", better="", label="c", formula="")], INPUTS)


def test_the_order_follows_the_uses_not_the_declaration():
    order = computation_order([_metric("late", "early"), _metric("other"), _metric("early")], INPUTS)
    assert [m.key for m in order] == ["other", "early", "late"]


def _empty_point(key: PointKey, stopped=(), predict=None) -> PointData:
    empty = np.array([])
    return PointData(key, request_table([]), (empty, empty), ArmInfo(), PointInfo(wall_s=1.0), None, (50.0, 99.0),
                     stopped=list(stopped), predict=predict)


def _look(reason: str, low, high, estimate=2.0, prompts=64, look=3) -> dict:
    return {"arm": "spec", "concurrency": 4, "variant": "", "reason": reason, "prompts": prompts, "look": look,
            "n_looks": 5, "level": 0.99, "speedup": estimate, "ci_low": low, "ci_high": high}


def test_a_stopped_point_takes_the_look_level_interval_when_built():
    stopping = [_look(REACHED, 1.93, 2.06), _look(MAX_PROMPTS, 1.9, 2.01, prompts=128, look=5)]
    row = build_row(_empty_point(PointKey("spec", 4), stopping))
    assert (row.speedup_ci_low, row.speedup_ci_high) == (1.9, 2.06)
    assert "after 64 prompts" in row.warnings[-1] and "Bonferroni" in row.warnings[-1]
    plain = build_row(_empty_point(PointKey("base", 4)))
    assert math.isnan(plain.speedup_ci_low) and not any("sequential" in w for w in plain.warnings)


def test_a_one_sided_look_still_widens_the_low_end_and_leaves_the_high_end_unbounded():
    # a busy host's lag widened the look without bound above (stored as null): the row
    # must still take the look's low end, not keep a narrower one of its own
    row = build_row(_empty_point(PointKey("spec", 4), [_look(REACHED, 2.4259, None, estimate=2.9)]))
    assert row.speedup_ci_low == 2.4259 and math.isinf(row.speedup_ci_high)


def test_an_unbounded_look_makes_the_row_unbounded_on_both_sides():
    row = build_row(_empty_point(PointKey("spec", 4), [_look(REACHED, None, None, estimate=1.7)]))
    assert row.speedup_ci_low == 0.0 and math.isinf(row.speedup_ci_high)
    # a look with no estimate and no interval (too few pairs) widens nothing
    none = build_row(_empty_point(PointKey("spec", 4), [_look(REACHED, None, None, estimate=None)]))
    assert math.isnan(none.speedup_ci_low) and not any("sequential" in w for w in none.warnings)


def test_a_look_narrower_than_the_rows_own_interval_leaves_the_row_as_it_was():
    out = {"speedup_ci_low": 1.5, "speedup_ci_high": 2.5}
    assert _widen(out, [_look(REACHED, 1.9, 2.1)], "speedup", "ci")
    assert out == {"speedup_ci_low": 1.5, "speedup_ci_high": 2.5}
    # and the row's own unbounded end stays unbounded under a bounded look
    out = {"speedup_ci_low": 1.5, "speedup_ci_high": math.inf}
    assert _widen(out, [_look(REACHED, 1.9, 2.1)], "speedup", "ci") and math.isinf(out["speedup_ci_high"])


def test_predictions_come_from_the_arms_calibration_at_the_rows_al():
    seen = []

    def predict(key, al):
        seen.append((key, al))
        return (1.5, 1.4, 1.6)

    row = build_row(_empty_point(PointKey("spec", 2, "v"), predict=predict))
    assert (row.speedup_predicted, row.speedup_predicted_ci_low, row.speedup_predicted_ci_high) == (
        1.5, 1.4, 1.6)
    assert seen[0][0] == PointKey("spec", 2, "v") and math.isnan(seen[0][1])


def test_a_summary_row_has_the_registry_keys_in_order_and_refuses_others():
    row = build_row(_empty_point(PointKey("a", 1)))
    assert tuple(row.to_dict()) == row_keys((50.0, 99.0)) and row.key == PointKey("a", 1)
    assert SummaryRow.from_dict(row.to_dict()) == row
    assert row.n_ok == 0 and row.cell("ttft_ms_p99") is row.more["ttft_ms_p99"]
    with pytest.raises(KeyError):
        row.cell("speedup_ci_lo")  # a typo is an error, not an empty cell
    with pytest.raises(TypeError):
        SummaryRow(speedup_ci_lo=1.0)  # type: ignore[call-arg]


def test_an_old_folders_row_keeps_its_keys_and_their_order():
    old = {"arm": "a", "concurrency": 1, "variant": "", "speedup_mean": None, "ttft_ms_p50": 3.0,
           "speedup_headline_clock": ""}
    row = SummaryRow.from_dict(old)
    assert list(row.to_dict().items()) == list(old.items())
    assert row.speedup_lag_bound is None and row.cell("ttft_ms_p50") == 3.0
