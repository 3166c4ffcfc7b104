"""Where a scenario's arms run: this process (local) or one batch job per arm (slurm);
docs/slurm.md describes every setting."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from speedbench.scenario.base import Strict


class SlurmSpec(Strict):
    """How each arm's batch job is requested. None = the cluster's default."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None  # sbatch --time, e.g. "04:00:00"
    nodes: int = Field(1, ge=1)
    gpus_per_node: int | None = Field(None, ge=0)
    cpus_per_task: int | None = Field(None, ge=1)
    mem: str | None = None  # per node, e.g. "200G"
    constraint: str | None = None
    sbatch_lines: list[str] = Field(default_factory=list)  # extra #SBATCH lines, written as given
    setup: list[str] = Field(default_factory=list)  # shell lines before speedbench (module load, venv)
    # The argv that runs speedbench inside the job; default: the submitting interpreter's
    # ``python -m speedbench.cli`` (right when the software lives on the shared filesystem).
    speedbench: list[str] | None = None
    container_image: str | None = None  # pyxis --container-image
    container_mounts: list[str] = Field(default_factory=list)  # pyxis --container-mounts, "src:dst"
    # Seconds before the time limit at which the job gets SIGTERM (saves, then requeues).
    signal_before_s: int = Field(300, ge=0)
    requeue: bool = True

    @field_validator("nodes")
    @classmethod
    def _one_node(cls, v: int) -> int:
        if v != 1:
            raise ValueError("one node per arm: multi-node servers (vLLM over Ray) are not supported yet")
        return v


class ExecutorSpec(Strict):
    kind: Literal["local", "slurm"] = "local"
    slurm: SlurmSpec = Field(default_factory=SlurmSpec)
