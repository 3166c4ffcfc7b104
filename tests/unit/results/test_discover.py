"""One loader of a run folder and one run discovery (issue 47): what a command reads is
a run, or an error that says what was expected; every run is counted once."""

from __future__ import annotations

import shutil

import pytest

from speedbench.engine.vllm import VllmEngine
from speedbench.errors import UsageError
from speedbench.results import RunDir
from speedbench.results.loader import load_run
from speedbench.results.discover import discover_runs, require_runs
from speedbench.results.exports import export_run
from speedbench.results.run import open_run_dir
from tests.helpers.runfactory import RunSpec, make_run

SMALL = RunSpec(concurrencies=(1,), n_prompts=4)


@pytest.mark.parametrize("make,says", [
    (lambda p: p / "nope", "not found"),
    (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "is a file"),
    (lambda p: (p / "e").mkdir() or p / "e", "is an empty folder"),
    (lambda p: (p / "o").mkdir() or (p / "o" / "notes.txt").write_text("x") and p / "o", "is not a run folder"),
])
def test_open_run_dir_says_what_was_expected(tmp_path, make, says):
    with pytest.raises(UsageError, match=says) as e:
        open_run_dir(make(tmp_path))
    assert "expected a run folder" in str(e.value)
    assert "--resume" not in str(e.value)


def test_an_unfinished_run_is_told_to_resume_and_a_garbage_summary_is_bad_input(tmp_path):
    rd = RunDir.create(tmp_path, "s")
    with pytest.raises(UsageError, match="resume"):
        load_run(rd.path)
    rd.summary_path.write_text('{"rows": "not a list", "schema_version": 1}')
    with pytest.raises(UsageError, match="not a speedbench summary"):
        load_run(rd.path)


def test_an_export_and_a_copy_are_not_runs(tmp_path):
    run = make_run(tmp_path / "results", SMALL).path
    export_run(load_run(run), "json", run / "export" / "json", VllmEngine().spec_counters)
    shutil.copytree(run, tmp_path / "results" / "cpu_tiny" / "copy")
    found = discover_runs(tmp_path / "results", load_run)
    assert [r.path for r in found.runs] == [run]
    assert any("a copy of run" in p for p in found.problems)
    assert len(discover_runs(run, load_run).runs) == 1  # a run folder given as the results folder: itself, once


def test_no_runs_is_bad_input(tmp_path):
    (tmp_path / "results").mkdir()
    with pytest.raises(UsageError, match="no run folders"):
        require_runs(discover_runs(tmp_path / "results", load_run), tmp_path / "results")
    with pytest.raises(UsageError, match="not found"):
        discover_runs(tmp_path / "missing", load_run)


def test_record_problems_use_verify_digests(tmp_path):
    run = load_run(make_run(tmp_path / "results", SMALL).path)
    assert run.record_problems == []
    rec = run.dir.records_path
    rec.write_bytes(rec.read_bytes()[:-40])
    assert any("records lost" in p for p in load_run(run.path).record_problems)
