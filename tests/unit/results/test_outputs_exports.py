"""Each point's outputs verdict (summary.json's ``outputs`` block) in every export:
summary.csv and the csv / parquet tables (beside the headline speedup), the vLLM-format
JSON (metadata keys), the speculation profile and MLflow; a folder from before the block
exports "not checked" / "not recorded"."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from tests.helpers.runfactory import make_run

from speedbench.engine.vllm import VllmEngine
from speedbench.results import mlflow_export
from speedbench.results.loader import load_run
from speedbench.results.exports import export_run
from speedbench.results.output_summary import OUTPUT_COLUMNS

# (arm, concurrency) -> (verdict, identical fraction, reason)
VERDICTS = {
    ("eagle3", 1): ("identical", 1.0, "4 of 4 identical"),
    ("eagle3", 4): ("lossy", 0.5, "2 of 2 divergences with the arm's token at least 0.5 nats below the target's"),
    ("eagle3.1", 1): ("lossless within numerics", 0.75, "1 divergences, all near-ties (under 0.5 nats)"),
    ("eagle3.1", 4): ("identical", 1.0, "4 of 4 identical"),
    ("baseline", 4): ("identical", 1.0, "4 of 4 identical"),
}


def _entry(arm: str, c: int, verdict: str, frac: float, reason: str) -> dict:
    ref = {"arm": "baseline", "concurrency": 1 if arm == "baseline" else c, "variant": ""}
    return {"arm": arm, "concurrency": c, "variant": "", "reference": ref,
            "floor": "batch shape" if arm == "baseline" else "", "verdict": verdict, "reason": reason,
            "pairs": 4, "identical": round(4 * frac), "identical_fraction": frac}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(a run whose summary has an outputs block, the same run from before the block)."""
    root = tmp_path_factory.mktemp("outputs")
    old = make_run(root / "old", concurrencies=(1, 4), n_prompts=4)
    new = make_run(root / "new", concurrencies=(1, 4), n_prompts=4)
    summary = json.loads(new.summary_path.read_text())
    summary["outputs"] = {"near_tie_nats": 0.5, "top": 20, "checks_per_point": 32,
                          "points": [_entry(a, c, *v) for (a, c), v in VERDICTS.items()]}
    new.write_summary(summary)  # summary.csv too
    return load_run(new.path), load_run(old.path)


def _by_point(df: pd.DataFrame) -> dict[tuple[str, int], dict]:
    return {(r["arm"], int(r["concurrency"])): r for r in df.to_dict("records")}


def _check_table(df: pd.DataFrame) -> None:
    cols = list(df.columns)
    at = cols.index("speedup_clock_reason")
    assert cols[at + 1:at + 4] == list(OUTPUT_COLUMNS)  # right after the headline speedup's columns
    assert cols.index("speedup") < at < cols.index("speedup_client_mean")
    got = _by_point(df)
    for (arm, c), (verdict, frac, reason) in VERDICTS.items():
        row = got[(arm, c)]
        assert (row["outputs_verdict"], row["outputs_identical_fraction"], row["outputs_reason"]) == \
            (verdict, pytest.approx(frac), reason)
    ref = got[("baseline", 1)]  # what the baseline's other points are held against
    assert ref["outputs_verdict"] == "not checked" and ref["outputs_reason"].startswith("the reference")
    assert math.isnan(ref["outputs_identical_fraction"])


def test_summary_csv_has_the_verdict_beside_the_speedup(runs):
    new, _ = runs
    assert new.dir is not None
    _check_table(pd.read_csv(new.dir.summary_csv_path))


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_table_exports_carry_the_verdict(runs, tmp_path, fmt):
    new, _ = runs
    export_run(new, fmt, tmp_path, VllmEngine().spec_counters)
    df = pd.read_csv(tmp_path / "summary.csv") if fmt == "csv" else pd.read_parquet(tmp_path / "summary.parquet")
    _check_table(df)
    cats = pd.read_csv(tmp_path / "categories.csv") if fmt == "csv" else pd.read_parquet(
        tmp_path / "categories.parquet")
    assert "outputs_verdict" not in cats.columns  # a verdict is a point's, not a category's


