"""The local executor: every arm runs in this process, through speedbench/run/."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from rich.console import Console

from speedbench.executors.base import ArmJob, Executor, Step, Submission
from speedbench.results.rounds import RESUMABLE_DONE
from speedbench.run.plan import build_plan
from speedbench.scenario import Scenario


class LocalExecutor(Executor):
    kind = "local"

    def plan(self, sc: Scenario, output_root: Path, console: Console, *, skip_doctor: bool = False) -> None:
        return None  # the run's plan is all a local run starts

    def submit(self, sc: Scenario, output_root: Path, console: Console, *, overrides: list[str],
               skip_doctor: bool = False) -> Submission:
        session = _session()
        code, path = session.new_run(sc, output_root, overrides=overrides, skip_doctor=skip_doctor,
                                     progress=session.ConsoleProgress(console))
        return Submission(path, code)

    def resume(self, run_path: Path, console: Console, *, overrides: list[str],
               skip_doctor: bool = False) -> Submission:
        session = _session()
        return Submission(run_path, session.resume_run(run_path, overrides=overrides, skip_doctor=skip_doctor,
                                                       progress=session.ConsoleProgress(console)))

    def follow_up(self, step: Step, after: list[Submission], console: Console) -> Submission:
        return Submission(None, step.here())  # the runs in ``after`` ran here: they have ended

    def status(self, run_dir: Any, sc: Scenario) -> list[ArmJob]:
        return arm_progress(run_dir, sc)

    def plan_follow_up(self, step: Step, console: Console) -> None:
        console.print(f"then, in this process: speedbench {shlex.join(step.words)}", markup=False, soft_wrap=True)


def arm_progress(run_dir: Any, sc: Scenario) -> list[ArmJob]:
    """A local run has no jobs: each arm's progress as its points.json records it, with
    "local" for a job id. An arm with points left is not active: the run is over (or
    still running in another process, which points.json cannot tell)."""
    plan, rounds, marked = build_plan(sc), run_dir.finished_rounds(), run_dir.all_points()
    if not marked and run_dir.summary_path.is_file():
        return _summary_progress(run_dir, plan)
    out = []
    for ap in plan.arms:
        keys = plan.points(ap.arm.name)
        todo = plan.unfinished(rounds, ap.arm.name)
        failed = [marked[k] for k in keys if marked.get(k, {}).get("status") == "failed"]
        state = ("finished" if not todo else "failed" if failed
                 else "unfinished" if any(k in marked for k in keys) else "not started")
        out.append(ArmJob(arm=ap.arm.name, job_id="local", state=state,
                          reason=str(failed[0].get("failure") or "") if failed else "",
                          points_done=len(keys) - len(todo), points_total=len(keys)))
    return out


def _summary_progress(run_dir: Any, plan: Any) -> list[ArmJob]:
    """A folder kept for its summary alone (no points.json): each arm's summary rows say
    which of its points finished."""
    rows = run_dir.load_summary().get("rows") or []
    out = []
    for ap in plan.arms:
        mine = [r for r in rows if isinstance(r, dict) and r.get("arm") == ap.arm.name]
        done = sum(r.get("status") in RESUMABLE_DONE for r in mine)
        total = len(plan.points(ap.arm.name))
        out.append(ArmJob(arm=ap.arm.name, job_id="local", state="finished" if done >= total else "unfinished",
                          reason="from summary.json (no points.json)", points_done=min(done, total),
                          points_total=total))
    return out


def _session():
    """speedbench.run.session, the whole run path."""
    # function-local: the run path pulls in pandas, the doctor and the engine; loaded only
    # when a run starts, not when the CLI builds its parser
    from speedbench.run import session

    return session
