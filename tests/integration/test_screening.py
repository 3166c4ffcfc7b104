"""A screening matrix run here (``speedbench submit --executor local``): one server per
checkpoint, no baseline, then a full run of the promoted checkpoint only."""

from __future__ import annotations

import json

from tests.helpers.cli_runs import fake_local, scenario, write_prompts, write_yaml
from tests.integration.test_reliability import out_of, sb

SPEC = {"method": "eagle3", "model": "/ckpt/none", "num_speculative_tokens": 3}
CKPTS = {"c1": "0", "c2": "2", "c3": "1", "c4": "2/1"}  # accepted drafts per step: AL 1, 3, 2, ~2.5


def test_a_screening_matrix_starts_one_server_per_checkpoint_then_runs_the_promoted_in_full(tmp_path):
    prompts = write_prompts(tmp_path / "p.jsonl", [f"q{i}" for i in range(8)])
    sc = scenario("scr", prompts, server=fake_local(**{"t-step": "0.02", "output-tokens": "16"}),
                  arms=[{"name": "base"}, {"name": "eagle3", "speculative_config": SPEC}], concurrency=[1, 4],
                  load={"mode": "screen", "screen_concurrency": 8})
    write_yaml(tmp_path / "s.yaml", sc)
    matrix = write_yaml(tmp_path / "m.yaml", {
        "results": str(tmp_path / "res"), "scenarios": ["s.yaml"], "promote": {"best": 1, "beats": "c3"},
        "checkpoints": [{"name": n, "set": [f"arms.eagle3.speculative_config.model=/ckpt/{n}@accept={a}"]}
                        for n, a in CKPTS.items()]})
    res = sb(["submit", str(matrix), "--executor", "local", "--skip-doctor"], tag="screen-matrix", cwd=tmp_path,
             timeout=300)
    assert res.returncode == 0, out_of(res)
    runs = sorted((tmp_path / "res" / "scr").iterdir())
    assert len(runs) == 5  # 4 screening runs, 1 full run
    servers = [sorted(json.loads((r / "provenance.json").read_text())) for r in runs]
    assert servers[:4] == [["eagle3"]] * 4  # screening: 4 servers, no baseline
    assert servers[4] == ["base", "eagle3"]  # the promoted checkpoint, in full
    full = json.loads((runs[4] / "summary.json").read_text())
    assert full["load"]["mode"] == "concurrency" and full["screening"] == []
    assert {r["concurrency"] for r in full["rows"]} == {1, 4}
    spec = [r for r in full["rows"] if r["arm"] == "eagle3"]
    for r in spec:  # measured this time; a point whose requests a stall made bursts says so instead
        assert r["speedup_mean"] > 1 if r["speedup_pairs"] else \
            any(w.startswith("no client-side speedup") for w in r["warnings"]), r
    # c2 and c4 beat c3; the best 1 of them is c2
    prov = json.loads((runs[4] / "provenance.json").read_text())
    assert "/ckpt/c2@" in prov["eagle3"]["speculative_config"]["model"]
    assert "promoted to a full run: ['scr x c2']" in out_of(res)
    assert (tmp_path / "res" / "site" / "index.html").is_file()


def test_screening_stops_each_checkpoint_once_its_al_interval_is_narrow(tmp_path):
    """Screening with sequential stopping on AL (stop.al_ci_halfwidth): no baseline is
    needed to stop, and a checkpoint whose AL is settled spends the first look only."""
    prompts = write_prompts(tmp_path / "p.jsonl", [f"q{i}" for i in range(64)])
    arms = [{"name": "base"}] + [{"name": n, "speculative_config": {**SPEC, "model": f"/ckpt/{n}@accept={a}"}}
                                 for n, a in (("c2", "2"), ("c4", "2/1"))]
    sc = scenario("scrstop", prompts, server=fake_local(**{"t-step": "0.001", "output-tokens": "16"}), arms=arms,
                  load={"mode": "screen", "screen_concurrency": 16},
                  stop={"al_ci_halfwidth": 0.02, "min_prompts": 16})
    path = write_yaml(tmp_path / "s.yaml", sc)
    res = sb(["run", str(path), "-o", str(tmp_path / "out"), "--skip-doctor"], tag="screen-stop", cwd=tmp_path,
             timeout=120)
    assert res.returncode == 0, out_of(res)
    (run,) = (tmp_path / "out" / "scrstop").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    stops = {s["arm"]: s for s in summary["stopping"]}
    assert sorted(stops) == ["c2", "c4"]
    assert all(s["prompts"] == 16 for s in stops.values()), stops  # every request has the same AL
    assert {e["arm"] for e in summary["screening"]} == {"c2", "c4"}
