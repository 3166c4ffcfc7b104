"""The fake server's synthetic acceptance and step-cost model (the calibration's ground truth)."""

from __future__ import annotations

import pytest

from speedbench.testing.script import FakeConfig, plan, synthetic_accepted, synthetic_al_of


@pytest.mark.parametrize("al", [1.0, 1.75, 2.5, 3.25, 4.0])
def test_synthetic_acceptance_hits_the_al_exactly_over_whole_steps(al):
    acc = [synthetic_accepted(al, 3, i) for i in range(400)]
    assert all(0 <= a <= 3 for a in acc)
    assert 1 + sum(acc) / len(acc) == pytest.approx(al, abs=1e-9)


def test_the_speculative_config_sets_the_synthetic_al():
    assert synthetic_al_of({"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.5}) == 2.5
    # per-position conditional rates: 1 + 0.8 + 0.8*0.5
    assert synthetic_al_of({"rejection_sample_method": "synthetic",
                            "synthetic_acceptance_rates": [0.8, 0.5]}) == pytest.approx(2.2)
    assert synthetic_al_of({"method": "eagle3"}) is None


def test_plan_with_synthetic_al_reports_it_and_step_cost_grows_with_batch_and_k():
    cfg = FakeConfig(k=3, synthetic_al=3.0, output_tokens=61)
    p = plan(cfg)
    assert p.spec_payload()["mean_acceptance_length"] == pytest.approx(3.0)
    cost = FakeConfig(k=3, t_step_s=0.002, token_cost_s=0.0002, draft_cost_s=0.0005)
    assert cost.cost_model and not FakeConfig().cost_model
    assert cost.step_s(1) == pytest.approx(0.002 + 0.0002 * 4 + 0.0015)
    assert cost.step_s(16) == pytest.approx(0.002 + 0.0002 * 64 + 0.0015)
    assert FakeConfig(t_step_s=0.002, token_cost_s=0.0002).step_s(16) == pytest.approx(0.002 + 0.0032)
