"""Controls that check the run: an impossible result is called, a possible one is not,
and the gate and the report follow (metrics/controls.py, report/trust.py)."""

from __future__ import annotations

import copy

from tests.helpers.runfactory import DEFAULT_ARMS, make_run

from speedbench.metrics import controls
from speedbench.metrics.stored_blocks import Controls
from speedbench.report.gate import evaluate_gates, exit_code
from speedbench.report.headlines import arm_headlines
from speedbench.report.header import noise_lines
from speedbench.results.loader import load_run
from speedbench.scenario import GateSpec

SELF = {"name": "self-draft", "al": 4.0, "draft": "tiny/target"}  # the draft is the target: a self-draft


def _run(tmp_path, self_speedup: float, untrained: float = 0.7, floor=None):
    arms = copy.deepcopy(DEFAULT_ARMS) + [
        {**SELF, "speedup": self_speedup},
        {"name": "untrained", "al": 1.0, "draft": "org/random", "speedup": untrained}]
    rd = make_run(tmp_path, arms=arms, noise=0.01)
    run = load_run(rd.path)
    scenario = copy.deepcopy(run.scenario)
    scenario["arms"][-1]["control"] = "untrained"
    scenario["arms"][-2]["speculative_config"]["method"] = "draft_model"  # the target drafting for itself
    run.summary["controls"] = controls.controls_block(scenario, run.rows, floor or [], "baseline-aa" if floor else None)
    return run


def test_a_self_draft_faster_than_the_target_fails_the_controls(tmp_path):
    run = _run(tmp_path, self_speedup=2.55)
    failed = Controls.from_dict(run.summary["controls"]).failed_lines()
    assert len(failed) == 3 and all("self-draft self-draft at c=" in f for f in failed)
    assert "cannot make it faster" in failed[0]
    results = evaluate_gates(run, [GateSpec(metric="error_rate", max=0.0)])
    assert exit_code(results) == 1 and any("controls failed" in r.message for r in results)
    assert all(h.startswith("CONTROLS FAILED: ") for h in arm_headlines(run))
    assert noise_lines(run)[0].startswith("CONTROLS FAILED")


def test_possible_controls_stay_quiet(tmp_path):
    run = _run(tmp_path, self_speedup=0.8)
    block = run.summary["controls"]
    assert block["failed"] == [] and {p["control"] for p in block["present"]} == {"self_draft", "untrained"}
    assert exit_code(evaluate_gates(run, [GateSpec(metric="error_rate", max=0.0)])) == 0
    assert not any(h.startswith("CONTROLS FAILED") for h in arm_headlines(run))
    assert noise_lines(run)[0].startswith("Controls: self-draft (self-draft), untrained (untrained draft)")


def test_an_untrained_draft_that_gains_fails_the_controls(tmp_path):
    run = _run(tmp_path, self_speedup=0.8, untrained=1.4)
    assert [f["arm"] for f in run.summary["controls"]["failed"]] == ["untrained"] * 3


def test_an_aa_interval_without_one_fails_the_controls(tmp_path):
    floor = [{"concurrency": 1, "variant": "", "speedup": 1.0, "ci_low": 0.95, "ci_high": 1.05,
              "speedup_engine": 1.3, "engine_ci_low": 1.2, "engine_ci_high": 1.4, "level": 0.983,
              "contains_one": False}]
    run = _run(tmp_path, self_speedup=0.8, floor=floor)
    (f,) = run.summary["controls"]["failed"]
    assert f["control"] == "aa" and "engine 1.30x [1.20, 1.40] excludes 1.00x at 98.3%" in f["why"]


def test_a_run_without_controls_says_so(tmp_path):
    run = load_run(make_run(tmp_path).path)
    run.summary["controls"] = controls.controls_block(run.scenario, run.rows, [], None)
    assert run.summary["controls"]["note"].startswith("no controls")
    assert noise_lines(run)[0].startswith("Controls: no controls")


def test_an_old_folder_says_controls_were_not_recorded(tmp_path):
    run = load_run(make_run(tmp_path).path)
    assert noise_lines(run)[0].startswith("Controls: not recorded")
