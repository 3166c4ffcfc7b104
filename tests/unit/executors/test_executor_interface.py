"""The Executor interface against a stand-in: `speedbench run`, `status` and `cancel` reach
an executor only through executors/kinds.py, so a new kind is one class and one entry.
`status` and `cancel` need a JobExecutor: a run that ran here has no jobs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speedbench.cli import main
from speedbench.executors import kinds
from speedbench.executors.base import ArmJob, Executor, JobExecutor, Step, Submission
from speedbench.executors.local import LocalExecutor
from speedbench.executors.slurm.executor import SlurmExecutor

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "scenarios" / "cpu_tiny.yaml"


class Toy(JobExecutor):
    """Remembers every call; its one job is always half done and active."""

    kind = "toy"
    calls: list[tuple] = []

    def plan(self, sc, output_root, console, *, skip_doctor=False):
        self.calls.append(("plan", sc.name))
        console.print("toy plan")

    def submit(self, sc, output_root, console, *, overrides, skip_doctor=False):
        self.calls.append(("submit", sc.name, tuple(overrides)))
        return Submission(Path(output_root) / "toy-run", 0, ("t1",), "t2")

    def resume(self, run_path, console, *, overrides, skip_doctor=False):
        self.calls.append(("resume", Path(run_path).name))
        return Submission(Path(run_path))

    def follow_up(self, step, after, console):
        self.calls.append(("follow_up", step.name, [s.last_job for s in after]))
        return Submission(None, 0, ("t3",), "t3")

    def plan_follow_up(self, step, console):
        console.print(f"toy then {' '.join(step.words)}")

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


def test_the_base_holds_only_what_every_executor_does():
    """No Slurm-only member on the base, and the local executor raises nowhere: every
    executor shows each arm's progress (status: a local run's from points.json); a gather job
    and jobs to cancel belong to JobExecutor, which the local one is not."""
    assert set(Executor.__abstractmethods__) == {"plan", "submit", "resume", "follow_up", "plan_follow_up", "status"}
    assert set(JobExecutor.__abstractmethods__) - set(Executor.__abstractmethods__) == {"gather", "cancel"}
    assert not any(hasattr(Executor, m) for m in ("submit_jobs", "submit_after"))
    assert not issubclass(LocalExecutor, JobExecutor) and issubclass(SlurmExecutor, JobExecutor)


def test_a_local_follow_up_runs_at_once_and_returns_its_code(capsys):
    from rich.console import Console

    ran = []
    step = Step("dashboard", "d", None, Path("/r/dashboard-x.sbatch"), ["dashboard", "/r"],
                here=lambda: ran.append(1) or 3)
    got = LocalExecutor().follow_up(step, [Submission(Path("/r/a"))], Console())
    assert ran == [1] and got == Submission(None, 3)
    LocalExecutor().plan_follow_up(step, Console())
    assert "speedbench dashboard /r" in capsys.readouterr().out


def test_the_matrix_goes_through_the_executor_it_is_given(toy, capsys, tmp_path):
    """`speedbench submit` names no executor kind: the cells, the record and the dashboard
    step all go through the one it was given (here the stand-in, under the name "slurm")."""
    import yaml

    kinds.EXECUTORS["slurm"] = Toy
    try:
        matrix = tmp_path / "m.yaml"
        matrix.write_text(yaml.safe_dump({"results": str(tmp_path / "res"), "scenarios": [str(SCENARIO)],
                                          "checkpoints": [{"name": "c1"}, {"name": "c2"}]}))
        assert main(["submit", str(matrix), "--skip-doctor"]) == 0
    finally:
        kinds.EXECUTORS["slurm"] = SlurmExecutor
    assert toy.calls == [("submit", "cpu_tiny", ()), ("submit", "cpu_tiny", ()),
                         ("follow_up", "dashboard", ["t2", "t2"])]
    (record,) = (tmp_path / "res").glob("matrix-*.json")
    data = json.loads(record.read_text())
    assert record.name == "matrix-t3.json" and data["executor"] == "toy" and data["dashboard_job"] == "t3"
    assert [c["run"] for c in data["cells"]] == [str(tmp_path / "res" / "toy-run")] * 2