def test_vllm_files_profiles_and_mlflow_carry_the_verdict(runs, tmp_path):
    new, _ = runs
    export_run(new, "vllm", tmp_path / "vllm", VllmEngine().spec_counters)
    lossy = json.loads((tmp_path / "vllm" / "eagle3__c4.json").read_text())
    assert (lossy["outputs_verdict"], lossy["outputs_identical_fraction"]) == ("lossy", 0.5)
    assert lossy["outputs_reason"].startswith("2 of 2 divergences")
    keys = list(lossy)  # where `vllm bench serve --metadata` puts its keys: after num_prompts
    assert keys.index("outputs_verdict") == keys.index("num_prompts") + 1
    export_run(new, "speculation-profile", tmp_path / "prof", VllmEngine().spec_counters)
    prof = json.loads((tmp_path / "prof" / "eagle3.1__c1" / "speculation_profile.json").read_text())
    assert prof["speedbench"]["outputs"] == {"verdict": "lossless within numerics", "identical_fraction": 0.75,
                                             "reason": VERDICTS[("eagle3.1", 1)][2]}
    m, tags = mlflow_export.arm_metrics(new, "eagle3"), mlflow_export.arm_tags(new, "eagle3")
    assert m["outputs_identical_fraction/c1"] == 1.0 and m["outputs_identical_fraction/c4"] == 0.5
    assert tags["outputs_verdict/c1"] == "identical" and tags["outputs_verdict/c4"] == "lossy"
    assert tags["outputs_reason/c4"].startswith("2 of 2") and tags["speedbench.outputs"] == "lossy"
    assert mlflow_export.arm_tags(new, "eagle3.1")["speedbench.outputs"] == "lossless within numerics"
    # the baseline's reference point is not checked: its arm's worst verdict says so
    assert mlflow_export.arm_tags(new, "baseline")["speedbench.outputs"] == "not checked"


def test_the_category_matrix_names_each_point_s_verdict(runs, tmp_path):
    import csv

    from speedbench.results.category_matrix import export_matrix

    new, old = runs
    export_matrix([new, old], tmp_path, concurrency=4)
    with open(tmp_path / "checkpoints.csv", newline="") as f:
        got = {(r["run_path"] == str(new.path), r["arm"]): r for r in csv.DictReader(f)}
    assert (got[(True, "eagle3")]["outputs_verdict"], got[(True, "eagle3")]["outputs_identical_fraction"]) == \
        ("lossy", "0.5")
    assert (got[(False, "eagle3")]["outputs_verdict"], got[(False, "eagle3")]["outputs_identical_fraction"]) == \
        ("not checked", "")


def test_a_folder_from_before_the_block_exports_not_recorded(runs, tmp_path):
    _, old = runs
    assert old.dir is not None and "outputs" not in old.summary
    for df in (pd.read_csv(old.dir.summary_csv_path),
               pd.read_csv(export_run(old, "csv", tmp_path / "csv", VllmEngine().spec_counters)[0])):
        assert set(df["outputs_verdict"]) == {"not checked"} and set(df["outputs_reason"]) == {"not recorded"}
        assert df["outputs_identical_fraction"].isna().all()
    export_run(old, "vllm", tmp_path / "vllm", VllmEngine().spec_counters)
    point = json.loads((tmp_path / "vllm" / "eagle3__c1.json").read_text())
    assert (point["outputs_verdict"], point["outputs_identical_fraction"], point["outputs_reason"]) == \
        ("not checked", None, "not recorded")
    assert not any(k.startswith("outputs_identical_fraction") for k in mlflow_export.arm_metrics(old, "eagle3"))
    assert mlflow_export.arm_tags(old, "eagle3")["outputs_verdict/c4"] == "not checked"
    prof = json.loads(export_run(old, "speculation-profile", tmp_path / "p", VllmEngine().spec_counters)[0]
                      .read_text())
    assert prof["speedbench"]["outputs"]["reason"] == "not recorded"
