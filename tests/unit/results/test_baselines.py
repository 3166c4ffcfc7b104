"""Matching an earlier run's baseline: which facts count, and why a candidate is refused."""

from __future__ import annotations

import datetime as dt

from speedbench.engine.vllm import record
from speedbench.results.baselines import Candidate, differences, pick, scenario_facts
from speedbench.results.baselines import provenance_facts as typed_facts
from speedbench.results.rundir import RunDir
from speedbench.scenario import validate_data



def provenance_facts(saved: dict) -> dict:
    """The match facts of an arm's provenance as vLLM saves it."""
    return typed_facts(record.read(saved))


BASE = {"name": "t", "server": {"model": "m", "port": 8000}, "arms": [{"name": "base"}]}


def test_per_start_facts_do_not_count():
    prov = {"vllm_version": "0.32.0", "model": "m", "hardware": {"summary": "4x H200"},
            "argv": ["vllm", "serve", "m", "--port", "8123", "--host=0.0.0.0", "--max-num-seqs", "16"],
            "data": {"sha256": "abc"}, "base_url": "http://h:8123"}
    other_start = {**prov, "argv": ["vllm", "serve", "m", "--port", "9000", "--max-num-seqs", "16"],
                   "base_url": "http://h:9000"}
    assert differences(provenance_facts(prov), provenance_facts(other_start)) == []
    newer = {**prov, "vllm_version": "0.33.0"}
    assert differences(provenance_facts(prov), provenance_facts(newer)) == ["vllm_version: '0.32.0' != '0.33.0'"]
    more_seqs = {**prov, "argv": [*prov["argv"][:-1], "32"]}
    assert [d.split(":")[0] for d in differences(provenance_facts(prov), provenance_facts(more_seqs))] == ["argv"]


def test_scenario_facts_ignore_names_and_ports_but_not_the_workload():
    a = validate_data(BASE)
    renamed = validate_data({**BASE, "name": "other", "server": {"model": "m", "port": 9000},
                             "arms": [{"name": "base", "description": "same server"}]})
    assert differences(scenario_facts(a), scenario_facts(renamed)) == []
    fewer = validate_data({**BASE, "workload": {"num_prompts": 10}})
    assert [d.split(":")[0] for d in differences(scenario_facts(a), scenario_facts(fewer))] == ["workload"]
    args = validate_data({**BASE, "arms": [{"name": "base", "args": {"max-num-seqs": 8}}]})
    assert [d.split(":")[0] for d in differences(scenario_facts(a), scenario_facts(args))] == ["baseline_arm"]


def test_pick_takes_the_newest_young_match(tmp_path):
    now = dt.datetime.now(dt.timezone.utc)

    def cand(name: str, days: float, mismatches: list[str]) -> Candidate:
        return Candidate(RunDir(tmp_path / name), "base", now - dt.timedelta(days=days), mismatches)

    assert pick([], 7) == (None, "no finished run found")
    good_old, good_new = cand("old", 3, []), cand("new", 1, [])
    assert pick([cand("newest", 0.1, ["workload: ..."]), good_new, good_old], 7)[0] is good_new
    assert pick([good_old], 2) == (None, "every earlier run is older than 2 days")
    none, why = pick([cand("newest", 0.1, ["vllm_version: '0.32.0' != '0.33.0'"])], 7)
    assert none is None and "newest" in why and "vllm_version" in why
