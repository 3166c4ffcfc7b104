"""The part of every arm's provenance that no engine decides: which data was read,
which speedbench measured it (version, git commit), and the cluster job it ran in.

Each engine's ``provenance`` adds :func:`run_facts` to its own entry (vLLM's:
engine/vllm/provenance.py), so every engine records these the same way.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from speedbench import __version__
from speedbench.scenario import Scenario
from speedbench.workload import source_fingerprint

# What the scheduler says about the job this process runs in (Slurm sets these in every
# batch job and step). Empty outside a cluster job.
_SLURM_FACTS = {
    "job_id": "SLURM_JOB_ID", "array_job_id": "SLURM_ARRAY_JOB_ID", "array_task_id": "SLURM_ARRAY_TASK_ID",
    "job_name": "SLURM_JOB_NAME", "node": "SLURMD_NODENAME", "nodelist": "SLURM_JOB_NODELIST",
    "partition": "SLURM_JOB_PARTITION", "account": "SLURM_JOB_ACCOUNT", "restart_count": "SLURM_RESTART_COUNT",
    "gpus": "SLURM_JOB_GPUS", "cuda_visible_devices": "CUDA_VISIBLE_DEVICES",
}


def run_quiet(argv: list[str], cwd: Path | None = None) -> str:
    """A short command's stripped output; "" when it is missing, fails or hangs."""
    try:
        res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return res.stdout.strip() if res.returncode == 0 else ""


def git_commit() -> dict[str, Any]:
    """The commit of the checkout speedbench runs from, and whether it has local changes."""
    repo = Path(__file__).resolve().parents[2]
    commit = run_quiet(["git", "rev-parse", "HEAD"], cwd=repo)
    dirty = bool(run_quiet(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo)) if commit else False
    return {"commit": commit, "dirty": dirty}


def cluster_job(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    if "SLURM_JOB_ID" not in env:
        return {}
    return {"scheduler": "slurm", **{k: env[v] for k, v in _SLURM_FACTS.items() if v in env}}


def run_facts(scenario: Scenario) -> dict[str, Any]:
    """The engine-neutral keys of an arm's provenance.json entry, in the order it holds them."""
    git = git_commit()
    return {
        # Prepared SPEED-Bench copies differ by who prepared them and when (sources change);
        # the hash says whether two runs read the same bytes.
        "data": source_fingerprint(scenario.workload),
        "speedbench_version": __version__,
        "git_commit": git["commit"],
        "git_dirty": git["dirty"],
        "cluster": cluster_job(),
    }
