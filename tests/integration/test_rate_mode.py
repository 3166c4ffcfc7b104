"""Open-loop request-rate mode: arrival schedules, scenario keys, the runner, goodput."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import numpy as np
import pytest
from tests.helpers.bounds import client_pairs
from tests.helpers.fakes import FakeBuilder, VLLM, fake_server, max_overlap, prompts

from speedbench.loadgen.arrivals import arrival_offsets
from speedbench.client.http import ClientConfig
from speedbench.errors import ScenarioError
from speedbench.metrics.latency import good_requests
from speedbench.metrics.rows import PointInfo, summarize
from speedbench.results import RunDir
from speedbench.metrics.table import request_table
from speedbench.run.plan import build_plan
from speedbench.records import PointKey, RequestRecord
from speedbench.loadgen import PointJob, Target, run_pass
from speedbench.scenario import load_scenario, validate_data
from speedbench.testing import FakeConfig

ROOT = Path(__file__).resolve().parents[2]
S = 1_000_000_000


def test_arrivals_are_fixed_by_seed_and_shaped_by_burstiness():
    a = arrival_offsets(2000, rate=4.0, burstiness=1.0, seed=7)
    assert a == arrival_offsets(2000, rate=4.0, burstiness=1.0, seed=7)  # every arm: the same times
    assert a != arrival_offsets(2000, rate=4.0, burstiness=1.0, seed=8)
    assert a[0] == 0.0 and all(x < y for x, y in zip(a, a[1:]))
    gaps = np.diff(a)
    assert gaps.mean() == pytest.approx(0.25, rel=0.08)  # 1 / rate
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.1)  # Poisson: CV 1
    bursty = np.diff(arrival_offsets(2000, rate=4.0, burstiness=0.25, seed=7))
    assert bursty.mean() == pytest.approx(0.25, rel=0.15)
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.15)  # gamma: CV = 1/sqrt(shape)
    assert arrival_offsets(0, 1.0) == [] and arrival_offsets(1, 1.0) == [0.0]


def _cpu_tiny(tmp_path, load: dict, slo: dict | None = None):
    sc = load_scenario(ROOT / "scenarios/cpu_tiny.yaml")
    data = sc.model_dump(mode="json")
    data["load"] = load
    if slo:
        data["slo"] = slo
    return validate_data(data)


def test_rate_points_in_the_plan(tmp_path):
    sc = _cpu_tiny(tmp_path, {"mode": "rate", "rates": [0.5, 2], "burstiness": 0.5, "max_concurrency": 8})
    plan = build_plan(sc)
    assert plan.points("baseline") == [("baseline", 8, "0.5rps"), ("baseline", 8, "2rps")]
    assert plan.n_points == len(sc.arms) * 2
    # the load is in fields, never parsed from the label
    assert [(k.workload, k.rate) for k in plan.points("baseline")] == [("", 0.5), ("", 2.0)]
    closed = load_scenario(ROOT / "scenarios/cpu_tiny.yaml")
    assert closed.load.mode == "concurrency"  # SPEED-Bench's closed loop stays the default
    assert build_plan(closed).points("baseline") == [("baseline", c, "") for c in (1, 4, 16)]
    assert {(k.workload, k.rate) for k in build_plan(closed).points()} == {("", None)}


@pytest.mark.parametrize("load, match", [
    ({"mode": "rate"}, "needs 'rates'"),
    ({"mode": "rate", "rates": [0]}, "positive"),
    ({"mode": "rate", "rates": [1, 1]}, "distinct"),
    ({"rates": [1]}, "needs load mode 'rate'"),
    ({"mode": "rate", "rates": [1], "burstiness": 0}, "burstiness"),
])
def test_bad_load(tmp_path, load, match):
    with pytest.raises(ScenarioError, match=match):
        _cpu_tiny(tmp_path, load)


def test_slo_must_be_positive(tmp_path):
    with pytest.raises(ScenarioError, match="ttft_ms"):
        _cpu_tiny(tmp_path, {}, {"ttft_ms": -1})


@pytest.fixture(scope="module")
def srv():
    with fake_server() as s:
        yield s


def test_open_loop_sends_on_schedule(srv):
    srv.config = FakeConfig(ttft_s=0.02, t_step_s=0.01, output_tokens=20)  # each request ~0.2 s
    srv.reset()
    arrivals = arrival_offsets(12, rate=25.0, seed=3)
    res = asyncio.run(run_pass(Target(client=ClientConfig(srv.base_url, stream=VLLM), builder=FakeBuilder()),
                               PointJob(key=PointKey("a", 100, "25rps"), prompts=prompts(12), arrivals=arrivals), 0))
    recs = sorted(res.records, key=lambda r: r.prompt_index)
    assert len(recs) == 12 and all(r.ok for r in recs)
    # t_queued_ns is the schedule itself (first send + arrival offset): exactly the arrivals' spacing
    for r, at in zip(recs, arrivals):
        assert r.t_queued_ns - recs[0].t_queued_ns == pytest.approx((at - arrivals[0]) * S, abs=10)
    # each went out in arrival order and never early; any lateness is what the client's own
    # event-loop lag explains (a send is stamped on that loop; its probe samples every 10 ms),
    # as in tests/e2e/test_engine_vllm.py. How large the lag gets is the host's business.
    assert [r.t_sent_ns for r in recs] == sorted(r.t_sent_ns for r in recs)
    late_ms = [(r.t_sent_ns - r.t_queued_ns) / 1e6 for r in recs]
    assert all(x >= 0 for x in late_ms)
    assert max(late_ms) <= res.loop_lag_ms.get("max", 0.0) + 50, (late_ms, res.loop_lag_ms)
    assert max_overlap(recs) > 1  # open loop: arrivals overlap, nobody waited for a free worker


def test_open_loop_respects_the_cap(srv):
    srv.config = FakeConfig(ttft_s=0.02, t_step_s=0.01, output_tokens=10)
    srv.reset()
    res = asyncio.run(run_pass(Target(client=ClientConfig(srv.base_url, stream=VLLM), builder=FakeBuilder()),
                               PointJob(key=PointKey("a", 2), prompts=prompts(8), arrivals=[0.0] * 8), 0))
    # the client held 2 in flight and never more; the server saw no more than that
    assert len(res.records) == 8 and max_overlap(res.records) == 2 and srv.max_concurrent <= 2


def _rec(idx, ttft_s, n, decode_s, arm="a", error=None):
    first = S + int(ttft_s * S)
    chunks = [first] + ([first + int(decode_s * S)] if n > 1 else [])
    return RequestRecord(arm=arm, concurrency=8, prompt_index=idx, prompt_id=f"p{idx}", variant="2rps",
                         t_sent_ns=S, t_end_ns=chunks[-1] + 1000, chunk_ns=chunks,
                         chunk_tokens=[1] + ([n - 1] if n > 1 else []), output_tokens=n, error=error)


def test_goodput_known_answer():
    recs = [_rec(0, 0.1, 11, 0.5),   # ttft 100, tpot 50, e2e 600: good
            _rec(1, 0.3, 11, 0.5),   # ttft 300: misses the TTFT SLO
            _rec(2, 0.1, 11, 1.5),   # tpot 150: misses the TPOT SLO
            _rec(3, 0.1, 1, 0.0),    # one token: TPOT counts as 0 (vLLM), good
            _rec(4, 0.1, 11, 0.5, error="http_status")]
    ok = request_table([r for r in recs if r.ok])
    assert good_requests(ok, {"ttft_ms": 200, "tpot_ms": 100}) == 2
    assert good_requests(ok, {"e2el_ms": 900}) == 3  # e2e 600, 800, 1600, 100 ms
    assert good_requests(ok, None) is None and good_requests(ok, {"ttft_ms": None}) is None
    (row,) = summarize(recs, None, None, {}, {("a", 8, "2rps"): PointInfo(wall_s=4.0, request_rate=2.0,
                                                                           burstiness=1.0)},
                       slo={"ttft_ms": 200, "tpot_ms": 100})
    assert row["goodput"] == pytest.approx(2 / 4.0) and row["goodput_share"] == pytest.approx(2 / 5)
    assert row["request_rate"] == 2.0 and row["burstiness"] == 1.0
    (row,) = summarize(recs, None, None, {})
    assert math.isnan(row["goodput"]) and row["request_rate"] is None


def test_vllm_export_of_a_rate_point(tmp_path):
    from tests.helpers.runfactory import make_run

    from speedbench.results.exports import vllm_results
    from speedbench.results.loader import load_run

    rd = make_run(tmp_path, concurrencies=(8,), n_prompts=4)
    summary = json.loads(rd.summary_path.read_text())
    for row in summary["rows"]:
        row.update(request_rate=2.0, burstiness=0.5, goodput=1.25)
    rd.write_summary(summary)
    res = next(iter(vllm_results(load_run(rd.path), VLLM.spec_counters).values()))
    assert res["request_rate"] == 2.0 and res["burstiness"] == 0.5 and res["max_concurrency"] is None
    assert res["request_goodput"] == 1.25


def test_rate_mode_run_end_to_end_on_the_fake(tmp_path):
    """`speedbench run` in rate mode (two arms on the fake, two rates, SLOs): the same
    arrival schedule in both arms, goodput and speedups per rate in the summary, the
    rate table in the report, and vLLM-shaped exports."""
    import yaml

    from speedbench.cli import main
    from speedbench.testing.hosting import FakeServer

    lines = [json.dumps({"id": f"q{i}", "prompt": f"question {i}"}) for i in range(6)]
    (tmp_path / "p.jsonl").write_text("\n".join(lines) + "\n")
    # 20 ms a step: a request spans 240 ms, so a busy host's stall rarely turns a prompt into
    # a burst (no client-side TPS) and the fast arm keeps its paired speedup
    with FakeServer(FakeConfig(ttft_s=0.02, t_step_s=0.02, output_tokens=12)) as srv:
        sc = {"name": "rate", "server": {"launcher": "external"},
              "arms": [{"name": "base", "base_url": srv.base_url}, {"name": "fast", "base_url": srv.base_url}],
              "baseline": "base",
              "workload": {"source": "jsonl", "path": str(tmp_path / "p.jsonl"), "max_tokens": 12, "warmup": 0},
              "load": {"mode": "rate", "rates": [10, 40], "burstiness": 0.5, "seed": 5},
              "slo": {"ttft_ms": 5000, "e2el_ms": 10000}}
        (tmp_path / "s.yaml").write_text(yaml.safe_dump(sc))
        assert main(["run", str(tmp_path / "s.yaml"), "-o", str(tmp_path / "out"), "--skip-doctor"]) == 0
    (run_dir,) = [p for p in (tmp_path / "out" / "rate").iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = {(r["arm"], r["variant"]): r for r in summary["rows"]}
    assert set(rows) == {("base", "10rps"), ("base", "40rps"), ("fast", "10rps"), ("fast", "40rps")}
    records = RunDir.open(run_dir).load_records()
    for (arm, v), r in rows.items():
        assert r["request_rate"] == float(v[:-3]) and r["burstiness"] == 0.5 and r["concurrency"] == 1000
        assert r["goodput"] > 0 and r["goodput_share"] == 1.0 and r["n_ok"] == 6
        # the point's load and arm are stored as fields, never left to be parsed from the label
        assert (r["workload"], r["series"]) == ("", arm)
        # speedups per rate, paired by prompt: the engine's clock pairs every prompt whatever
        # the host does; the client's pairs only the prompts whose TPS it read in both arms
        # (a stalled client turns some into bursts), and below 2 pairs the row says 0
        engine = r["speedup_engine_mean"]
        if arm == "base":
            assert r["speedup_pairs"] == 0 and (engine is None or math.isnan(engine))
        else:
            at_rate = [x for x in records if x.variant == v]
            assert engine is not None and engine > 0
            assert r["speedup_pairs"] == client_pairs(at_rate, "fast", "base")
    recs = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]

    def schedule(arm, v):
        rs = sorted((r for r in recs if r["arm"] == arm and r["variant"] == v), key=lambda r: r["prompt_index"])
        return [(r["t_queued_ns"] - rs[0]["t_queued_ns"]) / 1e9 for r in rs]

    for v in ("10rps", "40rps"):
        expected = arrival_offsets(6, float(v[:-3]), 0.5, 5)
        for arm in ("base", "fast"):
            assert schedule(arm, v) == pytest.approx(expected, abs=2e-3)  # the same arrivals in every arm
    md = (run_dir / "report.md").read_text()
    assert "## Request rate (open loop)" in md and "| fast | 40 | 0.50 | 6/6 |" in md
    assert main(["export", str(run_dir), "--format", "vllm", "--out", str(tmp_path / "v")]) == 0
    res = json.loads((tmp_path / "v" / "fast__c1000__40rps.json").read_text())
    assert res["request_rate"] == 40.0 and res["max_concurrency"] is None and res["request_goodput"] > 0
