"""The run path's stopping decision for one round of one point (stopping/point.py), on
records written to a real run folder: who may stop, when, and what points.json keeps."""

from __future__ import annotations

import math

import numpy as np

from speedbench.stopping.looks import EXHAUSTED, MAX_PROMPTS, REACHED
from speedbench.records import PointKey, RequestRecord, SpecStats
from speedbench.results import RunDir
from speedbench.results.tail import baseline_tail
from speedbench.stopping.point import point_stop
from speedbench.scenario import validate_data

S = 1_000_000_000
SPEC = {"method": "eagle3", "model": "d", "num_speculative_tokens": 3}


def _scenario(stop: dict, arms: list[dict] | None = None):
    arms = arms or [{"name": "base"}, {"name": "spec", "speculative_config": SPEC}]
    return validate_data({"name": "t", "server": {"model": "m"}, "arms": arms, "concurrency": [4], "stop": stop})


def _rec(arm: str, i: int, tps: float, steps: int = 0, accepted: int = 0) -> RequestRecord:
    """A request of 17 tokens at ``tps`` per-user TPS (16 tokens after the first)."""
    first = S
    spec = SpecStats(num_spec_steps=steps, num_draft_tokens=3 * steps, num_accepted_tokens=accepted) if steps else None
    return RequestRecord(arm=arm, concurrency=4, prompt_index=i, prompt_id=f"p{i}", t_sent_ns=first - 1000,
                         t_end_ns=first + int(16 / tps * S) + 1, chunk_ns=[first, first + int(16 / tps * S)],
                         chunk_tokens=[1, 16], output_tokens=17, spec=spec)


def _records(arm: str, tps: np.ndarray, **spec) -> list[RequestRecord]:
    return [_rec(arm, i, float(t), **spec) for i, t in enumerate(tps)]


def test_the_baseline_runs_every_look_and_a_paired_arm_stops_when_narrow(tmp_path):
    rd = RunDir.create(tmp_path, "t")
    sc = _scenario({"speedup_ci_halfwidth": 0.02, "min_prompts": 16, "max_prompts": 64})
    rng = np.random.default_rng(0)
    base_stop = point_stop(sc, PointKey("base", 4, ""), 0, 100, baseline_tail(sc, rd))
    assert base_stop is not None and base_stop.looks == [16, 32, 64]
    assert [len(b) for b in base_stop.batches()] == [16, 16, 32]
    assert sorted(i for b in base_stop.batches() for i in b) == sorted(base_stop.order[:64])
    base = _records("base", 100 * rng.lognormal(0, 0.002, 100))
    assert base_stop.go_on(base[:16], 16) and base_stop.go_on(base[:32], 32)  # the baseline never stops
    base_stop.go_on(base[:64], 64)
    marks = base_stop.marks(100)
    assert {k: v for k, v in marks.items() if k != "stop_intervals"} == {
        "stop_reason": MAX_PROMPTS, "stop_prompts": 64, "stop_look": 3, "stop_looks": 3}
    assert math.isnan(marks["stop_intervals"]["speedup"])  # nothing to pair the baseline with

    spec_stop = point_stop(sc, PointKey("spec", 4, ""), 0, 100, baseline_tail(sc, rd))
    assert spec_stop is not None and spec_stop.order == base_stop.order  # the same order in every arm
    spec = _records("spec", 200 * rng.lognormal(0, 0.002, 100), steps=4, accepted=12)
    assert spec_stop.go_on(spec[:16], 16)  # no baseline records in the folder yet: cannot stop
    assert spec_stop.notes and "cannot stop" in spec_stop.notes[0]
    for r in base[:64]:
        rd.append_record(r)
    assert not spec_stop.go_on(spec[:32], 32)  # 0.2% noise per request: narrow at once
    assert spec_stop.marks(100)["stop_reason"] == REACHED and spec_stop.marks(100)["stop_prompts"] == 32
    # the interval the rule stopped on is the one points.json keeps (the summary reads it back)
    kept = spec_stop.marks(100)["stop_intervals"]
    assert 1.95 < kept["ci_low"] < kept["speedup"] < kept["ci_high"] < 2.05
    assert (kept["ci_high"] - kept["ci_low"]) / 2 / kept["speedup"] <= 0.02


def test_a_noisy_arm_runs_to_the_end(tmp_path):
    rd = RunDir.create(tmp_path, "t")
    sc = _scenario({"speedup_ci_halfwidth": 0.02, "min_prompts": 16})
    rng = np.random.default_rng(1)
    for r in _records("base", 100 * rng.lognormal(0, 0.3, 40)):
        rd.append_record(r)
    stop = point_stop(sc, PointKey("spec", 4, ""), 0, 40, baseline_tail(sc, rd))
    assert stop is not None and stop.looks == [16, 32, 40]
    spec = _records("spec", 200 * rng.lognormal(0, 0.3, 40))
    assert all(stop.go_on(spec[:n], n) for n in stop.looks)
    assert stop.marks(40)["stop_reason"] == EXHAUSTED and stop.marks(40)["stop_prompts"] == 40


def test_al_halfwidth_stops_a_speculative_arm_without_a_baseline(tmp_path):
    """Screening: no baseline arm, the AL interval decides; a non-speculative arm never stops on AL."""
    rd = RunDir.create(tmp_path, "t")
    sc = _scenario({"al_ci_halfwidth": 0.02, "min_prompts": 16},
                   arms=[{"name": "ckpt", "speculative_config": SPEC}])
    stop = point_stop(sc, PointKey("ckpt", 4, ""), 0, 200, baseline_tail(sc, rd))
    assert stop is not None and stop.baseline is None
    steady = _records("ckpt", np.full(200, 200.0), steps=5, accepted=10)  # AL 3 on every request
    assert not stop.go_on(steady[:16], 16) and stop.marks(200)["stop_reason"] == REACHED
    rng = np.random.default_rng(2)
    noisy = [_rec("ckpt", i, 200.0, steps=5, accepted=int(a)) for i, a in enumerate(rng.integers(0, 16, 200))]
    again = point_stop(sc, PointKey("ckpt", 4, ""), 0, 200, baseline_tail(sc, rd))
    assert again is not None and again.go_on(noisy[:16], 16)  # AL from 1 to 4 per request: not narrow yet


def test_each_look_parses_only_the_records_new_since_the_last(tmp_path, monkeypatch):
    """The baseline's records are read as they grow: a look parses the lines appended since
    the previous look, never the whole run again; another writer's file is picked up too."""
    import speedbench.results.tail as sp

    parsed: list[str] = []
    real = sp.parse_line
    monkeypatch.setattr(sp, "parse_line", lambda text: parsed.append(text) or real(text))
    rd = RunDir.create(tmp_path, "t")
    tail = sp.RecordTail(rd, "base")
    key = PointKey("spec", 4, "")
    base = _records("base", np.full(40, 100.0))
    for r in base[:16]:
        rd.append_record(r)
    rd.append_record(_rec("spec", 0, 200.0))  # another arm's record: parsed, not kept
    assert [r.prompt_index for r in tail.records(key, 0)] == list(range(16)) and len(parsed) == 17
    for r in base[16:32]:
        rd.append_record(r)
    assert len(tail.records(key, 0)) == 32 and len(parsed) == 33
    assert tail.records(key, 1) == [] and len(parsed) == 33  # nothing new: nothing parsed
    job = RunDir.open(rd.path, tag="job7")  # a cluster job's own file
    for r in base[32:]:
        job.append_record(r)
    assert len(tail.records(key, 0)) == 40 and len(parsed) == 41
