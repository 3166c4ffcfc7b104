"""Provenance is a typed record (speedbench/engine/provenance.py): vLLM fills it in, and reads its
own provenance.json entries back, old run folders' included, keeping their exact bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speedbench.engine.vllm import VllmEngine
from speedbench.results import RunDir
from speedbench.results.loader import load_run

DATA = Path(__file__).resolve().parents[2] / "data"
OLD = sorted(DATA.glob("*/*/provenance.json")) + sorted(DATA.glob("induced_al_drift/provenance.json"))


@pytest.mark.parametrize("path", OLD, ids=lambda p: str(p.relative_to(DATA)))
def test_old_run_folders_read_as_typed_records(path):
    saved = json.loads(path.read_text())
    for arm, entry in saved.items():
        prov = VllmEngine().read_provenance(entry)
        assert prov.engine == "vllm" and prov.engine_label == "vLLM" and prov.arm == arm
        assert prov.engine_version and prov.engine_version == entry["vllm_version"]
        assert prov.target == entry["model"] and list(prov.argv) == entry["argv"]
        assert prov.speculative == entry["speculative"] and prov.k == entry["num_speculative_tokens"]
        assert prov.eagle_version == entry["eagle_version"]
        assert (prov.draft is None) == (not entry["draft"])
        if prov.draft:
            assert prov.draft.config_sha256 == entry["draft"]["config_sha256"]
            assert prov.draft.weights_sha256 == entry["draft"].get("weights_sha256", "")  # older: none
        assert prov.hardware_summary == entry["hardware"]["summary"]
        assert prov.saved == entry  # written back, the same bytes
        assert "server_process" in prov.engine_part  # vLLM's own, read only by engine/vllm


def test_a_run_folder_loads_with_its_engine():
    run = load_run(DATA / "cpu_tiny_runs" / "bfloat16")
    assert run.engine is not None and run.engine.name == "vllm"
    notes = {label for p in run.provenance.values() for label, _ in p.notes}
    assert notes == {"CPU attention kernel"}


def test_early_shapes_still_read():
    prov = VllmEngine().read_provenance({"vllm": {"version": "0.6.0"}, "target_model": "t", "draft_model": "d",
                                         "hardware": "8x A100"})
    assert (prov.engine_version, prov.target, prov.draft_model, prov.hardware_summary) == ("0.6.0", "t", "d", "8x A100")
    assert VllmEngine().read_provenance({}).engine_version == ""


def test_a_run_without_its_engine_cannot_read_provenance():
    from speedbench.results import Run

    rd = RunDir.open(DATA / "cpu_tiny_runs" / "bfloat16")
    with pytest.raises(ValueError, match="engine"):
        _ = Run(rd, rd.load_summary()).provenance
