"""The local executor: every arm runs in this process, through speedbench/run/."""

from __future__ import annotations

import shlex
from pathlib import Path

from rich.console import Console

from speedbench.executors.base import Executor, Step, Submission
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

    def plan_follow_up(self, step: Step, console: Console) -> None:
        console.print(f"then, in this process: speedbench {shlex.join(step.words)}", markup=False, soft_wrap=True)


def _session():
    """speedbench.run.session, the whole run path."""
    # function-local: the run path pulls in pandas, the doctor and the engine; loaded only
    # when a run starts, not when the CLI builds its parser
    from speedbench.run import session

    return session
