"""The executor interface: where a run's arms execute.

An executor turns (scenario, run folder, arms) into work: the local one runs every arm
in this process (speedbench/run/); the Slurm one submits one batch job per arm that runs
``speedbench job RUN --arm ARM`` and a gather job that runs ``speedbench gather RUN``. The
run folder itself (per-job record/point files) is the only channel between the jobs.
Either way the run ends in run/finish.py (summary, reports, gates, MLflow).

:class:`Executor` is what every executor does: plan, submit, resume, and run a follow-up
step once runs have ended (the nightly matrix's promotion and dashboard). An executor
whose arms run as scheduler jobs is also a :class:`JobExecutor`: it has a gather job and
jobs to cancel; every executor shows each arm's progress (``speedbench status``). A
Kubernetes executor would be one more JobExecutor beside executors/slurm/ (one Job per arm
and a gather Job) and one more entry in executors/kinds.py.

Scheduler words (PENDING, RUNNING, ...) belong to each executor's own modules; here a job
is only active (queued or running) or not.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Console

from speedbench.scenario import Scenario


@dataclass
class ArmJob:
    """One arm's job as ``speedbench status`` shows it."""

    arm: str
    job_id: str
    state: str  # the scheduler's own word for it (shown as is)
    node: str = ""
    reason: str = ""  # why it is pending, or how it ended (exit code, signal)
    points_done: int = 0
    points_total: int = 0
    # queued or running; the executor decides from its own states (not shown, not compared)
    active: bool = field(default=False, compare=False, repr=False)

    @property
    def died(self) -> bool:
        """Ended without finishing its points."""
        return not self.active and self.points_done < self.points_total

    def shown(self) -> dict[str, Any]:
        """What ``speedbench status --json`` prints for it."""
        return {"arm": self.arm, "job_id": self.job_id, "state": self.state, "node": self.node,
                "reason": self.reason, "points_done": self.points_done, "points_total": self.points_total,
                "died": self.died}


@dataclass(frozen=True)
class Submission:
    """What ``submit``, ``resume`` or ``follow_up`` started."""

    run: Path | None  # the run folder; None for a follow-up, or when the pre-flight checks failed first
    code: int = 0  # the command's exit code: a run that ran here, its own; 0 once jobs are queued
    jobs: tuple[str, ...] = ()  # the jobs it queued (none: it ran here, and has ended)
    last_job: str | None = None  # the job whose end is its end (the gather): what a follow-up waits for


@dataclass(frozen=True)
class Step:
    """A speedbench command to run once some runs have ended: ``speedbench WORDS`` as a job,
    or ``here()`` in this process (the same command, already parsed)."""

    name: str  # the job's name and its script's file name ("dashboard", "promote")
    what: str  # what it does, for the script's comment
    scenario: Scenario  # whose executor settings (partition, setup lines, speedbench argv) the job takes
    script: Path  # where its script is written; its output goes beside it
    words: list[str]
    here: Callable[[], int]


class Executor(ABC):
    """Where the arms of a run execute. ``speedbench run`` calls plan (``--dry-run``),
    submit or resume; ``speedbench submit`` (a matrix) submit, follow_up and plan_follow_up;
    ``speedbench status`` status."""

    kind: ClassVar[str]

    @abstractmethod
    def plan(self, sc: Scenario, output_root: Path, console: Console, *, skip_doctor: bool = False) -> None:
        """Print, after the run's plan, what submitting would start (nothing to add locally)."""

    @abstractmethod
    def submit(self, sc: Scenario, output_root: Path, console: Console, *, overrides: list[str],
               skip_doctor: bool = False) -> Submission:
        """Start a new run of ``sc`` under ``output_root``: its run folder and exit code."""

    @abstractmethod
    def resume(self, run_path: Path, console: Console, *, overrides: list[str],
               skip_doctor: bool = False) -> Submission:
        """Finish an interrupted run folder."""

    @abstractmethod
    def follow_up(self, step: Step, after: list[Submission], console: Console) -> Submission:
        """Run ``step`` once every submission in ``after`` has ended."""

    @abstractmethod
    def plan_follow_up(self, step: Step, console: Console) -> None:
        """Print what ``follow_up`` would start (``--dry-run``)."""

    @abstractmethod
    def status(self, run_dir: Any, sc: Scenario) -> list[ArmJob]:
        """Each arm's point progress (``speedbench status``), with its latest job and that
        job's state where arms run as jobs ("local" where they ran in one process)."""


class JobExecutor(Executor):
    """An executor whose arms run as scheduler jobs: a gather job, and jobs to cancel."""

    @abstractmethod
    def gather(self, run_dir: Any) -> tuple[str, str] | None:
        """The job that gathers the run (summary, reports, gates) and its state; None before any."""

    @abstractmethod
    def cancel(self, run_dir: Any, wait_s: float = 120) -> list[str]:
        """Stop every job of the run that is still active; the ids that were."""
