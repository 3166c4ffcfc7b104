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
    promote: {best: 2}                 # screening cells (load.mode: screen): which get a full run

Screening (docs/metrics.md, "Calibration and screening"): when the cells' scenarios run
in ``load: {mode: screen}``, each cell starts only its checkpoints' servers; once every
cell is gathered, ``promote`` (else the scenario's own ``promote:``) ranks the cells by
AL and each promoted cell runs again in full (``load.mode=concurrency``, baseline
included) before the dashboard is built.

A cell keeps its scenario's name, so the dashboard puts the checkpoints of one scenario
side by side: its trend lines follow arm and draft checkpoint, night over night.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from speedbench.calibration.screen import Ranked, promote
from speedbench.errors import ScenarioError
from speedbench.metrics.stored import ScreenEntry
from speedbench.scenario import Scenario, load_scenario
from speedbench.scenario.traffic import PromoteSpec


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
    promote: PromoteSpec | None = None

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


# ---- screening matrices: promote the best cells to a full run --------------------------

FULL_RUN = "load.mode=concurrency"  # the override that turns a screening cell into a full speed run


def screening(cells: list[Cell]) -> bool:
    return any(c.scenario.load.mode == "screen" for c in cells)


def promote_rule(m: Matrix, cells: list[Cell]) -> PromoteSpec | None:
    return m.promote or next((c.scenario.promote for c in cells if c.scenario.promote), None)


def cell_name(c: Cell) -> str:
    """What ``promote.beats`` names in a matrix: the checkpoint (and override set)."""
    return "/".join(x for x in (c.checkpoint, c.override) if x)


def cell_entries(runs: list[tuple[Cell, Path]]) -> list[dict]:
    """One screening entry per cell (its best arm by pooled AL), from its summary.json;
    a cell whose run left no summary is left out (it cannot be ranked)."""
    out = []
    for cell, run in runs:
        try:
            entries = json.loads((Path(run) / "summary.json").read_text(encoding="utf-8")).get("screening") or []
        except (OSError, ValueError):
            continue
        # screening entries are the summary's screening block (dicts written by calibration/screen.py)
        scored = [e for e in entries if isinstance(e.get("al_tokens"), (int, float)) and math.isfinite(e["al_tokens"])]
        if scored:
            best = max(scored, key=lambda e: e["al_tokens"])
            out.append({**best, "name": cell_name(cell), "run": str(run)})
    return out


def promoted_cells(m: Matrix, runs: list[tuple[Cell, Path]]) -> list[Cell]:
    """The promoted cells, best first, as full-run cells (same overrides, then FULL_RUN)."""
    cells = [c for c, _ in runs]
    names = promote([Ranked(str(e["name"]), ScreenEntry.from_dict(e)) for e in cell_entries(runs)],
                    promote_rule(m, cells))
    by_name = {cell_name(c): c for c in cells}
    return [full_cell(by_name[n]) for n in names]


def full_cell(c: Cell) -> Cell:
    sets = [*c.overrides, FULL_RUN]
    return Cell(scenario_file=c.scenario_file, checkpoint=c.checkpoint, override=c.override, overrides=sets,
                scenario=load_scenario(c.scenario_file, sets))
