"""The one lookup from a scenario's ``executor.kind`` to its executor."""

from __future__ import annotations

from speedbench.errors import UsageError
from speedbench.executors.base import Executor, JobExecutor
from speedbench.executors.local import LocalExecutor
from speedbench.executors.slurm.executor import SlurmExecutor
from speedbench.results import RunDir

# a Kubernetes executor: "kubernetes": KubernetesExecutor (executors/kubernetes.py)
EXECUTORS: dict[str, type[Executor]] = {"local": LocalExecutor, "slurm": SlurmExecutor}


def executor_for(kind: str) -> Executor:
    """The executor of ``kind`` ("local", "slurm")."""
    try:
        return EXECUTORS[kind]()
    except KeyError:
        raise ValueError(f"unknown executor kind {kind!r} (known: {', '.join(EXECUTORS)})") from None


def executor_of_run(run_dir: RunDir) -> Executor:
    """The executor a run folder was started with (its saved scenario's ``executor.kind``;
    read raw, so that a folder whose scenario no longer validates can still be cancelled)."""
    return executor_for(str((run_dir.load_scenario().get("executor") or {}).get("kind") or "local"))


def jobs_of_run(run_dir: RunDir, what: str) -> JobExecutor:
    """The run folder's executor, when its arms ran as jobs; else exit 2 saying there are
    no jobs ``what`` ("to cancel")."""
    executor = executor_of_run(run_dir)
    if not isinstance(executor, JobExecutor):
        raise UsageError(f"{run_dir.path} ran here, not as cluster jobs: it has no jobs {what}")
    return executor
