"""A whole `speedbench run` through a stand-in engine (tests/helpers/fake_engine.py): the
fake server wrapped as an Engine, chosen by the scenario's ``server.engine`` and named by
no product code. The run launches it, measures a closed loop, reads AL from its counters
and from its per-request stats, pairs the speedup and writes the report: every part of
the run that is the engine's went through the interface, or this run could not work."""

from __future__ import annotations

import json

import pytest
from tests.helpers.bounds import client_pairs
from tests.helpers.cli_runs import scenario, write_prompts, write_yaml

from speedbench.cli import main
from speedbench.results.loader import load_run

STAND_IN = "tests.helpers.fake_engine:FakeEngine"


def _stand_in_run(tmp):
    prompts = write_prompts(tmp / "p.jsonl", [f"question {i}" for i in range(12)])
    server = {"engine": STAND_IN, "launcher": "local", "model": "fake-model",
              "args": {"t-step": 0.02, "output-tokens": 24}}
    arms = [{"name": "base"},
            {"name": "sd", "args": {"acceptance": "3,1,2"},
             "speculative_config": {"method": "eagle3", "model": "fake-draft", "num_speculative_tokens": 3}}]
    sc = scenario("stand-in", prompts, server=server, arms=arms, concurrency=[2],
                  workload={"max_tokens": 24, "warmup": 2})
    path = write_yaml(tmp / "s.yaml", sc)
    assert main(["run", str(path), "-o", str(tmp / "out"), "--skip-doctor"]) == 0
    (folder,) = (tmp / "out" / "stand-in").iterdir()
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _stand_in_run(tmp_path_factory.mktemp("stand-in"))


def test_the_stand_in_launched_every_arm_and_recorded_its_own_provenance(run):
    prov = json.loads((run / "provenance.json").read_text())
    assert {arm: p["engine"] for arm, p in prov.items()} == {"base": "fake", "sd": "fake"}
    assert "speedbench.testing.fake_server" in prov["sd"]["argv"]
    assert "--speculative-config" in prov["sd"]["argv"]  # the stand-in's own flag for the config
    assert json.loads((run / "host.json").read_text()) == {"summary": "the fake server's host"}


def test_al_from_its_counters_and_its_per_request_stats_agree(run):
    loaded = load_run(run)
    (sd,) = [r for r in loaded.rows if r.arm == "sd"]
    # acceptance 3,1,2 cycled: two accepted drafts a step on average, so AL is near 3
    assert 2.5 < sd.al_requests < 3.2
    assert sd.al_prometheus == pytest.approx(sd.al_requests, rel=0.02)
    assert all(r.spec is not None for r in loaded.records if r.arm == "sd" and not r.warmup)


def _sd_row(folder):
    """The sd row, its pairs checked: a stalled host can turn a request into one burst,
    which has no client-side TPS; the row then pairs fewer requests, or says it has no
    client-side speedup."""
    loaded = load_run(folder)
    (sd,) = [r for r in loaded.rows if r.arm == "sd"]
    assert sd.speedup_pairs == client_pairs(loaded.records, "sd", "base")
    if not sd.speedup_pairs:
        assert any(w.startswith("no client-side speedup") for w in sd.warnings), sd.warnings
    return sd


def test_the_speedup_is_paired_and_reported(run, tmp_path):
    sd = _sd_row(run)
    if sd.speedup_pairs and not sd.speedup_mean > 1.5:
        # base and sd run one after another on the client's clock: a host that starved the
        # sd fake for its whole point (about a second) reads it slow. A pairing fault reads
        # slow again; once more, in a fresh folder on fresh servers.
        print(f"sd read {sd.speedup_mean:.2f}x on the first run; measuring once more")
        sd = _sd_row(_stand_in_run(tmp_path))
    assert not sd.speedup_pairs or sd.speedup_mean > 1.5  # about AL tokens a step at the same step time
    report = (run / "report.md").read_text()
    assert "sd" in report and "speedup" in report.lower()
