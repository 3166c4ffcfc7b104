"""The `stop:` and `baseline_from:` scenario keys: defaults and the inputs they refuse."""

from __future__ import annotations

import pytest
import yaml

from speedbench.cli import main
from speedbench.errors import ScenarioError
from speedbench.scenario import load_scenario, validate_data
from speedbench.workload import count_prompts

BASE = {"name": "t", "server": {"model": "m"}, "arms": [{"name": "base"}, {
    "name": "spec", "speculative_config": {"method": "eagle3", "model": "d", "num_speculative_tokens": 3}}]}


def test_defaults():
    sc = validate_data({**BASE, "stop": {"speedup_ci_halfwidth": 0.02},
                        "baseline_from": {"results": "results/"}})
    assert sc.stop is not None and (sc.stop.min_prompts, sc.stop.max_prompts, sc.stop.alpha) == (16, None, 0.05)
    assert sc.baseline_from is not None and sc.baseline_from.max_age_days == 7
    assert sc.baseline_from.tolerance == 0.05 and sc.baseline_from.canary_prompts == 4
    assert validate_data(BASE).stop is None and validate_data(BASE).baseline_from is None


@pytest.mark.parametrize("extra, fragment", [
    ({"stop": {"min_prompts": 16}}, "speedup_ci_halfwidth' or 'al_ci_halfwidth"),
    ({"stop": {"speedup_ci_halfwidth": 0.02, "min_prompts": 64, "max_prompts": 32}}, "below min_prompts"),
    ({"stop": {"speedup_ci_halfwidth": 0.02, "min_prompts": 4}}, "min_prompts"),
    ({"stop": {"speedup_ci_halfwidth": 2}}, "speedup_ci_halfwidth"),
    ({"stop": {"speedup_ci_halfwidth": 0.02}, "load": {"mode": "rate", "rates": [1]}}, "closed loop"),
    ({"stop": {"speedup_ci_halfwidth": 0.02, "unknown": 1}}, "unknown"),
    ({"baseline_from": {"results": "r", "max_age_days": 0}}, "max_age_days"),
])
def test_refused(extra, fragment):
    with pytest.raises(ScenarioError, match=fragment):
        validate_data({**BASE, **extra})


def test_baseline_from_needs_a_baseline():
    only_spec = {**BASE, "arms": BASE["arms"][1:]}
    with pytest.raises(ScenarioError, match="baseline_from needs a baseline arm"):
        validate_data({**only_spec, "baseline_from": {"results": "r"}})


def test_dry_run_names_the_looks_and_the_reuse(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**BASE, "stop": {"speedup_ci_halfwidth": 0.02, "max_prompts": 100},
                                    "baseline_from": {"results": "results/", "max_age_days": 3}}))
    assert main(["run", str(path), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    # the looks a run makes over the sample's prompts (fewer than max_prompts), as the run
    # itself schedules them (stopping/point.py), at the level for that many looks
    n = count_prompts(load_scenario(path).workload)
    assert n is not None and 32 < n < 64
    assert f"looks at [16, 32, {n}] prompts, each interval at level {1 - 0.05 / 3:.4f}" in out
    assert main(["run", str(path), "--dry-run", "--set", "stop.max_prompts=40"]) == 0  # max_prompts caps them
    assert "looks at [16, 32, 40] prompts" in " ".join(capsys.readouterr().out.split())
    assert "reused from results/ when a matching run at most 3 days old passes a canary" in out
