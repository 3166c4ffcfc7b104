"""AL within a run: a decay over the servers' life is found with the prompts' own
difficulty taken out; steady acceptance and prompts seen once give no warning."""

from __future__ import annotations

import numpy as np

from speedbench.analysis.al_trend import al_trends
from speedbench.records import RequestRecord, SpecStats


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
    assert "AL drifted -" in t.line() and "eagle3" in t.line()
    (t,) = al_trends(records(decay=0.06, rounds=2))  # within each round (fresh servers)
    assert t.significant


def test_steady_acceptance_and_prompts_seen_once_give_nothing():
    assert not any(t.significant for s in range(10) for t in al_trends(records(decay=0.0, seed=s)))
    assert al_trends(records(decay=0.1, levels=(1,))) == []  # each prompt once: difficulty and time confounded
