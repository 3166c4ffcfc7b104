"""SlurmExecutor: one sbatch job per arm and an afterany gather (``executor.kind: slurm``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from speedbench.errors import UsageError
from speedbench.executors.base import ArmJob, JobExecutor, Step, Submission
from speedbench.executors.slurm.client import Slurm
from speedbench.executors.slurm.scripts import arm_script, follow_up_script, gather_script
from speedbench.executors.slurm.states import arm_jobs, cancel, gather_job
from speedbench.executors.slurm.submission import submit, submit_follow_up
from speedbench.results import RunDir
from speedbench.run.plan import build_plan
from speedbench.scenario import Scenario, resolved_dict, validate_data


def _submitted(jobs: dict, run_path: Path, console: Console) -> Submission:
    """The latest submission in jobs.json, told to the user."""
    sub = jobs["submissions"][-1]
    console.print(f"submitted {len(sub['arms'])} arm jobs ({' '.join(sub['arms'])}) and gather job {sub['gather']}")
    console.print(f"  speedbench status {run_path}    speedbench cancel {run_path}", markup=False, soft_wrap=True)
    return Submission(run_path, 0, tuple(sub["arms"]), sub["gather"])


class SlurmExecutor(JobExecutor):
    """One sbatch job per arm and an afterany gather (``executor.kind: slurm``)."""

    kind = "slurm"

    def __init__(self, slurm: Slurm | None = None):
        self.slurm = slurm or Slurm()

    def plan(self, sc: Scenario, output_root: Path, console: Console, *, skip_doctor: bool = False) -> None:
        """The exact batch scripts, as ``submit`` would write them."""
        run_path = Path(output_root).resolve() / sc.name / "<run id>"
        cwd = Path.cwd()
        console.print("\n[bold]batch scripts[/bold] (written to the run folder's slurm/ and submitted with sbatch; "
                      "the gather with --dependency=afterany:<every arm job>)")
        for a in sc.arms:
            console.print(f"\n# ---- {a.name}.sbatch", markup=False)
            console.print(arm_script(sc, run_path, a.name, cwd=cwd, skip_doctor=skip_doctor),
                          markup=False, highlight=False, soft_wrap=True, end="")
        console.print("\n# ---- gather.sbatch", markup=False)
        console.print(gather_script(sc, run_path, cwd=cwd), markup=False, highlight=False, soft_wrap=True, end="")

    def submit(self, sc: Scenario, output_root: Path, console: Console, *, overrides: list[str],
               skip_doctor: bool = False) -> Submission:
        run_dir = RunDir.create(Path(output_root), sc.name)
        run_dir.write_scenario(resolved_dict(sc), overrides)
        console.print(f"run folder: {run_dir.path}", markup=False, soft_wrap=True)
        return _submitted(submit(sc, run_dir, skip_doctor=skip_doctor, slurm=self.slurm), run_dir.path, console)

    def resume(self, run_path: Path, console: Console, *, overrides: list[str],
               skip_doctor: bool = False) -> Submission:
        """Submit again the arms whose points are not all finished, and a new gather."""
        if overrides:
            raise UsageError("--set does not go with resuming a Slurm run: the jobs read the saved scenario")
        run_dir = RunDir.open(run_path)
        sc = validate_data(run_dir.load_scenario(), str(run_dir.scenario_path))
        busy = [j for j in arm_jobs(run_dir, sc, self.slurm) if not j.died and j.points_done < j.points_total]
        if busy:
            raise UsageError(f"jobs still queued or running: "
                             f"{', '.join(f'{j.arm}={j.job_id} {j.state}' for j in busy)}; "
                             f"wait, or `speedbench cancel {run_path}` first")
        done = run_dir.finished_points()
        plan, rounds = build_plan(sc), run_dir.finished_rounds()
        todo = [a.name for a in sc.arms if plan.unfinished(rounds, a.name)]
        console.print(f"resuming {run_dir.path}: {len(done)} finished points are kept; arms to run: "
                      f"{', '.join(todo) or 'none'}",
                      markup=False, soft_wrap=True)
        jobs = submit(sc, run_dir, arms=todo, skip_doctor=skip_doctor, slurm=self.slurm)
        return _submitted(jobs, run_dir.path, console)

    def follow_up(self, step: Step, after: list[Submission], console: Console) -> Submission:
        """A one-CPU job, started once the last job of every submission has ended."""
        waits = [s.last_job for s in after if s.last_job]
        job = submit_follow_up(step.scenario.executor.slurm, step.script, name=step.name, what=step.what,
                               words=step.words, after=waits, slurm=self.slurm)
        return Submission(None, 0, (job,), job)

    def plan_follow_up(self, step: Step, console: Console) -> None:
        console.print(follow_up_script(step.scenario.executor.slurm, name=step.name, what=step.what,
                                       folder=step.script.parent, cwd=Path.cwd().resolve(), words=step.words),
                      markup=False, soft_wrap=True)

    def status(self, run_dir: Any, sc: Scenario) -> list[ArmJob]:
        return arm_jobs(run_dir, sc, self.slurm)

    def gather(self, run_dir: Any) -> tuple[str, str] | None:
        return gather_job(run_dir, self.slurm)

    def cancel(self, run_dir: Any, wait_s: float = 120) -> list[str]:
        return cancel(run_dir, self.slurm, wait_s=wait_s)
