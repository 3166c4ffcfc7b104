"""Prometheus parsing and spec-decode counter deltas on realistic /metrics text."""

from __future__ import annotations

import asyncio
import math

import pytest
from tests.helpers.fakes import FakeBuilder, VLLM, fake_server, prompts

from speedbench.client.http import ClientConfig
from speedbench.errors import ServerError
from speedbench.loadgen import PointJob, Target, run_pass
from speedbench.records import PointKey
from speedbench.client.scrape import (
    SpecCounters,
    delta,
    parse_prometheus,
    scrape,
)
from speedbench.engine.vllm.prometheus import spec_counters

# Shaped like vLLM 0.32 with data parallel 2: one series per engine, _created samples,
# a histogram, a label value with an escaped quote, comma and brace.
METRICS = r'''# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7640952e+09
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 50.0
vllm:spec_decode_num_drafts_created{engine="1",model_name="m"} 1.7640952e+09
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 300.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 150.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 180.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 60.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 60.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 40.0
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="m",position="0"} 1.7640952e+09
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 30.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 20.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 10.0
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 4.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 1.25
vllm:e2e_request_latency_seconds_created{engine="0",model_name="m"} 1.7640952e+09
python_info{implementation="CPython",major="3",minor="11",version="3.11.7"} 1.0
weird{path="a,b}c",quote="say \"hi\"",nl="x\ny",bs="c:\\d"} NaN 1712345678000
process_open_fds 27.0
'''


def test_parse_prometheus():
    p = parse_prometheus(METRICS)
    assert not any(k.endswith("_created") for k in p)
    assert [v for _, v in p["vllm:num_requests_running"]] == [3.0, 2.0]
    assert p["vllm:e2e_request_latency_seconds_bucket"][1] == ({"engine": "0", "le": "+Inf", "model_name": "m"}, 4.0)
    labels, value = p["weird"][0]
    assert labels == {"path": "a,b}c", "quote": 'say "hi"', "nl": "x\ny", "bs": "c:\\d"}
    assert math.isnan(value)
    assert p["process_open_fds"] == [({}, 27.0)]


def test_spec_counters_sum_engines_and_positions():
    c = spec_counters(parse_prometheus(METRICS))
    assert (c.drafts, c.draft_tokens, c.accepted) == (150.0, 450.0, 240.0)
    assert c.per_position == [110.0, 80.0, 50.0]
    # AL from counters: 1 + accepted / drafts
    assert 1 + c.accepted / c.drafts == pytest.approx(2.6)


def test_garbage_lines_are_skipped():
    p = parse_prometheus("not a metric line at all {\nok 1\nbad{a=\"x} 3\n")
    assert p == {"ok": [({}, 1.0)]}


def test_no_spec_metrics_gives_zero_counters():
    c = spec_counters(parse_prometheus("vllm:num_requests_running 0\n"))
    assert c.empty and c.per_position == []


def test_delta_and_restart():
    before = SpecCounters(10, 30, 12, [6, 4, 2])
    after = SpecCounters(20, 60, 30, [14, 10, 6, 0])
    d = delta(before, after)
    assert (d.drafts, d.draft_tokens, d.accepted, d.per_position) == (10, 30, 18, [8, 6, 4, 0])
    restarted = delta(after, SpecCounters(5, 15, 3, [2, 1, 0]))
    assert restarted.drafts == 5 and restarted.per_position == [2, 1, 0]
    assert SpecCounters.from_dict(d.to_dict()) == d


def test_scrape_fake_server_counters_match_per_request_totals():
    with fake_server(t_step_s=0.001, output_tokens=12, k=3, acceptance=(3, 0, 2), engines=2) as srv:
        cfg = ClientConfig(srv.base_url, stream=VLLM)

        async def go():
            before = spec_counters(parse_prometheus(await scrape(srv.base_url)))
            res = await run_pass(Target(client=cfg, builder=FakeBuilder()),
                                 PointJob(key=PointKey("sd", 3), prompts=prompts(6)), 0)
            after = spec_counters(parse_prometheus(await scrape(srv.base_url + "/metrics")))
            return res, delta(before, after)

        res, d = asyncio.run(go())
    steps = sum(r.spec.num_spec_steps for r in res.records)
    acc = sum(r.spec.num_accepted_tokens for r in res.records)
    assert (d.drafts, d.accepted, d.draft_tokens) == (steps, acc, 3 * steps)
    hist = [sum(r.spec.acceptance_histogram[j] for r in res.records) for j in range(4)]
    assert d.per_position == [sum(hist[1:]), sum(hist[2:]), hist[3]]


def test_scrape_failure_is_server_error():
    with pytest.raises(ServerError):
        asyncio.run(scrape("http://127.0.0.1:9"))


def _dp(e0: float, e1: float, created0: float = 1.0, created1: float = 1.0) -> str:
    return "".join(
        f'vllm:spec_decode_num_drafts_total{{engine="{e}",model_name="m"}} {v}\n'
        f'vllm:spec_decode_num_drafts_created{{engine="{e}",model_name="m"}} {c}\n'
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="{e}",model_name="m"}} {2 * v}\n'
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{e}",model_name="m",position="0"}} {v}\n'
        for e, v, c in ((0, e0, created0), (1, e1, created1)))


def _counters(text: str):
    return spec_counters(parse_prometheus(text, keep_created=True))


def test_delta_survives_a_reset_of_one_engine():
    # engine 0 restarted and counted 5 since; engine 1 went 100 -> 130. The summed
    # total rises (130 -> 135), so a total-based check would report 35, not 35 + ...
    before, after = _counters(_dp(30, 100)), _counters(_dp(5, 130))
    d = delta(before, after)
    assert d.drafts == 5 + 30 and d.accepted == 10 + 60 and d.per_position == [35]
    assert len(d.warnings) == 1 and "reset" in d.warnings[0] and 'engine=0' in d.warnings[0]


def test_delta_sees_a_reset_by_created_time_even_when_the_value_grew():
    before, after = _counters(_dp(3, 10)), _counters(_dp(8, 20, created0=2.0))
    d = delta(before, after)
    assert d.drafts == 8 + 10 and d.warnings


def test_delta_without_resets_has_no_warning_and_new_series_count_from_zero():
    before = _counters('vllm:spec_decode_num_drafts_total{engine="0"} 4\n')
    after = _counters('vllm:spec_decode_num_drafts_total{engine="0"} 6\n'
                      'vllm:spec_decode_num_drafts_total{engine="1"} 3\n')
    d = delta(before, after)
    assert d.drafts == 5 and not d.warnings
