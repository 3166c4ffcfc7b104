"""A screening matrix on the real one-node Slurm (issue 21): 4 checkpoints start 4 servers,
no baseline; the promote job then submits the promoted checkpoint's full run and the
dashboard. Same cluster set-up as test_slurm.py (tests/helpers/slurm_cluster.py)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from speedbench.results import RunDir
from tests.helpers.cli_runs import scenario, write_prompts, write_yaml
from tests.integration.test_slurm import REPO, WHY, assert_nothing_left, job_output, sb, wait_jobs
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(WHY is not None, reason=f"no single-node Slurm here: {WHY}")]

SPEC = {"method": "eagle3", "model": "/ckpt/none", "num_speculative_tokens": 3}
CKPTS = {"c1": "0", "c2": "2", "c3": "1", "c4": "2/1"}  # accepted drafts per step: AL 1, 3, 2, ~2.5


def _record(root: Path) -> dict:
    (path,) = root.glob("matrix-*.json")
    return json.loads(path.read_text())


def test_screening_matrix_of_4_checkpoints_starts_4_servers_then_promotes(cluster, tmp_path, tag):
    prompts = write_prompts(tmp_path / "p.jsonl", [f"q{i}" for i in range(4)])
    server = {"launcher": "local", "model": "fake-model", "model_arg": "flag",
              "command": [sys.executable, "-m", "speedbench.testing.fake_server"],
              "args": {"t-step": "0.002", "output-tokens": "8"}}
    arms = [{"name": "base"}, {"name": "eagle3", "speculative_config": SPEC}]
    sc = scenario("scrn", prompts, server=server, arms=arms, concurrency=[1],
                  load={"mode": "screen", "screen_concurrency": 4})
    sc["executor"] = {"slurm": {"speedbench": [sys.executable, "-m", "speedbench.cli"],
                                "setup": [f"export PYTHONPATH={REPO}"], "mem": "1500M", "signal_before_s": 0}}
    write_yaml(tmp_path / "s.yaml", sc)
    root = tmp_path / "nightly"
    matrix = write_yaml(tmp_path / "m.yaml", {
        "results": str(root), "scenarios": ["s.yaml"], "promote": {"best": 1},
        "checkpoints": [{"name": n, "set": [f"arms.eagle3.speculative_config.model=/ckpt/{n}@accept={a}"]}
                        for n, a in CKPTS.items()]})
    res = sb(cluster, ["submit", str(matrix), "--skip-doctor"], tag=tag, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    rec = _record(root)
    cells = rec["cells"]
    assert [len(c["arm_jobs"]) for c in cells] == [1, 1, 1, 1]  # 4 server jobs, not 4 x (baseline + draft)
    states = wait_jobs(cluster, [j for c in cells for j in (*c["arm_jobs"], c["gather"])] + [rec["promote_job"]],
                       timeout=180)
    assert set(states.values()) == {"COMPLETED"}, (states, "\n".join(job_output(Path(c["run"])) for c in cells))
    for c in cells:
        assert sorted(RunDir.open(c["run"]).load_provenance()) == ["eagle3"]  # each job's file, merged
    deadline = time.monotonic() + 30  # the promote job rewrites the record once it has submitted
    while "dashboard_job" not in rec and time.monotonic() < deadline:
        time.sleep(0.5)
        rec = _record(root)
    assert [p["checkpoint"] for p in rec["promoted"]] == ["c2"]
    (full,) = rec["promoted"]
    states = wait_jobs(cluster, [*full["arm_jobs"], full["gather"], rec["dashboard_job"]], timeout=180)
    assert set(states.values()) == {"COMPLETED"}, (states, job_output(Path(full["run"])))
    summary = json.loads((Path(full["run"]) / "summary.json").read_text())
    assert summary["load"]["mode"] == "concurrency" and {r["arm"] for r in summary["rows"]} == {"base", "eagle3"}
    html = (Path(rec["site"]) / "index.html").read_text()
    assert "measured" in html and "no calibration" in html  # measured and screened runs are told apart
    assert_nothing_left(cluster, tag, Path(full["run"]))
