"""Engine-side per-user TPS and bursts against the fake server's exact truth.

The fake's "engine" produces each step on schedule and reports vLLM's per-request timing
from those production times. In ``buffer_output`` mode it holds every step back and
writes the whole output at once, as a starved API server does: the client sees a burst
(no client-side TPS), the engine-side TPS stays exact, and the point says so.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from tests.helpers.fakes import FakeBuilder, VLLM, prompts

from speedbench.client.http import ClientConfig
from speedbench.metrics.rows import PointInfo, summarize
from speedbench.metrics.table import request_table
from speedbench.metrics.timing import LAG_CAUSE_MS, TPS_AGREE_TOLERANCE
from speedbench.loadgen import PointJob, Target, run_pass
from speedbench.records import PointKey
from speedbench.testing import FakeConfig
from speedbench.testing.hosting import FakeProcess

BASE = FakeConfig(ttft_s=0.01, t_step_s=0.008, output_tokens=33)
SPEC = FakeConfig(ttft_s=0.01, t_step_s=0.010, output_tokens=33, k=3, acceptance=(3, 1, 2, 0))


def _measure(cfg: FakeConfig, arm: str, c: int, n: int):
    with FakeProcess(cfg) as srv:
        ps = prompts(n, prefix=f"{arm}-")
        res = asyncio.run(run_pass(Target(client=ClientConfig(srv.base_url, stream=VLLM), builder=FakeBuilder()),
                                   PointJob(key=PointKey(arm, c), prompts=ps), 0))
        log = {e.body["messages"][-1]["content"]: e for e in srv.log() if e.body.get("stream")}
        truth = {}
        for r in res.records:
            em = log[ps[r.prompt_index].turns[0]]
            p = em.produced_ns
            truth[r.prompt_index] = (sum(em.tokens) - 1) / ((p[-1] - p[0]) / 1e9)
        return res, truth


@pytest.fixture(scope="module")
def bursty():
    base, base_truth = _measure(FakeConfig(**{**BASE.__dict__, "buffer_output": True}), "base", 4, 8)
    spec, spec_truth = _measure(SPEC, "sd", 4, 8)
    rows = summarize(base.records + spec.records, {}, "base",
                     {"base": {}, "sd": {"speculative": True, "num_speculative_tokens": 3}},
                     {("base", 4, ""): PointInfo.from_results([base]), ("sd", 4, ""): PointInfo.from_results([spec])})
    return {r["arm"]: r for r in rows}, base, spec, base_truth, spec_truth


def test_engine_tps_is_exact_for_every_request(bursty):
    _, base, spec, base_truth, spec_truth = bursty
    for res, truth in ((base, base_truth), (spec, spec_truth)):
        t = request_table(res.records)
        got = t.engine_tps.to_numpy()
        want = np.array([truth[i] for i in t.prompt_index])
        # the fake reports its production times in ms with float precision: exact
        assert np.allclose(got, want, rtol=1e-9), (got, want)


def test_buffered_output_is_counted_as_bursts_and_flagged(bursty):
    rows, base, *_ = bursty
    b = rows["base"]
    assert b["n_burst"] == 8 == b["n_ok"]
    assert b["per_user_tps_mean"] is None or not np.isfinite(b["per_user_tps_mean"])
    assert np.isfinite(b["per_user_tps_engine_mean"])
    burst = [w for w in b["warnings"] if "were bursts" in w]
    assert len(burst) == 1 and burst[0].startswith("8 of 8 requests")
    # The cause named follows the client's own measured lag: on a busy host the client
    # can stall past LAG_CAUSE_MS, and then the client, not the server, is the suspect.
    if b["loop_lag_ms_max"] > LAG_CAUSE_MS:
        assert "the client lagged" in burst[0]
    else:
        assert "batched its output" in burst[0]
    # the streaming arm's bursts are whatever its own records show (a busy host's stall can
    # deliver a request in one read); the row counts exactly those
    _, _, spec, *_ = bursty
    assert rows["sd"]["n_burst"] == int(request_table(spec.records).burst.sum())


def test_bursts_are_never_called_different_prompts_and_count_in_the_engine_speedup(bursty):
    rows, _, _, base_truth, spec_truth = bursty
    sd = rows["sd"]
    assert not any("different prompts" in w for w in sd["warnings"])
    assert sd["speedup_pairs"] == 0  # no baseline request has a client-side TPS
    want = np.mean(list(spec_truth.values())) / np.mean(list(base_truth.values()))
    assert sd["speedup_engine_mean"] == pytest.approx(want, rel=1e-9)
    assert sd["speedup_engine_ci_low"] <= sd["speedup_engine_mean"] <= sd["speedup_engine_ci_high"]
    # no client-side figure: the row says why rather than print nothing (or a proxy of 0)
    assert sd["speedup_mean"] is None or not np.isfinite(sd["speedup_mean"])
    assert any(w.startswith("no client-side speedup") for w in sd["warnings"]), sd["warnings"]
    assert sd["proxy_speedup"] is None or not np.isfinite(sd["proxy_speedup"])


def test_a_streaming_server_agrees_with_its_engine(bursty):
    rows, _, spec, *_ = bursty
    sd = rows["sd"]
    # The agreement is over the requests both clocks timed (a burst has no client-side TPS,
    # so the row's two means may be over different requests), within 5% of the engine's
    # mean: the flag is exactly that, recomputed here from the records.
    t = request_table(spec.records)
    both = t[t["ok"] & t["per_user_tps"].notna() & t["engine_tps"].notna()]
    if both.empty:  # every request a burst (a starved client): nothing to compare
        assert sd["tps_agree"] is None
        return
    c, e = float(both["per_user_tps"].mean()), float(both["engine_tps"].mean())
    assert sd["tps_agree"] is (abs(c - e) <= TPS_AGREE_TOLERANCE * e), (c, e)
    # a busy host can starve the client's loop, or the fake's own writes, past the 5%
    # agreement; then the row must say so (the cause it names is its best guess)
    if sd["tps_agree"] is not True:
        assert any("disagree by more than 5%" in w for w in sd["warnings"]), sd["warnings"]
