"""Calibration files keyed by provenance, predictions in summary rows, screening and promotion."""

from __future__ import annotations

import math

import pytest

from speedbench.metrics.registry import SummaryRow
from speedbench.calibration import store
from speedbench.calibration.fit import CurvePoint, fit_curve
from speedbench.calibration.screen import Ranked, promote, screening_block
from speedbench.calibration.sweep import default_als, drafts_scenario, synthetic_scenario
from speedbench.engine.vllm import record
from speedbench.engine.vllm.command import NOT_SYSTEM_ARGS as IGNORE
from speedbench.errors import ScenarioError
from speedbench.metrics.stored import ScreenEntry
from speedbench.records import PointKey
from speedbench.run.calibrate import save
from speedbench.scenario import validate_data
from speedbench.scenario.traffic import PromoteSpec

SPEC = {"method": "eagle3", "model": "d", "num_speculative_tokens": 3}


def _prov(**over):
    """An arm's provenance as vLLM saves it, read back as the typed record."""
    return record.read({"vllm_version": "0.32.0", "model": "tgt", "method": "eagle3", "num_speculative_tokens": 3,
                        "draft": {"architectures": ["LlamaForCausalLMEagle3"]}, "hardware": {"summary": "1x H100"},
                        **over})


def _sc(**top):
    return validate_data({"name": "s", "server": {"model": "tgt", "args": {"max-num-seqs": 16}},
                          "arms": [{"name": "base"}, {"name": "e3", "speculative_config": SPEC},
                                   {"name": "e3b", "speculative_config": {**SPEC, "model": "d2"}},
                                   {"name": "self", "speculative_config": {**SPEC, "method": "draft_model"}}],
                          **top})


def test_the_key_ignores_the_checkpoint_and_the_measurement_flags_but_not_the_system(tmp_path):
    args = store.system_args({"max_num_seqs": 16, "port": 8000, "enable-per-request-metrics": True}, {}, IGNORE)
    assert args == {"max-num-seqs": 16}
    key = store.calibration_key(_prov(), args)
    assert key["draft_architecture"] == "LlamaForCausalLMEagle3" and key["hardware"] == "1x H100"
    curve = fit_curve([CurvePoint(1.0, 0.5, 0.49, 0.51)], 1)
    path = save(tmp_path, key, [curve], {"mode": "synthetic"})
    assert store.find(tmp_path, store.calibration_key(_prov(draft={"architectures": ["LlamaForCausalLMEagle3"],
                                                                   "model": "other"}), args)) == path
    for other in (_prov(vllm_version="0.33.0"), _prov(num_speculative_tokens=5), _prov(hardware={"summary": "x"})):
        assert store.find(tmp_path, store.calibration_key(other, args)) is None
    assert store.find(tmp_path, store.calibration_key(_prov(), {"max-num-seqs": 32})) is None
    cal = store.Calibration.from_dict(store.load(path))
    assert cal.predict(1, 3.0) == pytest.approx((1.5, 1.47, 1.53), rel=1e-3)
    assert all(math.isnan(v) for v in cal.predict(4, 3.0))  # no curve at c=4: no prediction


def test_matching_and_the_predictor_fill_only_calibrated_arms_at_calibrated_levels(tmp_path):
    sc = _sc()
    key = store.calibration_key(_prov(), store.system_args(sc.server.args, {}, IGNORE))
    save(tmp_path, key, [fit_curve([CurvePoint(1.0, 0.5, 0.49, 0.51)], 1)], {})
    prov = {"base": _prov(method="", num_speculative_tokens=None), "e3": _prov(), "self": _prov(method="draft_model")}
    cals = store.matching(tmp_path, sc, prov, IGNORE)
    assert list(cals) == ["e3"]
    predict = store.predictor(cals)
    assert predict(PointKey("e3", 1), 2.0)[0] == pytest.approx(1.0)
    assert all(math.isnan(v) for v in predict(PointKey("e3", 4), 2.0) + predict(PointKey("self", 1), 4.0))


def test_synthetic_sweep_forces_each_al_on_the_arms_own_server():
    assert default_als(3) == [1.0, 1.75, 2.5, 3.25, 4.0]
    sc = synthetic_scenario(_sc(aa_check=True), "e3", [1.0, 4.0])
    assert [a.name for a in sc.arms] == ["base", "e3-al1", "e3-al4"]
    cfg = sc.arm("e3-al4").speculative_config.to_dict()
    assert cfg["rejection_sample_method"] == "synthetic" and cfg["synthetic_acceptance_length"] == 4.0
    assert cfg["model"] == "d" and not sc.aa_check and sc.name == "s-calibration"
    with pytest.raises(ScenarioError, match="outside"):
        synthetic_scenario(_sc(), "e3", [5.0])
    with pytest.raises(ScenarioError, match="no speculative_config"):
        synthetic_scenario(_sc(), "base", [1.0])


