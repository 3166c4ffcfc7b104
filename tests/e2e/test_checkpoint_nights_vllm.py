"""Two real nights of a training run's checkpoints (issue 56), on vLLM's CPU build.

scenarios/cpu_checkpoints.yaml trimmed to two checkpoints of one EAGLE 3 training run,
step 150 and step 600 (production, served from a copy of its folder), no baseline, c=4 and
a few short prompts: 2 server starts a night. Between the nights production's folder gets
step 150's weights under the same arm name and path, as after a bad upload. What the
construction guarantees is asserted, nothing about speed:

- served AL in the checkpoints' offline order (offline 2.563 against 2.952; served 2.44
  against 2.73 on the scenario's whole workload here);
- `compare --checkpoints` holds both checkpoints against production (the scenario's
  `checkpoint_reference`) and keeps production's two weight sets apart;
- `changes` calls production's AL on the second night, with the weights' hash as the cause.

Benchmarks/real_nights.py runs the full nights (every checkpoint, baseline, Slurm).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_cpu_scenario import REPO, speedbench

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed"),
]

TINY = REPO / ".fixtures" / "tiny"
SMALL = ("--skip-doctor", "--arms", "step150,step600", "--set", "concurrency=[4]", "--set", "workload.num_prompts=8",
         "--set", "workload.max_tokens=32", "--set", "workload.warmup=0")


def offline(step: int) -> float:
    return json.loads((TINY / "checkpoints" / f"eagle3-step{step:04d}" / "training.json").read_text())["offline_al"]


@pytest.fixture(scope="module")
def nights(vllm_slot, tmp_path_factory):
    root = tmp_path_factory.mktemp("nights")
    results, store = root / "results", root / "store" / "production"
    proc = speedbench("fixtures", "tiny", str(TINY))  # the checkpoints' folders, before the copy
    assert proc.returncode == 0, proc.stderr
    shutil.copytree(TINY / "checkpoints" / "eagle3-step0600", store)
    runs = []
    for night in (1, 2):
        if night == 2:  # the bad upload: step 150's weights, production's name, path and config
            shutil.copyfile(TINY / "checkpoints" / "eagle3-step0150" / "model.safetensors",
                            store / "model.safetensors")
        proc = speedbench("run", "scenarios/cpu_checkpoints.yaml", "-o", str(results), *SMALL,
                          "--set", f"arms.step600.speculative_config.model={store}")
        print(proc.stdout[-3000:], proc.stderr[-2000:])
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs.append(sorted((results / "cpu_checkpoints").iterdir())[-1])
    return {"results": results, "runs": runs}


def al(run: Path, arm: str) -> float:
    (row,) = [r for r in json.loads((run / "summary.json").read_text())["rows"] if r["arm"] == arm]
    return row["al_tokens"]


def test_served_al_follows_the_offline_order(nights):
    first = nights["runs"][0]
    assert offline(150) < offline(600)
    assert al(first, "step150") < al(first, "step600")
    # the second night's production serves step 150's weights: its AL is step 150's
    second = nights["runs"][1]
    # (the same weights in two servers: equal but for batch-shape numerics; the checkpoints
    # themselves lie about 0.3 apart here)
    assert abs(al(second, "step600") - al(second, "step150")) < 0.05
    assert al(second, "step600") < al(first, "step600") - 0.1


def test_compare_checkpoints_keeps_the_two_weight_sets_of_production_apart(nights):
    proc = speedbench("compare", "--checkpoints", str(nights["results"]), "--json")
    assert proc.returncode == 0, proc.stderr
    (sc,) = json.loads(proc.stdout)
    names = [c["checkpoint"] for c in sc["checkpoints"]]
    production = [n for n in names if n.startswith("step600 ·")]
    assert len(production) == 2 and all("(weights " in n for n in production), names
    assert sc["reference"] == production[0]  # the scenario's checkpoint_reference, its first weight set
    step150 = next(c for c in sc["checkpoints"] if c["checkpoint"].startswith("step150 ·"))
    assert step150["nights"] == 2
    assert {(v["metric"], v["point"]) for v in step150["versus_reference"]} >= {("AL", "pooled")}


def test_changes_calls_the_swapped_night_with_the_weights_hash(nights):
    proc = speedbench("changes", str(nights["results"]), "--json")
    assert proc.returncode == 0, proc.stderr  # suspicious, not an open regression: one night
    verdicts = {(v["arm"], v["metric"], v["point"]): v for v in json.loads(proc.stdout)}
    v = verdicts[("step600", "AL", "pooled")]
    assert v["status"] == "suspicious" and v["relative"] < -0.03 and v["baseline_nights"] == 1
    assert v["after_run"] == json.loads((nights["runs"][1] / "summary.json").read_text())["run_id"]
    assert any(line.startswith("step600 draft weights sha256: ") for line in v["what_changed"]), v["what_changed"]
    assert not any("config" in line for line in v["what_changed"])
    assert verdicts[("step150", "AL", "pooled")]["status"] == "insufficient data"  # nothing known changed
    proc = speedbench("changes", str(nights["results"]), "--strict")
    assert proc.returncode == 1 and "step600 draft weights sha256" in proc.stdout
