"""A nightly matrix: scenarios x draft checkpoints x override sets, one run folder per cell.

The file (docs/slurm.md, "Nightly matrix")::

    results: results/nightly           # results root; each cell's run folder goes under it
    dashboard: results/nightly/site    # rebuilt when every cell is gathered
    scenarios: [scenarios/llama8b_eagle3.yaml]
    checkpoints:                       # each: a name and the --set overrides that load it
      - {name: ckpt-1130, set: ["arms.eagle3.speculative_config.model=/ckpt/1130"]}
      - {name: ckpt-1201, set: ["arms.eagle3.speculative_config.model=/ckpt/1201"]}
    overrides:                         # optional third axis, each a named override set
      - {name: short, set: ["workload.max_tokens=256"]}
    set: ["executor.slurm.partition=gpu"]   # applied to every cell first

A cell keeps its scenario's name, so the dashboard puts the checkpoints of one scenario
side by side: its trend lines follow arm and draft checkpoint, night over night.
"""

from __future__ import annotations

import itertools
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from speedbench.errors import ScenarioError
from speedbench.executors.slurm import speedbench_argv
from speedbench.scenario import Scenario, load_scenario


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NamedSet(_Strict):
    name: str = Field(min_length=1)
    set: list[str] = Field(default_factory=list)


class Matrix(_Strict):
    results: str = "results"
    dashboard: str | None = None  # default: <results>/site
    scenarios: list[str] = Field(min_length=1)
    checkpoints: list[NamedSet] = Field(min_length=1)
    overrides: list[NamedSet] = Field(default_factory=list)
    set: list[str] = Field(default_factory=list)

    @property
    def site(self) -> Path:
        return Path(self.dashboard) if self.dashboard else Path(self.results) / "site"


@dataclass
class Cell:
    scenario_file: str
    checkpoint: str
    override: str  # "" without an override axis
    overrides: list[str]
    scenario: Scenario

    @property
    def label(self) -> str:
        return " x ".join(x for x in (self.scenario.name, self.checkpoint, self.override) if x)


def load_matrix(path: str | Path) -> Matrix:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ScenarioError(f"{p}: cannot read the matrix file ({e.strerror})") from None
    try:
        return Matrix.model_validate(data or {})
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors())
        raise ScenarioError(f"{p}: invalid matrix: {msgs}") from None


def cells(m: Matrix, base: Path | None = None) -> list[Cell]:
    """Every cell, scenario files resolved against ``base`` (the matrix file's folder)
    when relative and not found from the working directory."""
    out = []
    overrides: list[NamedSet | None] = [*m.overrides] or [None]
    for scen, ck, ov in itertools.product(m.scenarios, m.checkpoints, overrides):
        f = Path(scen)
        if not f.exists() and base is not None and (base / f).exists():
            f = base / f
        sets = [*m.set, *ck.set, *(ov.set if ov else [])]
        out.append(Cell(scenario_file=str(f), checkpoint=ck.name, override=ov.name if ov else "", overrides=sets,
                        scenario=load_scenario(f, sets)))
    return out


def dashboard_script(sc: Scenario, results: Path, site: Path, *, cwd: Path) -> str:
    """The job that rebuilds the dashboard once every cell's gather has ended."""
    spec = sc.executor.slurm
    head = ["--job-name=sb-dashboard", f"--output={results}/slurm-dashboard-%j.out", f"--chdir={cwd}",
            "--nodes=1", "--ntasks=1", "--cpus-per-task=1"]
    head += [f"--{k}={v}" for k, v in (("partition", spec.partition), ("account", spec.account), ("qos", spec.qos))
             if v]
    return ("#!/bin/bash\n# speedbench: nightly matrix dashboard (generated; docs/slurm.md)\n"
            + "".join(f"#SBATCH {h}\n" for h in head)
            + "".join(f"{ln}\n" for ln in spec.setup)
            + shlex.join([*speedbench_argv(spec), "dashboard", str(results), "-o", str(site)]) + "\n")