def test_draft_sweep_takes_same_system_arms_and_refuses_another_system():
    sc = drafts_scenario(_sc(), "e3", None)
    assert [a.name for a in sc.arms] == ["base", "e3", "e3b"]
    with pytest.raises(ScenarioError, match="not the same system"):
        drafts_scenario(_sc(), "e3", ["self"])


def test_screen_mode_drops_the_baseline_and_runs_one_high_concurrency_point():
    sc = _sc(load={"mode": "screen", "screen_concurrency": 32}, aa_check=True, promote={"best": 1},
             baseline_from={"results": "results"})
    assert [a.name for a in sc.arms] == ["e3", "e3b", "self"] and sc.baseline_arm is None and not sc.aa_check
    assert sc.baseline_from is None  # a scenario that reuses its baseline in full runs screens without one
    assert sc.load_points("") == [(32, "", None)]
    with pytest.raises(ScenarioError, match="promote"):
        _sc(promote={})
    with pytest.raises(ScenarioError, match="no speculative arm named 'base'"):
        _sc(load={"mode": "screen"}, promote={"beats": "base"})


def test_promote_rules():
    entries = [Ranked(str(e["arm"]), ScreenEntry.from_dict(e)) for e in (
        {"arm": "a", "al_tokens": 2.0}, {"arm": "b", "al_tokens": 3.0}, {"arm": "c", "al_tokens": 2.5},
        {"arm": "d", "al_tokens": math.nan})]
    assert promote(entries, PromoteSpec(best=2)) == ["b", "c"]
    assert promote(entries, PromoteSpec(beats="a")) == ["b", "c"]
    assert promote(entries, PromoteSpec(beats="c", best=5)) == ["b"]
    assert promote(entries, PromoteSpec(min_al=2.5)) == ["b", "c"]
    assert promote(entries, PromoteSpec(beats="zzz")) == []  # an unmeasured reference promotes nothing
    assert promote(entries, None) == []


def test_screening_block_predicts_at_every_level_and_marks_the_promoted(tmp_path):
    sc = _sc(load={"mode": "screen"}, promote={"best": 1}, concurrency=[1, 4])
    cal = {"curves": [fit_curve([CurvePoint(1.0, 0.5, 0.49, 0.51)], 1).to_dict()], "file": "f.json"}
    rows = [{"arm": "e3", "speculative": True, "status": "ok", "concurrency": 64, "variant": "", "al_tokens": 3.0,
             "al_requests": 2.9},
            {"arm": "e3b", "speculative": True, "status": "ok", "concurrency": 64, "variant": "", "al_tokens": 2.0}]
    rows = [SummaryRow.from_dict(r) for r in rows]
    entries, promoted = screening_block(rows, sc, {"e3": cal})
    assert promoted == ["e3"] and [e["promoted"] for e in entries] == [True, False]
    p = entries[0]["predicted"]
    assert [x["concurrency"] for x in p] == [1, 4] and p[0]["speedup"] == pytest.approx(1.5)
    assert math.isnan(p[1]["speedup"]) and math.isnan(entries[1]["predicted"][0]["speedup"])
    assert entries[0]["al_requests"] == 2.9 and entries[0]["calibration"] == "f.json"
    assert screening_block(rows, _sc(), {}) == ([], [])


def test_each_workload_variant_has_its_own_curve():
    from speedbench.calibration.fit import curves_from_rows

    def row(v, al, s):
        return {"arm": "a", "concurrency": 1, "variant": v, "status": "ok", "al_tokens": al, "speedup_engine_mean": s,
                "speedup_engine_ci_low": s * 0.99, "speedup_engine_ci_high": s * 1.01}

    curves = curves_from_rows([SummaryRow.from_dict(row("", 1.0, 0.5)), SummaryRow.from_dict(row("ctx8k", 1.0, 0.3))],
                              ["a"])
    cal = store.Calibration.from_dict({"curves": [c.to_dict() for c in curves]})
    assert cal.predict(1, 2.0)[0] == pytest.approx(1.0)
    assert cal.predict(1, 2.0, "ctx8k")[0] == pytest.approx(0.6)  # longer context: dearer steps
    assert math.isnan(cal.predict(1, 2.0, "ctx32k")[0])
