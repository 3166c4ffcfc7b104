"""``speedbench calibrate`` against the fake server's known step-cost model, and a run
that reports ``speedup_predicted`` from the stored calibration.

The fake's decode step with B running requests takes ``t + tc * B * (k + 1) + dc * k``
(speedbench/testing/script.py), so the true speedup at acceptance length AL and
concurrency c is ``AL * (t + tc * c) / (t + tc * c * (k + 1) + dc * k)``: a line through
the origin whose slope the calibration must recover. That c is the batch the fake's steps
ran with, which a loaded client can leave short of c (``ran_batches``); the truth is the
curve of the batches that ran.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from speedbench.results.loader import load_run
from tests.helpers.cli_runs import fake_local, scenario, write_prompts, write_yaml
from tests.integration.test_reliability import out_of, sb

# Steps of 10 ms and more: a loaded client's lag between a response and its next request
# leaves a slot empty for a few steps, not tens of them (at 2 ms steps a quiet fresh clone
# beside the real-vLLM tier ran c=16's baseline at a mean batch of 12.4 and the fit fell 3.7%
# under every truth the ran batches allow)
T, TC, DC, K = 0.01, 0.001, 0.0025, 3
LEVELS = [1, 4, 16]
# The calibration is held to 2% (the bound) of the true curve; a later run's
# predictions are the stored curve times that run's AL, exactly.


def true_slope(c: int, base_batch: float | None = None, spec_batch: float | None = None) -> float:
    """The true slope at concurrency c; with the batches the fake's steps really ran with,
    the slope those batches make."""
    bb, bs = base_batch or c, spec_batch or c
    return (T + TC * bb) / (T + TC * bs * (K + 1) + DC * K)


def ran_batches(tmp: Path) -> dict[tuple[str, int], float]:
    """(arm, concurrency) -> the mean batch its decode steps ran with, read back from the
    fake's engine clock: a step of B requests takes T + TC * B * (k + 1) + DC * k, so a
    request's mean step gives its mean B. It is c when every slot of the closed loop is
    always full; a client whose loop lags (a loaded host) leaves slots empty between a
    response and the next request, and the engine then steps a smaller batch. That is the
    engine's truth, which the calibration measures; the test must not assume c."""
    batch_steps: dict[tuple[str, int], float] = {}  # sum over requests of (mean batch x steps)
    steps: dict[tuple[str, int], int] = {}
    for folder in (tmp / "out" / "cal-calibration").iterdir():
        for r in load_run(folder).records:
            if r.warmup or r.error or not r.engine or not r.engine.generation_ms:
                continue
            k = K if r.spec and r.spec.num_spec_steps else 0
            n = r.spec.num_spec_steps if k else (r.output_tokens or 0) - 1
            if n > 0:
                key = (r.arm, r.concurrency)
                step_s = r.engine.generation_ms / 1e3 / n
                batch_steps[key] = batch_steps.get(key, 0.0) + n * (step_s - T - DC * k) / (TC * (k + 1))
                steps[key] = steps.get(key, 0) + n
    return {key: batch_steps[key] / steps[key] for key in steps}


def _runs(out: Path) -> set[Path]:
    return set((out / "cal").iterdir()) if (out / "cal").is_dir() else set()


def _new_run(out: Path, before: set[Path]) -> Path:
    """The one run folder of scenario "cal" made since ``before``: the module's tests share
    ``out``, and in a random order either may have written its run first."""
    (run,) = _runs(out) - before
    return run


def _scenario(tmp: Path, arms: list[dict], concurrency: list[int] = LEVELS, **top) -> Path:
    prompts = write_prompts(tmp / "p.jsonl", [f"prompt {i}" for i in range(16)])
    server = fake_local(**{"t-step": str(T), "token-cost": str(TC), "draft-cost": str(DC), "output-tokens": "32",
                           "ttft": "0.3"})
    sc = scenario("cal", prompts, server=server, arms=arms, concurrency=concurrency,
                  workload={"max_tokens": 32}, **top)
    return write_yaml(tmp / "cal.yaml", sc)


