"""The executor interface: where a run's arms execute.

An executor turns (scenario, run folder, arms) into work: the local one runs every arm
in this process (speedbench/run/); the Slurm one submits one batch job per arm that runs
``speedbench job RUN --arm ARM`` and a gather job that runs ``speedbench gather RUN``. The
run folder itself (per-job record/point files) is the only channel between the jobs. A
Kubernetes executor would be one more module beside slurm.py (``executors/kubernetes.py``:
one Job per arm and a gather Job) and one more entry in executors/kinds.py.

Scheduler words (PENDING, RUNNING, ...) belong to each executor's own module; here a job
is only active (queued or running) or not.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Console

from speedbench.errors import UsageError
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


def speedbench_argv(configured: list[str] | None) -> list[str]:
    """The argv that starts speedbench inside a job: the scenario's own, else this
    interpreter's ``python -m speedbench.cli`` (right on a shared filesystem)."""
    return list(configured or [sys.executable, "-m", "speedbench.cli"])


class Executor(ABC):
    """Where the arms of a run execute. ``speedbench run`` calls plan (``--dry-run``),
    submit or resume; ``speedbench status`` / ``cancel`` call status, gather and cancel."""

    kind: ClassVar[str]

    @abstractmethod
    def plan(self, sc: Scenario, output_root: Path, console: Console, *, skip_doctor: bool = False) -> None:
        """Print, after the run's plan, what submitting would start (nothing to add locally)."""

    @abstractmethod
    def submit(self, sc: Scenario, output_root: Path, console: Console, *, overrides: list[str],
               skip_doctor: bool = False) -> int:
        """Start a new run of ``sc`` under ``output_root``; the command's exit code."""

    @abstractmethod
    def resume(self, run_path: Path, console: Console, *, overrides: list[str], skip_doctor: bool = False) -> int:
        """Finish an interrupted run folder; the command's exit code."""

    @abstractmethod
    def status(self, run_dir: Any, sc: Scenario) -> list[ArmJob]:
        """Each arm's latest job, its state and point progress."""

    @abstractmethod
    def gather(self, run_dir: Any) -> tuple[str, str] | None:
        """The job that gathers the run (summary, reports, gates) and its state; None
        when the run gathers in the process that ran it."""

    @abstractmethod
    def cancel(self, run_dir: Any, wait_s: float = 120) -> list[str]:
        """Stop every job of the run that is still active; the ids that were."""

    # The nightly matrix (commands/submit.py) submits run folders and follow-up jobs
    # itself; an executor that runs in this process has no jobs to chain.

    def submit_jobs(self, sc: Scenario, run_dir: Any, *, cwd: Path, skip_doctor: bool = False) -> tuple[list[str], str]:
        """Submit every arm of an existing run folder and its gather: (arm job ids, gather job id)."""
        raise UsageError(f"the {self.kind} executor does not submit jobs")

    def submit_after(self, script: Path, after: list[str]) -> str:
        """Submit one more script that starts once every job in ``after`` has ended; its job id."""
        raise UsageError(f"the {self.kind} executor does not submit jobs")
