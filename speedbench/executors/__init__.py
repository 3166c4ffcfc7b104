"""Where a run's arms execute.

- local     this process runs every arm (speedbench/run/); the default
- slurm.py  one batch job per arm plus a dependent gather job, all writing one run folder

The seam is small on purpose, so that a Kubernetes Job executor can sit beside Slurm: an
executor turns (scenario, run folder, arms) into jobs that each run
``speedbench job RUN --arm ARM`` and a gather that runs ``speedbench gather RUN``; it
records its job ids in the run folder, reports their states, and cancels them. The run
folder itself (per-job record/point files, see results.py) is the only channel between
the jobs, so the jobs need a shared filesystem and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ArmJob:
    """One arm's job as ``speedbench status`` shows it."""

    arm: str
    job_id: str
    state: str  # the scheduler's word: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
    node: str = ""
    reason: str = ""  # why it is pending, or how it ended (exit code, signal)
    points_done: int = 0
    points_total: int = 0

    @property
    def died(self) -> bool:
        """Ended without finishing its points."""
        return self.state not in ACTIVE_STATES and self.points_done < self.points_total


ACTIVE_STATES = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
                 "REQUEUE_FED", "RESIZING", "SUSPENDED", "STAGE_OUT", "SIGNALING")
