"""The one lookup from a scenario's ``executor.kind`` to its executor."""

from __future__ import annotations

from speedbench.executors.base import Executor
from speedbench.executors.local import LocalExecutor
from speedbench.executors.slurm import SlurmExecutor
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
