"""Where a scenario's arms run: this process (local) or one batch job per arm (slurm);
docs/slurm.md describes every setting."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from speedbench.scenario.base import Strict


class SlurmSpec(Strict):
    """How each arm's batch job is requested. None = the cluster's default."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None  # sbatch --time, e.g. "04:00:00"
    nodes: int = Field(1, ge=1)
    gpus_per_node: int | None = Field(None, ge=0)
    gpus_per_task: int | None = Field(None, ge=0)  # --gpus-per-task; the job has one task
    gres: str | None = None  # --gres, e.g. "gpu:h100:4" where the cluster names GPU types
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
    # How many times a job may requeue itself (it counts SLURM_RESTART_COUNT). A job that
    # never gets through its points before the limit would otherwise loop forever.
    max_requeues: int = Field(3, ge=0)

    @field_validator("nodes")
    @classmethod
    def _one_node(cls, v: int) -> int:
        if v != 1:
            raise ValueError("one node per arm: multi-node servers (vLLM over Ray) are not supported yet")
        return v

    @model_validator(mode="after")
    def _one_gpu_request(self) -> SlurmSpec:
        # sbatch refuses some mixes and combines others; one way of asking keeps the count plain.
        asked = [f for f, v in (("gpus_per_node", self.gpus_per_node), ("gpus_per_task", self.gpus_per_task),
                                ("gres", self.gres if self.gres and self.gres.startswith("gpu") else None))
                 if v is not None]
        if len(asked) > 1:
            raise ValueError(f"ask for GPUs one way: {' and '.join(asked)} are both set")
        return self


class ExecutorSpec(Strict):
    kind: Literal["local", "slurm"] = "local"
    slurm: SlurmSpec = Field(default_factory=SlurmSpec)
