"""Slurm's job states: each arm's latest job and its point progress (scontrol, then sacct
once slurmctld has forgotten the job), and cancelling a run's jobs. Slurm's words for a
state stay here; the rest of speedbench sees only ``ArmJob.active``."""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path
from typing import Any

from speedbench.errors import ServerError
from speedbench.executors.base import ArmJob
from speedbench.executors.slurm.client import Slurm
from speedbench.executors.slurm.scripts import CANCELLED, DIR, REQUEUE_CAP
from speedbench.executors.slurm.submission import load_jobs
from speedbench.results import atomic_write
from speedbench.run.plan import build_plan
from speedbench.scenario import Scenario

# Slurm's words for a job that is queued or running (scontrol's JobState)
ACTIVE_STATES = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
                 "REQUEUE_FED", "RESIZING", "SUSPENDED", "STAGE_OUT", "SIGNALING")


def _exit_code(run_path: Path, job_id: str) -> str | None:
    p = run_path / DIR / f"{job_id}.exit"
    return p.read_text().strip() if p.exists() else None


def requeue_cap_message(run_path: Path, job_id: str) -> str | None:
    """Why the job failed, when it stopped at ``max_requeues`` (the job script leaves the
    marker), with how to go on; None otherwise."""
    p = run_path / DIR / f"{job_id}.{REQUEUE_CAP}"
    if not p.exists():
        return None
    n = p.read_text().strip() or "?"
    # the signal is the time limit's, or a preemption's; the script cannot tell them apart
    return (f"requeue cap reached: stopped by the time limit or preemption after {n} "
            f"requeue{'' if n == '1' else 's'} (max_requeues={n}); "
            f"resume with: speedbench run --resume {run_path} (raise executor.slurm.time or max_requeues "
            "in its scenario.resolved.yaml first if the arm needs longer)")


def _forgotten(run_path: Path, arm: str, job_id: str, slurm: Slurm) -> ArmJob:
    """A job that slurmctld no longer knows (MinJobAge): sacct's record, else the exit
    code that the job script wrote, with why sacct could not say."""
    rc = _exit_code(run_path, job_id)
    speedbench_rc = f" (speedbench exit {rc})" if rc else ""
    acct = slurm.accounting(job_id)
    if isinstance(acct, dict):
        node = acct.get("NodeList", "")
        return ArmJob(arm=arm, job_id=job_id, state=acct["State"], node="" if node in ("None assigned", "") else node,
                      reason=f"exit {acct.get('ExitCode', '?')}{speedbench_rc}, from sacct",
                      active=acct["State"] in ACTIVE_STATES)
    state = "UNKNOWN" if rc is None else ("COMPLETED" if rc == "0" else "FAILED")
    return ArmJob(arm=arm, job_id=job_id, state=state,
                  reason=(f"exit {rc}; " if rc else "") + f"slurmctld no longer knows the job and {acct}")


def _known(run_path: Path, arm: str, job_id: str, info: dict[str, str]) -> ArmJob:
    """A job that slurmctld still knows, from ``scontrol show job``."""
    rc = _exit_code(run_path, job_id)
    state = info.get("JobState", "UNKNOWN")
    reason = info.get("Reason", "")
    if state not in ACTIVE_STATES:
        reason = f"exit {info.get('ExitCode', '?')}" + (f" (speedbench exit {rc})" if rc else "")
    node = info.get("NodeList", "") if info.get("NodeList") != "(null)" else ""
    return ArmJob(arm=arm, job_id=job_id, state=state, node=node, reason="" if reason == "None" else reason,
                  active=state in ACTIVE_STATES)


def arm_jobs(run_dir: Any, sc: Scenario, slurm: Slurm | None = None) -> list[ArmJob]:
    """Each arm's latest job with its state and point progress."""
    slurm = slurm or Slurm()
    run_path = Path(run_dir.path)
    jobs = load_jobs(run_path)
    rounds = run_dir.finished_rounds()
    plan = build_plan(sc)
    out = []
    for arm, ids in jobs["arms"].items():
        keys = plan.points(arm) if arm in {a.name for a in sc.arms} else []
        done = len(keys) - len(plan.unfinished(rounds, arm)) if keys else 0
        job_id = ids[-1]
        info = slurm.show(job_id)
        job = _forgotten(run_path, arm, job_id, slurm) if info is None else _known(run_path, arm, job_id, info)
        job.points_done, job.points_total = done, len(keys)
        capped = requeue_cap_message(run_path, job_id)
        if capped and job.state not in ACTIVE_STATES:
            job.reason = f"{job.reason}; {capped}" if job.reason else capped
        out.append(job)
    return out


def gather_job(run_dir: Any, slurm: Slurm | None = None) -> tuple[str, str] | None:
    """The run's latest gather job and its state (scontrol, else sacct); None before any."""
    jobs = load_jobs(Path(run_dir.path))
    if not jobs.get("gather"):
        return None
    job_id = jobs["gather"][-1]
    slurm = slurm or Slurm()
    info = slurm.show(job_id)
    if info is None:
        acct = slurm.accounting(job_id)
        return job_id, acct["State"] if isinstance(acct, dict) else f"UNKNOWN ({acct})"
    return job_id, info.get("JobState", "UNKNOWN")


def cancel(run_dir: Any, slurm: Slurm | None = None, wait_s: float = 120) -> list[str]:
    """Cancel every job of the run and wait until none is left in the queue; returns the
    job ids that were still active."""
    slurm = slurm or Slurm()
    run_path = Path(run_dir.path)
    jobs = load_jobs(run_path)
    atomic_write(run_path / DIR / CANCELLED, _dt.datetime.now(_dt.timezone.utc).isoformat() + "\n")
    every = [i for ids in jobs["arms"].values() for i in ids] + list(jobs.get("gather") or [])
    active = [i for i in every if (slurm.show(i) or {}).get("JobState", "") in ACTIVE_STATES]
    slurm.cancel(active)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not any((slurm.show(i) or {}).get("JobState", "") in ACTIVE_STATES for i in active):
            return active
        time.sleep(0.5)
    raise ServerError(f"jobs {active} were cancelled but are still in the queue after {wait_s:.0f} s")