SPEC = {"method": "eagle3", "model": "draft", "num_speculative_tokens": K}
# The first token comes 300 ms after arrival, so every request of a wave has arrived (and
# counts in the batch) before the first decode step, even when the client is slow to send.


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("calib")
    path = _scenario(tmp, [{"name": "base"}, {"name": "eagle3", "speculative_config": SPEC}])
    res = sb(["calibrate", str(path), "--arm", "eagle3", "--al", "1,2.5,4", "-o", str(tmp / "out" / "calibrations"),
              "--runs", str(tmp / "out"), "--skip-doctor"], tag="calib", cwd=tmp, timeout=300)
    assert res.returncode == 0, out_of(res)
    files = list((tmp / "out" / "calibrations").glob("*.json"))
    assert len(files) == 1, files
    return tmp, json.loads(files[0].read_text()), out_of(res), ran_batches(tmp)


def slopes(cal: dict) -> dict[int, float]:
    return {c["concurrency"]: c["slope"] for c in cal["curves"]}


def test_calibrate_recovers_the_true_curve_within_2_percent(calibrated):
    _, cal, _, batches = calibrated
    curves = {c["concurrency"]: c for c in cal["curves"]}
    assert sorted(curves) == LEVELS
    for c in LEVELS:
        fit = curves[c]
        ran = {arm: b for (arm, level), b in batches.items() if level == c}
        assert len(ran) == 4 and all(0.5 < b <= c + 0.05 for b in ran.values()), ran  # never more than c at once
        # 2% of the truth of the batches that ran (one per AL's arm); on a quiet host every
        # one is c. A host beside a busy vLLM once left c=4's slots empty enough to move
        # the slope 3% from the truth at a full batch.
        truths = [true_slope(c, ran["base"], b) for arm, b in ran.items() if arm != "base"]
        assert min(truths) * 0.98 < fit["slope"] < max(truths) * 1.02, (c, fit["slope"], true_slope(c), ran)
        # three ALs measured, each a point of the curve: the forced AL, less the last step's
        # cut at max_tokens (31 decode tokens at AL 4 are 7 full steps and one of 3; at AL 2.5,
        # 1 and 2 drafts accepted in turn, 12 steps and one of 1)
        assert sorted(p["al"] for p in fit["points"]) == pytest.approx([1.0, 31 / 13, 31 / 8], abs=0.01)
        se = math.sqrt(fit["cov"][1][1])
        assert 0 < se < 0.05 * fit["slope"]  # an interval, and a narrow one: the fake's engine clock is exact


def test_the_calibration_is_keyed_by_the_system(calibrated):
    _, cal, _, _ = calibrated
    key = cal["key"]
    assert key["vllm_version"] == "0.32.0+fake" and key["target"] == "fake-model"
    assert key["method"] == "eagle3" and key["k"] == K and key["hardware"]
    assert key["server_args"]["t-step"] == str(T)  # step cost depends on the args: they are in the key
    assert cal["mode"] == "synthetic" and cal["tps_source"] == "engine"


