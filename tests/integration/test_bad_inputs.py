"""Every subcommand against the inputs a newcomer gets wrong (issue 47): an unwritable
output, a missing path, a folder where a file belongs (or a file where a folder does),
an empty folder, a garbage summary.json and a truncated records.jsonl. Each ends with
the exit code of the README's table and a one-line message, never a traceback, and never
a silent pass.

Commands run in-process through ``speedbench.cli.main`` (what the console script calls),
so the matrix stays fast; one case per kind also runs as a subprocess. Nothing here
starts vLLM: commands that would (run, job, calibrate, submit) only meet inputs they
refuse before launching anything, and ``run``'s unwritable output is a scenario on the
fake server.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from speedbench.cli import main
from tests.helpers.cli_runs import fake_local, scenario, write_prompts, write_yaml
from tests.helpers.runfactory import RunSpec, make_run

REPO = Path(__file__).resolve().parents[2]
GATES = [{"metric": "speedup", "min": 1.0}]
EXPORTS = ("vllm", "csv", "parquet", "json", "speculation-profile", "category-matrix")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """One good run and its damaged copies, an empty folder, a file, a missing path."""
    root = tmp_path_factory.mktemp("bad_inputs")
    good = make_run(root / "results", RunSpec(concurrencies=(1,), n_prompts=6, gates=GATES)).path
    w = {"root": root, "good": good, "missing": root / "no-such-thing", "empty": root / "empty",
         "file": root / "a-file.txt", "scenario": Path(REPO / "scenarios" / "cpu_tiny.yaml")}
    w["empty"].mkdir()
    w["file"].write_text("not a folder\n")
    w["garbage"] = _copy(good, root / "garbage" / "cpu_tiny" / good.name)
    (w["garbage"] / "summary.json").write_text("{ this is not json")
    w["truncated"] = _copy(good, root / "truncated" / "cpu_tiny" / good.name)
    _truncate_last_line(w["truncated"] / "records.jsonl")
    prompts = write_prompts(root / "prompts.jsonl", ["def f(x):", "class A:"])
    w["fake_scenario"] = write_yaml(root / "fake.yaml", scenario("fake", prompts, arms=[{"name": "base"}],
                                                                 server=fake_local()))
    return w


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _truncate_last_line(path: Path) -> None:
    data = path.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[:start + (len(data) - start) // 2])


def _results_of(run: Path) -> Path:
    """The results folder holding a run (RESULTS/<scenario>/<run>)."""
    return run.parent.parent


# Command lines with placeholders: {run} a run folder, {results} a folder of runs, {input}
# a scenario or other input file, {out} somewhere to write.
RUN_READERS = ["report {run} --no-files", "compare {run} {run}", "gate {run}", "verify {run}", "status {run}",
               "cancel {run} --wait 0", "gather {run}", "run --resume {run} --skip-doctor",
               "job {run} --arm baseline --tag t1 --skip-doctor", *(f"export {{run}} --format {f}" for f in EXPORTS)]
RESULTS_READERS = ["dashboard {results} -o {out}/site", "changes {results}"]
INPUT_READERS = ["validate {input}", "doctor {input}", "run {input} --dry-run",
                 "calibrate {input} --arm eagle3 --dry-run", "submit {input} --dry-run", "data inspect {input}"]
# Readers of a finished run's summary (job, run --resume, status and cancel read its points and scenario).
SUMMARY_READERS = [c for c in RUN_READERS if not c.startswith(("job", "run", "status", "cancel"))]


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    """Tables as wide as their text, so a message is found whole."""
    monkeypatch.setenv("COLUMNS", "400")


def _call(line: str, capsys, **fill: object) -> tuple[int, str]:
    argv = [part.format(**fill) for part in line.split()]
    code = main(argv)
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text, text
    return code, text


@pytest.mark.parametrize("kind", ["missing", "file", "empty"])
@pytest.mark.parametrize("line", RUN_READERS + RESULTS_READERS)
def test_folder_readers_refuse_what_is_no_run(world, capsys, tmp_path, line, kind):
    """A missing path, a file where a folder belongs and an empty folder: exit 2, saying
    what was expected; an empty folder is never told to resume."""
    path = world[kind]
    code, text = _call(line, capsys, run=path, results=path, out=tmp_path)
    assert code == 2, text
    assert "expected" in text or "not found" in text, text
    assert "--resume" not in text or kind != "empty", text


@pytest.mark.parametrize("kind", ["missing", "file", "empty"])
@pytest.mark.parametrize("line", ["gate {run} --gates {bad}", "gate {run} --baseline-run {bad}",
                                  "gate {run} --history {bad}", "compare {run} {bad}",
                                  "export {run} {bad} --format category-matrix -o {out}"])
def test_a_second_input_is_checked_as_the_first(world, capsys, tmp_path, line, kind):
    code, text = _call(line, capsys, run=world["good"], bad=world[kind], out=tmp_path)
    assert code == 2, text


@pytest.mark.parametrize("kind", ["missing", "empty"])
@pytest.mark.parametrize("line", INPUT_READERS)
def test_input_file_readers_refuse_what_is_no_file(world, capsys, line, kind):
    """A scenario, matrix or data file that is missing, or a folder in its place: exit 2."""
    code, text = _call(line, capsys, input=world[kind])
    assert code == 2, text


@pytest.mark.parametrize("line", SUMMARY_READERS)
def test_garbage_summary_is_exit_2(world, capsys, tmp_path, line):
    run = _copy(world["garbage"], tmp_path / "cpu_tiny" / world["garbage"].name)  # gather rewrites it
    code, text = _call(line, capsys, run=run, out=tmp_path)
    if line.startswith("gather"):  # gather writes the summary again from the records: that is its job
        assert code == 0 and "gathered" in text, text
        return
    assert code == 2, text
    assert "summary.json" in text, text


@pytest.mark.parametrize("line", ["dashboard {results} -o {out}/site", "changes {results}"])
def test_a_folder_of_only_garbage_runs_is_exit_2(world, capsys, tmp_path, line):
    code, text = _call(line, capsys, results=world["root"] / "garbage", out=tmp_path)
    assert code == 2, text
    assert "no run folders" in text, text


EXPECT_TRUNCATED = {"verify": 1, "gate": 1, "report": 0, "compare": 0, "export": 0}


@pytest.mark.parametrize("line", ["verify {run}", "gate {run}", "report {run} --no-files", "compare {run} {run}",
                                  *(f"export {{run}} --format {f} -o {{out}}/{f}" for f in EXPORTS)])
def test_truncated_records_are_said_and_fail_a_gate(world, capsys, tmp_path, line):
    """The same per-round digests as `verify`: every reader says the records are
    damaged; a gate on them fails."""
    code, text = _call(line, capsys, run=world["truncated"], out=tmp_path)
    assert code == EXPECT_TRUNCATED[line.split()[0]], text
    assert "records lost" in text or "damaged" in text, text


def test_dashboard_and_changes_on_truncated_records(world, capsys, tmp_path):
    code, text = _call("dashboard {results} -o {out}/site", capsys, results=world["root"] / "truncated", out=tmp_path)
    assert code == 0 and "records damaged" in text, text
    code, text = _call("changes {results}", capsys, results=world["root"] / "truncated")
    assert code == 0, text


def test_gate_on_truncated_records_fails_but_passes_on_the_intact_run(world, capsys):
    assert _call("gate {run}", capsys, run=world["good"])[0] == 0
    code, text = _call("gate {run}", capsys, run=world["truncated"])
    assert code == 1 and "records are damaged" in text, text


def _unwritable(world, tmp_path) -> list[Path]:
    """Places no command can write to, as root too: a path below a file. Without root, a
    folder without write permission as well (root writes through chmod 0o500)."""
    places = [world["file"] / "out"]
    if os.geteuid() != 0:
        ro = tmp_path / "read-only"
        ro.mkdir()
        ro.chmod(0o500)
        places.append(ro / "out")
    return places


WRITERS = [*(f"export {{run}} --format {f} -o {{out}}" for f in EXPORTS), "compare {run} {run} -o {out}/c.html",
           "gate {run} --junit {out}/junit.xml", "gate {run} --summary-md {out}/gate.md",
           "dashboard {results} -o {out}", "changes {results} -o {out}/changes.txt",
           "run {scenario} --skip-doctor -o {out}",
           # without torch, fixtures says so first (exit 2) and never reaches its output
           *(["fixtures tiny {out}"] if importlib.util.find_spec("torch") else [])]


@pytest.mark.parametrize("line", WRITERS)
def test_unwritable_output_is_exit_3_naming_the_folder(world, capsys, tmp_path, line):
    for out in _unwritable(world, tmp_path):
        code, text = _call(line, capsys, run=world["good"], results=_results_of(world["good"]), out=out,
                           scenario=world["fake_scenario"])
        assert code == 3, text
        assert "free space" in text and "fix:" in text, text
        assert "-o/--output" not in text or "-o" in line, text


def test_report_into_an_unwritable_run_folder_is_exit_3(world, capsys, tmp_path):
    """report writes into the run folder itself: a folder where report.md goes stops it."""
    run = _copy(world["good"], tmp_path / "results" / "cpu_tiny" / world["good"].name)
    (run / "report.md").mkdir()
    code, text = _call("report {run}", capsys, run=run)
    assert code == 3, text
    assert "-o/--output" not in text, text  # report has no such option


def test_one_run_and_its_json_export_is_one_run(world, capsys, tmp_path):
    results = tmp_path / "results"
    run = _copy(world["good"], results / "cpu_tiny" / world["good"].name)
    assert _call("export {run} --format json", capsys, run=run)[0] == 0
    assert (run / "export" / "json" / "summary.json").exists()
    _copy(run, results / "cpu_tiny" / "a-copy")  # the same run_id: a copy, not a second night
    code, text = _call("dashboard {results} -o {out}", capsys, results=results, out=tmp_path / "site")
    assert code == 0 and "(1 runs)" in text, text


@pytest.mark.parametrize("args,code", [
    (["validate", "{scenarios}"], 2), (["verify", "{empty}"], 2), (["report", "{garbage}", "--no-files"], 2),
    (["export", "{good}", "--format", "csv", "-o", "{file}/out"], 3), (["gate", "{truncated}"], 1)])
def test_as_a_subprocess_no_traceback(world, args, code):
    fill = {**{k: str(v) for k, v in world.items()}, "scenarios": str(REPO / "scenarios")}
    proc = subprocess.run([sys.executable, "-m", "speedbench.cli", *(a.format(**fill) for a in args)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("fmt", ["csv", "parquet", "speculation-profile", "category-matrix"])
@pytest.mark.parametrize("err", [errno.EACCES, errno.EROFS, errno.ENOSPC])
def test_permission_denied_read_only_or_full_is_exit_3(world, capsys, tmp_path, monkeypatch, fmt, err):
    """What chmod 0o500, a read-only mount or a full disk raise, as root too (root writes
    through chmod): the one writer turns each into exit 3 with the folder's free space."""
    from speedbench.results import files

    def refuse(src, dst):
        raise OSError(err, os.strerror(err), str(dst))

    monkeypatch.setattr(files.os, "replace", refuse)
    code, text = _call(f"export {{run}} --format {fmt} -o {{out}}", capsys, run=world["good"], out=tmp_path / fmt)
    assert code == 3, text
    assert f"free space in {tmp_path / fmt}" in text and "fix:" in text, text
