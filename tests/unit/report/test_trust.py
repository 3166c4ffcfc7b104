"""A confounded point in the views and the gate: marked beside its figure, named with
both arms' conditions before any speedup, and read by speedup gates as missing data."""

from __future__ import annotations

from tests.helpers.runfactory import make_run

from speedbench.metrics.conditions import conditions_block
from speedbench.report.gate import evaluate_gates, exit_code
from speedbench.report.header import noise_lines
from speedbench.report.headlines import arm_headlines
from speedbench.report.tables import speedup_tables
from speedbench.results.loader import load_run
from speedbench.scenario import GateSpec


def _with_conditions(tmp_path, hog_at: tuple[str, int] | None):
    """A run whose every round recorded its conditions: quiet, except a hog that took one
    of 2 CPUs while ``hog_at``'s point ran."""
    rd = make_run(tmp_path)
    rounds = rd.point_rounds()
    for (key, _), mark in rounds.items():
        other = 1.0 if hog_at == (key.arm, key.concurrency) else 0.03
        mark["conditions"] = {"cpus": 2, "other_cores": other, "steal_share": 0.0, "engine_cores": 0.9,
                              "host_busy_cores": 1.98, "load_1m": [1.1, 1.3], "not_checked": []}
    run = load_run(rd.path)
    run.summary["conditions"] = conditions_block(rounds, "baseline")
    return run


def test_a_confounded_point_is_marked_named_and_fails_its_speedup_gate(tmp_path):
    run = _with_conditions(tmp_path, ("eagle3", 1))
    cells = {(t.arm, r.concurrency): r.speedup_cell for t in speedup_tables(run) for r in t.rows}
    assert cells[("eagle3", 1)].endswith("CONFOUNDED")
    assert not cells[("eagle3", 4)].endswith("CONFOUNDED") and not cells[("eagle3.1", 1)].endswith("CONFOUNDED")
    named = [ln for ln in noise_lines(run) if ln.startswith("CONFOUNDED")]
    assert len(named) == 1 and "eagle3 c=1" in named[0] and "left 1.00 CPUs" in named[0] and "vs 1.97" in named[0]
    assert "arm: 1.00 of 2 CPUs left" in named[0] and "baseline: 1.97 of 2 CPUs left" in named[0]
    assert [h.startswith("eagle3 (") for h in arm_headlines(run) if "CONFOUNDED" in h] == [True]
    results = evaluate_gates(run, [GateSpec(metric="speedup", arm="eagle3", min=1.0),
                                   GateSpec(metric="error_rate", max=0.0)])
    failed = [r for r in results if r.status == "fail"]
    assert [(r.gate.metric, r.concurrency) for r in failed] == [("speedup", 1)]
    assert failed[0].message.startswith("confounded, counted as missing data")
    assert exit_code(results) == 1


def test_quiet_conditions_mark_nothing_and_say_what_was_checked(tmp_path):
    run = _with_conditions(tmp_path, None)
    assert not any("CONFOUNDED" in r.speedup_cell for t in speedup_tables(run) for r in t.rows)
    lines = noise_lines(run)
    assert any(ln.startswith("Conditions checked between arms: the CPUs left to the engine") for ln in lines)
    assert exit_code(evaluate_gates(run, [GateSpec(metric="speedup", arm="eagle3", min=1.0)])) == 0


def test_compare_marks_a_confounded_point(tmp_path, capsys):
    from speedbench.report.compare import compare_arms

    run = _with_conditions(tmp_path, ("eagle3", 1))
    rows = {r[0]: r for r in compare_arms(run, "eagle3", "eagle3.1").sections[0].rows}
    assert rows["1"][1].endswith("CONFOUNDED") and not rows["1"][2].endswith("CONFOUNDED")
    assert not rows["4"][1].endswith("CONFOUNDED")


def test_a_night_that_cannot_vouch_for_a_speedup_is_missing_from_its_series(tmp_path):
    from speedbench.report.nightly import _Collector

    col = _Collector("cpu_tiny")
    col.run(0, _with_conditions(tmp_path, ("eagle3", 1)))
    speedups = {(arm, point) for (_, arm, metric, point) in col.series if metric == "speedup"}
    assert ("eagle3", "c=4") in speedups and ("eagle3", "c=1") not in speedups
    assert ("eagle3", "c=1") in {(arm, point) for (_, arm, metric, point) in col.series if metric == "per-user TPS"}
