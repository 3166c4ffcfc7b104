"""The Executor interface against a stand-in: `speedbench run`, `status` and `cancel` reach
an executor only through executors/kinds.py, so a new kind is one class and one entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speedbench.cli import main
from speedbench.executors import kinds
from speedbench.executors.base import ArmJob, Executor
from speedbench.executors.local import LocalExecutor
from speedbench.executors.slurm import SlurmExecutor

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "scenarios" / "cpu_tiny.yaml"


class Toy(Executor):
    """Remembers every call; its one job is always half done and active."""

    kind = "toy"
    calls: list[tuple] = []

    def plan(self, sc, output_root, console, *, skip_doctor=False):
        self.calls.append(("plan", sc.name))
        console.print("toy plan")

    def submit(self, sc, output_root, console, *, overrides, skip_doctor=False):
        self.calls.append(("submit", sc.name, tuple(overrides)))
        return 0

    def resume(self, run_path, console, *, overrides, skip_doctor=False):
        self.calls.append(("resume", Path(run_path).name))
        return 0

    def status(self, run_dir, sc):
        return [ArmJob("baseline", "t1", "working", points_done=1, points_total=2, active=True)]

    def gather(self, run_dir):
        return None

    def cancel(self, run_dir, wait_s=120):
        self.calls.append(("cancel", wait_s))
        return ["t1"]


@pytest.fixture
def toy(monkeypatch):
    Toy.calls = []
    monkeypatch.setitem(kinds.EXECUTORS, "local", Toy)  # what cpu_tiny.yaml's kind resolves to
    return Toy


def test_the_lookup_knows_local_and_slurm():
    assert isinstance(kinds.executor_for("local"), LocalExecutor)
    assert isinstance(kinds.executor_for("slurm"), SlurmExecutor)
    with pytest.raises(ValueError, match="unknown executor kind"):
        kinds.executor_for("kubernetes")


def test_run_goes_through_the_executor(toy, capsys, tmp_path):
    assert main(["run", str(SCENARIO), "--dry-run", "-o", str(tmp_path)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("toy plan")
    assert main(["run", str(SCENARIO), "--set", "repeats=2", "-o", str(tmp_path)]) == 0
    assert toy.calls == [("plan", "cpu_tiny"), ("submit", "cpu_tiny", ("repeats=2",))]


def test_status_and_cancel_go_through_the_executor(toy, capsys, tmp_path):
    from tests.helpers.runfactory import make_run

    run = make_run(tmp_path / "results")
    assert main(["status", str(run.path), "--json"]) == 0  # active: not died
    got = json.loads(capsys.readouterr().out)
    assert got["jobs"][0]["died"] is False and got["gather"] is None
    assert main(["cancel", str(run.path), "--wait", "3"]) == 0
    assert "cancelled 1 jobs: t1" in capsys.readouterr().out
    assert main(["run", "--resume", str(run.path)]) == 0
    assert toy.calls == [("cancel", 3.0), ("resume", run.path.name)]


def test_a_job_that_ended_early_died():
    assert ArmJob("a", "1", "gone", points_done=1, points_total=2).died
    assert not ArmJob("a", "1", "gone", points_done=2, points_total=2).died
    assert not ArmJob("a", "1", "queued", points_total=2, active=True).died