def test_a_run_with_a_matching_calibration_reports_the_prediction(calibrated):
    tmp, cal, _, _ = calibrated
    # another checkpoint of the same system: the fake's draft accepts 2 of 3 drafts per step (AL 3)
    arm = {"name": "eagle3", "speculative_config": {**SPEC, "model": "ckpt@accept=2"}}
    run_tmp = tmp / "later"
    run_tmp.mkdir()
    path = _scenario(run_tmp, [{"name": "base"}, arm], concurrency=[1, 16])
    before = _runs(tmp / "out")
    res = sb(["run", str(path), "-o", str(tmp / "out"), "--skip-doctor"], tag="calib-run", cwd=run_tmp,
             timeout=300)
    assert res.returncode == 0, out_of(res)
    run = _new_run(tmp / "out", before)
    summary = json.loads((run / "summary.json").read_text())
    assert (run / "calibrations.json").is_file()  # the curves used, kept with the run
    rows = {r["concurrency"]: r for r in summary["rows"] if r["arm"] == "eagle3"}
    for c, r in rows.items():
        assert r["al_tokens"] == pytest.approx(31 / 11)  # 10 steps of 3 tokens and one of 1
        pred, lo, hi = r["speedup_predicted"], r["speedup_predicted_ci_low"], r["speedup_predicted_ci_high"]
        assert pred == pytest.approx(r["al_tokens"] * slopes(cal)[c], rel=1e-9)  # the stored curve, at this AL
        assert lo < pred < hi
        # Measured near the prediction. Not to 3%: how many requests share the fake's steps
        # follows the scheduler of a busy host, and its step costs follow the batch.
        assert r["speedup_engine_mean"] == pytest.approx(pred, rel=0.25)
    base = [r for r in summary["rows"] if r["arm"] == "base"]
    assert base and all(r["speedup_predicted"] is None for r in base)  # no calibration: no prediction


def test_screening_starts_no_baseline_and_predicts_from_the_calibration(calibrated):
    tmp, cal, _, _ = calibrated
    ckpts = {"ck-a": "1", "ck-b": "2", "ck-c": "3/2"}  # accepted drafts per step: AL ~2, ~3, ~3.5
    arms = [{"name": "base"}] + [{"name": n, "speculative_config": {**SPEC, "model": f"/ckpt/{n}@accept={a}"}}
                                 for n, a in ckpts.items()]
    scr = tmp / "screen"
    scr.mkdir()
    path = _scenario(scr, arms, load={"mode": "screen", "screen_concurrency": 16}, promote={"best": 2})
    before = _runs(tmp / "out")
    res = sb(["run", str(path), "-o", str(tmp / "out"), "--skip-doctor"], tag="calib-screen", cwd=scr, timeout=300)
    assert res.returncode == 0, out_of(res)
    run = _new_run(tmp / "out", before)
    summary = json.loads((run / "summary.json").read_text())
    assert sorted(json.loads((run / "provenance.json").read_text())) == sorted(ckpts)  # 3 servers, no baseline
    assert {(r["arm"], r["concurrency"]) for r in summary["rows"]} == {(n, 16) for n in ckpts}
    entries = {e["arm"]: e for e in summary["screening"]}
    for e in entries.values():
        assert e["al_requests"] == pytest.approx(e["al_tokens"], rel=0.01)  # equal-length requests
        assert len(e["per_position_joint"]) == K
        for p in e["predicted"]:
            assert p["speedup"] == pytest.approx(e["al_tokens"] * slopes(cal)[p["concurrency"]], rel=1e-9)
            assert p["ci_low"] < p["speedup"] < p["ci_high"]
    assert summary["promoted"] == ["ck-c", "ck-b"]
    assert [entries[n]["promoted"] for n in ("ck-a", "ck-b", "ck-c")] == [False, True, True]
    assert {c["arm"] for c in summary["categories"]} == set(ckpts)  # per-category AL as in every run
    report = (run / "report.md").read_text()
    assert "## Screening" in report and "pred. speedup c=1" in report


def test_an_engine_that_refuses_synthetic_acceptance_points_to_real_drafts(tmp_path):
    path = _scenario(tmp_path, [{"name": "base"}, {"name": "eagle3", "speculative_config": SPEC,
                                                   "args": {"no-synthetic": True}}], concurrency=[1])
    res = sb(["calibrate", str(path), "--arm", "eagle3", "--al", "2", "-o", str(tmp_path / "cal"),
              "--runs", str(tmp_path / "out"), "--skip-doctor"], tag="calib-refused", cwd=tmp_path, timeout=60)
    assert res.returncode == 1, out_of(res)
    assert "--mode drafts" in out_of(res) and not (tmp_path / "cal").exists()
