"""The verdict comes first in ``doctor``, ``gate`` and ``report``: a log is read from its top."""

from __future__ import annotations

import re
from pathlib import Path

from speedbench.cli import main
from speedbench.report.headlines import arm_headlines
from speedbench.results.loader import load_run

ROOT = Path(__file__).parent.parent.parent.parent
F16 = str(ROOT / "tests" / "data" / "cpu_tiny_runs" / "float16")


def _lines(argv, monkeypatch, capsys) -> list[str]:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    capsys.readouterr()
    main(argv)
    return capsys.readouterr().out.splitlines()


def test_one_headline_line_per_arm_reads_the_stored_headline():
    assert arm_headlines(load_run(F16)) == [
        "eagle3 (EAGLE 3): 1.27× [1.02, 1.51] at c=1, client clock",
        "eagle3.1 (EAGLE 3.1): 1.27× [0.93, 1.67] at c=1, client clock",
        "eagle3-untrained (EAGLE 3): 0.38× [0.30, 0.47] at c=1, client clock",
        "self-draft: 0.81× [0.65, 0.97] at c=1, client clock",
    ]


def test_gate_opens_with_its_verdict_and_each_arms_tally(monkeypatch, capsys):
    # The committed folder keeps only summary.json, provenance and the scenario: without
    # points.json and records nothing checks the figures, so each gate also fails on that.
    lines = _lines(["gate", F16], monkeypatch, capsys)
    assert lines[0] == "gate FAILED (20 checks, 2 failed, 0 skipped)" == lines[-1]
    assert lines[1] == "eagle3 (EAGLE 3): 1.27× [1.02, 1.51] at c=1, client clock; 3 of 3 gates pass"
    assert "baseline: 3 of 3 gates pass" in lines[:7]  # gated, with no speedup of its own


def test_report_opens_with_the_headlines(monkeypatch, capsys):
    lines = _lines(["report", "--no-files", F16], monkeypatch, capsys)
    # the folder's own problems are said first (the committed folder has no points.json or records)
    # (each warning wrapped to the width: its continuation lines are indented)
    head = [line for line in lines if not line.startswith(" ")]
    assert [line.split(" is missing")[0] for line in head[:2]] == ["warning: points.json", "warning: records.jsonl"]
    lines = head[2:]
    assert lines[1:3] == ["eagle3 (EAGLE 3): 1.27× [1.02, 1.51] at c=1, client clock",
                          "eagle3.1 (EAGLE 3.1): 1.27× [0.93, 1.67] at c=1, client clock"]


def test_doctor_opens_with_ready_or_not(monkeypatch, capsys):
    lines = _lines(["doctor", str(ROOT / "scenarios" / "llama31_8b_eagle3.yaml")], monkeypatch, capsys)
    # ready or not depends on this machine (its GPUs, its vLLM); the verdict line comes first either way
    assert re.match(r"speedbench doctor: scenario 'llama31_8b_eagle3' \(.*\): (ready|not ready) \(\d+ ok", lines[0])
