"""The local executor: every arm runs in this process, through speedbench/run/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from speedbench.errors import UsageError
from speedbench.executors.base import ArmJob, Executor
from speedbench.scenario import Scenario


class LocalExecutor(Executor):
    kind = "local"

    def plan(self, sc: Scenario, output_root: Path, console: Console, *, skip_doctor: bool = False) -> None:
        return None  # the run's plan is all a local run starts

    def submit(self, sc: Scenario, output_root: Path, console: Console, *, overrides: list[str],
               skip_doctor: bool = False) -> int:
        session = _session()
        return session.new_run(sc, output_root, overrides=overrides, skip_doctor=skip_doctor,
                               progress=session.ConsoleProgress(console))

    def resume(self, run_path: Path, console: Console, *, overrides: list[str], skip_doctor: bool = False) -> int:
        session = _session()
        return session.resume_run(run_path, overrides=overrides, skip_doctor=skip_doctor,
                                  progress=session.ConsoleProgress(console))

    def status(self, run_dir: Any, sc: Scenario) -> list[ArmJob]:
        raise UsageError(f"{run_dir.path} ran here, not as cluster jobs: it has no jobs to show")

    def gather(self, run_dir: Any) -> tuple[str, str] | None:
        return None  # a local run writes its summary itself

    def cancel(self, run_dir: Any, wait_s: float = 120) -> list[str]:
        # a local run stops with Ctrl-C / SIGTERM to its own process
        raise UsageError(f"{run_dir.path} ran here, not as cluster jobs: it has no jobs to cancel")


def _session():
    """speedbench.run.session, the whole run path."""
    # function-local: the run path pulls in pandas, the doctor and the engine; loaded only
    # when a run starts, not when the CLI builds its parser
    from speedbench.run import session

    return session
