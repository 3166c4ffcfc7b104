"""summary.json's typed blocks (metrics/stored_blocks.py): read once by results.Run, read
by attribute, an old folder's block given back as it was stored."""

import dataclasses
import json
from pathlib import Path

import pytest

from speedbench.metrics.stored_blocks import BaselineSource, Conditions, Controls, Reference
from speedbench.results.loader import load_run

DATA = Path(__file__).resolve().parents[2] / "data"

CONTROLS = {"present": [{"arm": "untrained", "control": "untrained"}],
            "failed": [{"control": "untrained", "arm": "untrained", "concurrency": 1, "variant": "",
                        "why": "untrained draft untrained at c=1: too fast", "gone_key": 1}], "note": ""}
CONDITIONS = {"checked": ["CPU steal"], "not_checked": [], "points": [
    {"arm": "eagle3", "concurrency": 4, "variant": "", "confounded": True, "why": ["CPU steal 20% vs 0%"],
     "rounds": 2, "arm_conditions": "steal 20%", "baseline_conditions": "not measured"},
    {"arm": "eagle3", "concurrency": 1, "variant": "", "confounded": False, "why": [], "rounds": 1,
     "arm_conditions": "", "baseline_conditions": ""}]}


def test_blocks_and_their_entries_round_trip_with_their_own_keys():
    for kind, stored in ((Controls, CONTROLS), (Conditions, CONDITIONS)):
        block = kind.from_dict(stored)
        assert json.dumps(block.to_dict()) == json.dumps(stored)
        with pytest.raises(dataclasses.FrozenInstanceError):
            block.note = "x"  # type: ignore[misc]
    reused = {"reused": True, "results": "r", "run_id": "old", "canary": [{"concurrency": 1, "ratio": 0.99,
                                                                           "tolerance": 0.05, "ok": True}]}
    src = BaselineSource.from_dict(reused)
    assert src.reused and src.canary[0].ratio == 0.99 and src.to_dict() == reused


def test_the_records_read_as_the_metrics_functions_did():
    typed_c, typed_k = Controls.from_dict(CONTROLS), Conditions.from_dict(CONDITIONS)
    assert typed_c.failed_lines() == ["untrained draft untrained at c=1: too fast"]
    why = "CPU steal 20% vs 0% (over 2 rounds; arm: steal 20%; baseline: not measured)"
    assert typed_k.confounded("eagle3", 4) == why
    assert typed_k.confounded("eagle3", 1) is None and typed_k.confounded("eagle3", 16) is None
    assert Controls.from_dict({}).failed_lines() == [] and Conditions.from_dict({}).confounded("a", 1) is None


def test_a_reference_reads_concurrency_keys_as_stored_by_json():
    ref = Reference.from_dict({"source": "paper", "arm": "e3", "speedup": {"1": 2.1, 4: 1.5},
                               "acceptance_length": {"qa": 3.2}})
    assert (ref.speedup_at(1), ref.speedup_at(4), ref.speedup_at(8)) == (2.1, 1.5, None)
    assert ref.al_of("qa") == 3.2 and ref.al_of("math") is None
    assert Reference.from_dict({}).speedup_at(1) is None


@pytest.mark.parametrize("folder", ["cpu_tiny_runs/float16", "nightly/float16"])
def test_committed_folders_load_typed(folder):
    run = load_run(DATA / folder)
    assert run.controls is None and run.conditions is None  # folders from before they were kept
    assert run.reference.to_dict() == run.summary["reference"]
    assert run.baseline_source.to_dict() == run.summary["baseline_source"]
    assert {a: c.to_dict() for a, c in run.arm_costs.items()} == run.summary["arms"]
    assert run.hardware == run.summary["hardware"] and run.percentiles == run.summary["percentiles"]
