"""summary.json's typed tables (metrics/stored.py): read by attribute, and an old folder's
entry given back as it was stored."""

import dataclasses
import json
from pathlib import Path

import pytest

from speedbench.metrics.stored import CATEGORY_KEYS, CategoryRow, NoiseFloorEntry, ScreenEntry, StopEntry
from speedbench.results.loader import load_run

DATA = Path(__file__).resolve().parents[2] / "data"


def test_an_old_entry_round_trips_with_its_own_keys_and_order():
    old = {"category": "qa", "arm": "eagle3", "concurrency": 1, "al_tokens": 2.5, "gone_key": [1, 2]}
    row = CategoryRow.from_dict(old)
    assert (row.arm, row.category, row.al_tokens) == ("eagle3", "qa", 2.5)
    assert row.n_ok is None and not row.has("n_ok") and row.has("al_tokens")  # lacking a key is told apart
    assert row.cell("gone_key") == [1, 2]  # an undeclared key is kept, not dropped
    assert json.dumps(row.to_dict()) == json.dumps(old)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.arm = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        row["arm"]  # type: ignore[index]  # no Mapping: no reader goes back to string keys unseen


def test_a_new_entry_holds_every_declared_key():
    row = CategoryRow(arm="a", concurrency=4)
    assert all(row.has(k) for k in CATEGORY_KEYS) and list(row.to_dict())[:len(CATEGORY_KEYS)] == list(CATEGORY_KEYS)


def test_screening_predictions_are_typed_and_stored_back():
    stored = {"arm": "e3", "concurrency": 64, "al_tokens": 3.1, "predicted": [
        {"concurrency": 1, "speedup": 2.0, "ci_low": 1.8, "ci_high": 2.2}], "calibration": "c.json", "promoted": True}
    entry = ScreenEntry.from_dict(stored)
    assert entry.predicted[0].speedup == 2.0 and entry.promoted is True
    assert entry.to_dict() == stored
    assert ScreenEntry.from_dict({"arm": "e3", "predicted": None}).predicted == ()


@pytest.mark.parametrize("folder", ["cpu_tiny_runs/float16", "cpu_tiny_runs/bfloat16", "nightly/float16"])
def test_committed_folders_load_typed(folder):
    run = load_run(DATA / folder)
    stored = run.summary.get("categories") or []
    assert run.categories and len(run.categories) == len(stored)
    for typed, raw in zip(run.categories, stored):
        assert {k: v for k, v in typed.to_dict().items() if k in raw} == raw  # the headline keys are added
    for name, kind in (("noise_floor", NoiseFloorEntry), ("stopping", StopEntry), ("screening", ScreenEntry)):
        assert [e.to_dict() for e in getattr(run, name)] == (run.summary.get(name) or [])
        assert all(isinstance(e, kind) for e in getattr(run, name))
