"""The dry-run's cost estimate: defaults without history, measured figures with it."""

from __future__ import annotations

import json
from pathlib import Path

from speedbench.run.cost import DEFAULT_START_S, estimate
from speedbench.run.plan import build_plan
from speedbench.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]


def test_kimi_coding_gets_gpu_hours_per_arm_from_defaults():
    sc = load_scenario(ROOT / "scenarios" / "kimi_coding.yaml")
    costs = {c.arm: c for c in estimate(build_plan(sc, inventory=[0, 1, 2, 3]))}
    for c in costs.values():
        assert c.gpus == 4 and c.starts == 1 and c.start_s == DEFAULT_START_S and c.basis == "defaults"
        # 80 coding prompts at c=1, 20 waves at c=4, 5 at c=16, plus warmup, 4096 tokens at 50 tok/s
        assert c.gpu_hours == c.wall_s / 3600 * 4 and c.gpu_hours > 1


def test_an_earlier_run_prices_starts_and_points(tmp_path):
    sc = load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml")
    run = tmp_path / "cpu_tiny" / "20261201T000000Z-aaaaaa"
    run.mkdir(parents=True)
    rows = [{"arm": a.name, "concurrency": c, "e2e_s_mean": 0.5} for a in sc.arms for c in sc.concurrency]
    arms = {a.name: {"server_start_s": [20.0, 30.0], "wall_s": 100.0, "gpus": 0, "gpu_hours": 0.0} for a in sc.arms}
    (run / "summary.json").write_text(json.dumps({"run_id": run.name, "rows": rows, "arms": arms}))
    costs = estimate(build_plan(sc, n_prompts=16), tmp_path)
    for c in costs:
        assert c.start_s == 25.0 and c.gpus == 0 and c.basis == f"run {run.name}"
        # per round: c=1 16 x 0.5 s, c=4 4 x 0.5, c=16 1 x 0.5, warmup 2 + 1 + 1 waves
        assert c.measure_s == 3 * (8.0 + 2.0 + 0.5 + (1.0 + 0.5 + 0.5))
        assert c.wall_s == 3 * 25.0 + c.measure_s
