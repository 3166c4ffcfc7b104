"""The client's own timing error through the real run path: `speedbench run` with
sequential stopping against two fake servers of exact timing, while the client's event
loop is made to stall (a task on the same loop blocks it with time.sleep). The stamps
of token arrivals then come late by up to a stall; the speedup interval must be widened
by what that can do, say so, and the point must not stop on an interval narrower than it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import speedbench.run.point
from speedbench.cli import main
from speedbench.loadgen import run_async
from speedbench.metrics.rows import summarize
from speedbench.metrics.table import request_table
from speedbench.results import RunDir
from speedbench.testing import FakeConfig
from speedbench.testing.hosting import FakeProcess
from speedbench.testing.script import prompt_text, true_per_user_tps
from tests.helpers.bounds import high

# baseline: 1 token per 20 ms step; speculative: 4 tokens per 30 ms step, no noise: the
# interval over prompts alone is narrow, and the client's stalls are most of its error
T_BASE, T_SPEC, K = 0.020, 0.030, 3
NOMINAL = (K + 1) * T_BASE / T_SPEC
N_PROMPTS, C, TARGET = 32, 16, 0.02
STALL_S, EVERY_S = 0.012, 0.008  # the client's loop blocked 12 ms of every 20


async def _stalls() -> None:
    while True:
        time.sleep(STALL_S)  # blocks the loop: every socket read due meanwhile is stamped late
        await asyncio.sleep(EVERY_S)


def _stalling_run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    async def with_stalls() -> Any:
        hog = asyncio.create_task(_stalls())
        try:
            return await coro
        finally:
            hog.cancel()
    return run_async(with_stalls())


def _scenario(tmp_path: Path, base_url: str, spec_url: str) -> Path:
    lines = [json.dumps({"id": f"q{i}", "prompt": f"question number {i}", "category": "coding"})
             for i in range(N_PROMPTS)]
    (tmp_path / "p.jsonl").write_text("\n".join(lines) + "\n")
    sc = {"name": "lag", "server": {"launcher": "external"},
          "arms": [{"name": "base", "base_url": base_url}, {"name": "spec", "base_url": spec_url}],
          "baseline": "base", "concurrency": [C],
          "workload": {"source": "jsonl", "path": str(tmp_path / "p.jsonl"), "max_tokens": 64, "warmup": 0},
          "stop": {"speedup_ci_halfwidth": TARGET, "min_prompts": 16, "max_prompts": N_PROMPTS, "seed": 5}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path


def test_a_lagging_client_widens_the_interval_by_its_own_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(speedbench.run.point, "run_async", _stalling_run_async)
    base_cfg = FakeConfig(t_step_s=T_BASE, output_tokens=33)
    spec_cfg = FakeConfig(t_step_s=T_SPEC, output_tokens=33, k=K)
    with FakeProcess(base_cfg) as base, FakeProcess(spec_cfg) as spec:
        path = _scenario(tmp_path, base.base_url, spec.base_url)
        assert main(["run", str(path), "-o", str(tmp_path / "out"), "--skip-doctor"]) == 0
        true_base = {prompt_text(e.body): true_per_user_tps(e.emit_ns, e.tokens)
                     for e in base.log() if e.body.get("stream")}
        true_spec = {prompt_text(e.body): true_per_user_tps(e.emit_ns, e.tokens)
                     for e in spec.log() if e.body.get("stream")}
    (run_dir,) = (tmp_path / "out" / "lag").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    row = next(r for r in summary["rows"] if r["arm"] == "spec")
    stop = next(s for s in summary["stopping"] if s["arm"] == "spec")
    records = RunDir.open(run_dir).load_records()
    stop["ci_high"], stop["lag_bound"] = high(stop["ci_high"]), high(stop["lag_bound"])
    row["speedup_ci_high"], row["speedup_lag_bound"] = high(row["speedup_ci_high"]), high(row["speedup_lag_bound"])

    # the truth: what the fakes emitted (their own clock), over the pairs the interval used
    table = request_table(records)
    tps = {(r.arm, f"question number {r.prompt_id[1:]}"): r.per_user_tps for r in table.itertuples()}
    used = [t for t in true_spec if ("spec", t) in tps and np.isfinite(tps[("spec", t)])
            and np.isfinite(tps.get(("base", t), np.nan))]
    truth = np.mean([true_spec[t] for t in used]) / np.mean([true_base[t] for t in used])
    # the same records without their lag: the interval as it was before the client's error counted
    bare = summarize([replace(r, loop_lag_ns=None) for r in records], None, "base", {"base": {}, "spec": {}})
    bare_row = next(r for r in bare if r["arm"] == "spec")
    lags = [r.loop_lag_ns / 1e6 for r in records if r.loop_lag_ns is not None]
    with capsys.disabled():
        print(f"\nlagging client: emitted truth {truth:.4f} (nominal {NOMINAL:.4f}) over {len(used)} pairs; "
              f"client {row['speedup_mean']:.4f}; interval without the lag [{bare_row['speedup_ci_low']:.4f}, "
              f"{bare_row['speedup_ci_high']:.4f}], widened [{row['speedup_ci_low']:.4f}, "
              f"{row['speedup_ci_high']:.4f}] (lag bound {row['speedup_lag_bound']:.2%}); stopped: "
              f"{stop['reason']} after {stop['prompts']} prompts, look interval [{stop['ci_low']:.4f}, "
              f"{stop['ci_high']:.4f}]; loop lag per request: median {np.median(lags):.1f} ms, "
              f"max {max(lags):.1f} ms; point max {row['loop_lag_ms_max']:.1f} ms")

    # every measured record carries the lag of its window, and the probe saw the stalls
    assert len(lags) == len(records) and row["speedup_lag_bound"] > 0
    # the widened interval holds what the servers did, and contains the bare one
    assert row["speedup_ci_low"] <= truth <= row["speedup_ci_high"]
    assert stop["ci_low"] <= truth <= stop["ci_high"]
    assert row["speedup_ci_low"] <= bare_row["speedup_ci_low"] <= bare_row["speedup_ci_high"] \
        <= row["speedup_ci_high"]
    # the row and the report say so when the lag is a visible part of the interval
    bare_half = (bare_row["speedup_ci_high"] - bare_row["speedup_ci_low"]) / 2 / bare_row["speedup_mean"]
    said = [w for w in row["warnings"] if "event loop lagged" in w]
    assert bool(said) == (row["speedup_lag_bound"] > 0.25 * bare_half)
    assert said, "12 ms stalls on 240-640 ms windows are far more than a noise-free interval's width"
    assert "event loop lagged" in (run_dir / "report.md").read_text()
    # stopping read the widened look interval: it stopped only if that was narrow enough
    half = (stop["ci_high"] - stop["ci_low"]) / 2 / stop["speedup"]
    assert half >= stop["lag_bound"] / 2
    assert (stop["reason"] == "target_halfwidth") == (half <= TARGET)
