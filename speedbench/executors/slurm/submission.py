"""Submitting to Slurm: a run folder's arm jobs and gather (their scripts in ``RUN/slurm/``,
their ids in ``RUN/slurm/jobs.json``), and a matrix's follow-up jobs."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

from speedbench.errors import UsageError
from speedbench.executors.slurm.client import Slurm
from speedbench.executors.slurm.scripts import CANCELLED, DIR, arm_script, follow_up_script, gather_script
from speedbench.results import atomic_write
from speedbench.results.files import ensure_dir
from speedbench.scenario import Scenario, SlurmSpec

JOBS = "jobs.json"


def load_jobs(run_path: Path) -> dict[str, Any]:
    p = Path(run_path) / DIR / JOBS
    if not p.exists():
        raise UsageError(f"{run_path} was not submitted to Slurm ({DIR}/{JOBS} is missing)")
    return json.loads(p.read_text(encoding="utf-8"))


def _save_jobs(run_path: Path, jobs: dict[str, Any]) -> None:
    atomic_write(Path(run_path) / DIR / JOBS, json.dumps(jobs, indent=2) + "\n")


def submit(sc: Scenario, run_dir: Any, *, arms: list[str] | None = None, skip_doctor: bool = False,
           slurm: Slurm | None = None, cwd: Path | None = None) -> dict[str, Any]:
    """Write and submit one script per arm (``arms``: only these) and the gather. Returns
    the updated jobs.json content."""
    slurm = slurm or Slurm()
    cwd = (cwd or Path.cwd()).resolve()
    run_path = Path(run_dir.path).resolve()
    folder = run_path / DIR
    ensure_dir(folder)
    (folder / CANCELLED).unlink(missing_ok=True)
    try:
        jobs = load_jobs(run_path)
    except UsageError:
        jobs = {"executor": "slurm", "arms": {}, "gather": [], "submissions": []}
    ids = []
    for arm in arms if arms is not None else [a.name for a in sc.arms]:
        script = folder / f"{arm}.sbatch"
        atomic_write(script, arm_script(sc, run_path, arm, cwd=cwd, skip_doctor=skip_doctor))
        job_id = slurm.sbatch(script)
        jobs["arms"].setdefault(arm, []).append(job_id)
        ids.append(job_id)
        _save_jobs(run_path, jobs)  # after every sbatch: a failure later still leaves a cancellable list
    script = folder / "gather.sbatch"
    atomic_write(script, gather_script(sc, run_path, cwd=cwd))
    jobs["gather"].append(slurm.sbatch(script, after=ids))
    jobs["submissions"].append({"utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                                "arms": ids, "gather": jobs["gather"][-1]})
    _save_jobs(run_path, jobs)
    return jobs


def submit_follow_up(spec: SlurmSpec, script: Path, *, name: str, what: str, words: list[str], after: list[str],
                     slurm: Slurm | None = None) -> str:
    """Write ``script`` (a job running ``speedbench WORDS``, its output beside it) and submit
    it to start once every job in ``after`` has ended; its job id."""
    atomic_write(script, follow_up_script(spec, name=name, what=what, folder=script.parent,
                                          cwd=Path.cwd().resolve(), words=words))
    return (slurm or Slurm()).sbatch(script, after=after)
