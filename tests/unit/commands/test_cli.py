"""One CLI convention (issue 23): every command's --help ends with its exit codes in one
shape; commands that write files take -o/--output, old spellings still work."""

from __future__ import annotations

import json

import pytest

from speedbench.cli import COMMANDS, build_parser, main
from speedbench.commands import EXIT_CODES


def test_every_command_documents_its_exit_codes_once():
    assert set(EXIT_CODES) == set(COMMANDS)
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in COMMANDS:
        text = sub.choices[name].format_help()
        assert text.count("exit codes:") == 1, name
        assert " ".join(text.split()).endswith(f"exit codes: {EXIT_CODES[name]}"), name


@pytest.mark.parametrize("flag", ["-o", "--output", "--out"])
def test_export_takes_dash_o(flag, tmp_path):
    from tests.helpers.runfactory import make_run

    run = make_run(tmp_path / "results")
    out = tmp_path / f"v{flag}"
    assert main(["export", str(run.path), "--format", "vllm", flag, str(out)]) == 0
    assert any(out.glob("*.json"))


def test_status_json(tmp_path, capsys, monkeypatch):
    from tests.helpers.runfactory import make_run
    from speedbench.executors import kinds
    from speedbench.executors.base import ArmJob
    from speedbench.executors.slurm.executor import SlurmExecutor

    class Jobs(SlurmExecutor):  # the run folder's kind (local here) looked up, Slurm's answers faked
        def status(self, run_dir, sc):
            return [ArmJob("baseline", "17", "FAILED", "n1", "exit 1", 1, 3)]

        def gather(self, run_dir):
            return ("18", "PENDING")

    run = make_run(tmp_path / "results")
    monkeypatch.setitem(kinds.EXECUTORS, "local", Jobs)
    assert main(["status", str(run.path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["jobs"][0] == {"arm": "baseline", "job_id": "17", "state": "FAILED", "node": "n1", "reason": "exit 1",
                               "points_done": 1, "points_total": 3, "died": True}
    assert data["gather"] == {"job_id": "18", "state": "PENDING"}


def test_status_of_a_local_run_reads_its_points(tmp_path, capsys):
    from tests.helpers.runfactory import make_run

    run = make_run(tmp_path / "results")
    assert main(["status", str(run.path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gather"] is None and len(data["jobs"]) >= 2
    assert all(j["job_id"] == "local" and j["state"] == "finished" and j["points_done"] == j["points_total"] > 0
               and not j["died"] for j in data["jobs"])
    # one point's round gone from points.json: its arm stopped short, and the user is told to resume
    points = json.loads(run.points_path.read_text())
    lost = points.pop()
    run.points_path.write_text(json.dumps(points))
    assert main(["status", str(run.path)]) == 1
    out = capsys.readouterr().out
    assert f"resume with: speedbench run --resume {run.path}" in out and lost["arm"] in out
