"""The drift study on real vLLM: a k-sweep of the self-draft arm at two context lengths.
It is also the real-vLLM check of the self-draft's construction (AL = k+1) and of the
scenario's acceptance gate, which the main CPU run (tests/e2e/test_cpu_scenario.py) leaves
to it.

Trimmed from scenarios/cpu_drift.yaml with --arms/--set to three launches, 3 prompts and c=1,
which is enough to produce per-k, per-context rows, the plots and the optimal-k table (c=4 doubled
the points of each launch and reached no other code path; the main CPU run covers c=1, 4 and 16).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers.trust import assert_run_ok_or_controls_failed

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed"),
]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def drift_run(vllm_slot, tmp_path_factory):
    out = tmp_path_factory.mktemp("drift")
    proc = subprocess.run(
        [sys.executable, "-m", "speedbench.cli", "run", "scenarios/cpu_drift.yaml", "-o", str(out), "--skip-doctor",
         "--arms", "baseline,self-draft",
         "--set", "arms.self-draft.sweep.num_speculative_tokens=[1,3]",
         "--set", "workload.num_prompts=3", "--set", "concurrency=[1]"],
        cwd=REPO, capture_output=True, text=True, timeout=1500, env={**os.environ, "COLUMNS": "160"},
    )
    print(proc.stdout[-5000:], proc.stderr[-3000:])
    (path,) = [p for p in (out / "cpu_drift").iterdir() if p.is_dir()]
    # the self-draft is a control: a load change between arms may fail it (tests/helpers/trust.py)
    assert_run_ok_or_controls_failed(proc, path)
    return path


def test_rows_per_k_concurrency_and_context(drift_run):
    summary = json.loads((drift_run / "summary.json").read_text())
    keys = {(r["arm"], r["concurrency"], r["variant"]) for r in summary["rows"]}
    expected = {(a, c, v) for a in ("baseline", "self-draft-k1", "self-draft-k3") for c in (1,)
                for v in ("ctx128", "ctx512")}
    assert keys == expected
    for r in summary["rows"]:
        assert r["template"] in ("baseline", "self-draft")


def test_self_draft_accepts_everything_at_every_k_and_context(drift_run):
    """The construction check (the target drafting for itself accepts every draft at T=0):
    AL = k+1 from the per-request counters and from Prometheus alike, every position."""
    summary = json.loads((drift_run / "summary.json").read_text())
    for k in (1, 3):
        rows = [r for r in summary["rows"] if r["arm"] == f"self-draft-k{k}"]
        assert len(rows) == 2, rows  # both contexts
        for r in rows:
            assert r["al_tokens"] == pytest.approx(k + 1, abs=1e-9)
            assert r["al_prometheus"] == pytest.approx(k + 1, abs=1e-9)
            assert r["al_agree"] is True
            assert r["per_position_joint"] == pytest.approx([1.0] * k)
            assert r["per_position_conditional"] == pytest.approx([1.0] * k)


def test_the_scenarios_acceptance_gate_passes_on_the_self_draft(drift_run, tmp_path):
    # scenarios/cpu_tiny.yaml's gate on the self-draft (AL >= 3.99 at k=3), on the swept arms
    gates = tmp_path / "gates.yaml"
    gates.write_text("- {metric: acceptance_length, arm: self-draft-k3, min: 3.99}\n"
                     "- {metric: acceptance_length, arm: self-draft-k1, min: 1.99}\n"
                     "- {metric: error_rate, max: 0.0}\n")
    junit = tmp_path / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "speedbench.cli", "gate", str(drift_run), "--gates", str(gates),
                           "--junit", str(junit)], cwd=REPO, capture_output=True, text=True, timeout=120)
    # every acceptance and error-rate check passed; a failure can only be a failed control
    assert_run_ok_or_controls_failed(proc, drift_run, junit)
    assert "self-draft-k3" in proc.stdout


def test_padding_reached_the_context_buckets(drift_run):
    points = json.loads((drift_run / "points.json").read_text())
    assert {p["padding_unit"] for p in points} == {"tokens"}
    records = [json.loads(ln) for ln in (drift_run / "records.jsonl").read_text().splitlines()]
    by_variant = {}
    for r in records:
        if r["turn"] == 0 and r["prompt_tokens"]:
            by_variant.setdefault(r["variant"], []).append(r["prompt_tokens"])
    # the chat template adds a few tokens around the padded user turn
    assert min(by_variant["ctx512"]) >= 512 > max(by_variant["ctx128"]) >= 128


def test_report_has_drift_plots_and_optimal_k(drift_run):
    md = (drift_run / "report.md").read_text()
    html = (drift_run / "report.html").read_text()
    assert "--speculative-config" in md
    assert "num_speculative_tokens" in md
    assert html.count("<svg") >= 6
    assert "drift" in html.lower()
