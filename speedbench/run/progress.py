"""What the run path tells its user, said through one interface: the run path calls a
:class:`Progress`, and the caller (the CLI, a cluster job, a calibration) supplies one.
:class:`ConsoleProgress` is the renderer every caller uses today: a rich console, with
the exact text ``speedbench run`` has always printed.

The live view during the arms (:class:`~speedbench.run.live.LiveProgress`) comes from
``Progress.live()``, so a caller that renders elsewhere replaces both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from rich.console import Console
from rich.markup import escape

from speedbench.doctor.base import Check
from speedbench.doctor.table import print_checks
from speedbench.report.gate import GateResult
from speedbench.report.model import Report
from speedbench.report.wrap import print_paste, print_wrapped
from speedbench.results.files import human_bytes
from speedbench.run.finish import ConsoleFinish
from speedbench.run.live import LiveProgress


class Progress(Protocol):
    """Every message of a run, new or resumed, from the data to the exit code."""

    def live(self) -> LiveProgress: ...
    def warning(self, msg: str) -> None: ...
    def run_folder(self, path: Path) -> None: ...
    def resuming(self, path: Path, kept: int, dropped: int, superseded: str) -> None: ...
    def preflight_ok(self, n_checks: int, n_warnings: int) -> None: ...
    def preflight_failed(self, checks: list[Check]) -> None: ...
    def job_records(self, path: Path, records_file: str) -> None: ...
    def job_interrupted(self) -> None: ...
    def arm_failed(self, arm: str, msg: str) -> None: ...
    def output_stopped(self, path: Path, error: Exception, folder: Path, free: int | None) -> None: ...
    def summary(self, report: Report) -> None: ...
    def results(self, path: Path) -> None: ...
    def gates(self, results: list[GateResult]) -> None: ...
    def tracking(self, line: str) -> None: ...
    def interrupted(self, path: Path) -> None: ...


class ConsoleProgress(ConsoleFinish):
    """The run's messages on a rich console, as ``speedbench run`` prints them; the end of
    the run (summary, results, gates, MLflow) as run/finish.py's ConsoleFinish shows it, with
    the gates shown only when one fails (a run whose gates pass prints what it always did)."""

    def __init__(self, console: Console):
        super().__init__(console, every_gate=False)

    def live(self) -> LiveProgress:
        return LiveProgress(self.console)

    def _say(self, markup: str) -> None:
        print_wrapped(self.console, markup)  # between words, at the console's width

    def warning(self, msg: str) -> None:
        self._say(f"[yellow]warning[/yellow]: {escape(msg)}")

    def run_folder(self, path: Path) -> None:
        self.console.print(f"run folder: {path}", markup=False, soft_wrap=True)  # a path to copy, never wrapped

    def resuming(self, path: Path, kept: int, dropped: int, superseded: str) -> None:
        self._say(escape(f"resuming {path}: {kept} finished points are kept"
                         + (f"; {dropped} records of unfinished points moved to {superseded}" if dropped else "")))

    def preflight_ok(self, n_checks: int, n_warnings: int) -> None:
        self._say(f"pre-flight checks: ok ({n_checks} checks, {n_warnings} warnings; "
                  "`speedbench doctor` shows them)")

    def preflight_failed(self, checks: list[Check]) -> None:
        print_checks(checks, self.console)
        self._say("[red]pre-flight checks failed[/red]; fix the above or pass --skip-doctor to run anyway")

    def job_records(self, path: Path, records_file: str) -> None:
        self._say(escape(f"records: {path} ({records_file})"))

    def job_interrupted(self) -> None:
        self._say("[yellow]interrupted[/yellow]: the running point is marked interrupted; "
                  "a requeued or resumed job continues from the finished points")

    def arm_failed(self, arm: str, msg: str) -> None:
        self._say(f"[red]arm {escape(arm)} failed[/red]: {escape(msg.splitlines()[0])}")

    def output_stopped(self, path: Path, error: Exception, folder: Path, free: int | None) -> None:
        self._say(f"[red]stopped: the run folder cannot be written[/red]: {escape(str(error))}")
        self.console.print(f"  run folder: {path}", markup=False, soft_wrap=True)  # a path to copy, never wrapped
        self._say(escape(f"  free space:  {human_bytes(free)} in {folder}"))
        self._say("  servers stopped; every complete record is kept. Free space (or make the folder writable), "
                  "then resume:")
        print_paste(self.console, f"speedbench run --resume {path}")

    def interrupted(self, path: Path) -> None:
        self._say("[yellow]interrupted[/yellow]: partial results and summary written. Resume with:")
        print_paste(self.console, f"speedbench run --resume {path}", indent="  ")
