"""The dry-run's cost estimate: defaults without history, measured figures with it."""

from __future__ import annotations

import json
from pathlib import Path

from speedbench.cli import main
from speedbench.run.cost import DEFAULT_START_S, describe, estimate
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


def _unfinished_run(root: Path, scenario: str, run_id: str, model: str, starts: dict[str, float]) -> Path:
    """A run folder as a run leaves it before its summary: the saved scenario and each
    server lifetime's arms.json entry (start seconds)."""
    run = root / scenario / run_id
    run.mkdir(parents=True)
    (run / "scenario.resolved.yaml").write_text(f"name: {scenario}\nserver: {{model: {model}}}\n")
    (run / "arms.json").write_text(json.dumps([{"arm": a, "repeat": 0, "start_s": s, "wall_s": 60.0, "gpus": 0}
                                               for a, s in starts.items()]))
    return run


def test_measured_starts_of_the_same_target_price_another_scenario(tmp_path):
    """cpu_drift has no run yet, but cpu_tiny measured the same target's starts: ~33 s,
    not the 600 s default."""
    drift = load_scenario(ROOT / "scenarios" / "cpu_drift.yaml")
    run = _unfinished_run(tmp_path, "cpu_tiny", "20261201T000000Z-bbbbbb", str(drift.server.model),
                          {"baseline": 31.0, "eagle3": 35.0})
    _unfinished_run(tmp_path, "other", "20261202T000000Z-cccccc", "org/another-model", {"baseline": 900.0})
    costs = {c.arm: c for c in estimate(build_plan(drift, n_prompts=8), tmp_path)}
    assert costs["baseline"].start_s == 31.0 and f"measured starts, run {run.name}" in costs["baseline"].basis
    # an arm no earlier run measured: the median start of the same target
    assert costs["eagle3-k1"].start_s == 33.0 and "same target" in costs["eagle3-k1"].basis
    assert all(c.start_s != DEFAULT_START_S for c in costs.values())


def test_a_different_target_leaves_the_default(tmp_path):
    drift = load_scenario(ROOT / "scenarios" / "cpu_drift.yaml")
    _unfinished_run(tmp_path, "other", "20261202T000000Z-cccccc", "org/another-model", {"baseline": 900.0})
    assert {c.start_s for c in estimate(build_plan(drift, n_prompts=8), tmp_path)} == {DEFAULT_START_S}


def test_a_cpu_plan_reports_server_hours_not_gpu_hours():
    sc = load_scenario(ROOT / "scenarios" / "cpu_drift.yaml")
    plan = build_plan(sc, n_prompts=8)
    text = "\n".join(describe(estimate(plan), plan))
    assert "GPU-hours" not in text and "server-hours" in text
    gpu = load_scenario(ROOT / "scenarios" / "kimi_coding.yaml")
    gplan = build_plan(gpu, inventory=[0, 1, 2, 3])
    assert "GPU-hours" in describe(estimate(gplan), gplan)[-1]


def test_dry_run_ports_are_chosen_at_start_unless_pinned(capsys, tmp_path):
    scenario = str(ROOT / "scenarios" / "cpu_tiny.yaml")
    assert main(["run", scenario, "--dry-run", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "--port 8000" not in out and "--port PORT" in out and "chosen at start" in out
    assert main(["run", scenario, "--dry-run", "-o", str(tmp_path), "--set", "server.port=8123"]) == 0
    out = capsys.readouterr().out
    assert "--port 8123" in out and "chosen at start" not in out


def test_dry_run_counts_a_local_files_prompts_when_num_prompts_is_unset(capsys, tmp_path):
    """Loaded as the run loads them (the file's coding rows, 2 of them warmup), not '0 prompts'."""
    from speedbench.workload import count_prompts, load_workload

    sc = load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml", ["workload.num_prompts=null"])
    n = len(load_workload(sc.workload).measured)
    assert count_prompts(sc.workload) == n and n > 16
    assert main(["run", str(ROOT / "scenarios" / "cpu_tiny.yaml"), "--dry-run", "-o", str(tmp_path),
                 "--set", "workload.num_prompts=null"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{n} prompts per point;" in out and "unknown until the data is loaded" not in out
    # a source that needs more than a file's read is left to the run
    random = load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml", ["workload.source=random"])
    assert count_prompts(random.workload) is None
