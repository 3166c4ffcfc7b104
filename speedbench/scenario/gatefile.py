"""A gates file (``speedbench gate --gates FILE``), read with the scenario's machinery
(scenario/load.py): file:line, "did you mean" for unknown keys, metrics and arms, and the
fix; never pydantic's own text."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from speedbench.errors import ScenarioError
from speedbench.scenario.base import Strict
from speedbench.scenario.load import YamlKind, check_gate_arms, format_validation_error, read_yaml
from speedbench.scenario.model import GateSpec

GATES_FILE = YamlKind("gates", "a YAML list of gates, such as [{metric: speedup, min: 1.5}]",
                      "check the path; a gates file is a YAML list of gates (docs/gates.md)", "docs/gates.md")
# what an unknown key in a gates file is matched against (not every scenario key)
GATE_KEYS = sorted({"gates", *GateSpec.model_fields})


class GatesFile(Strict):
    """A gates file written as a mapping: ``gates:`` and nothing else."""

    gates: list[GateSpec]


def load_gates_file(path: str | Path, arms: Sequence[str]) -> list[GateSpec]:
    """The gates of ``path``: a list, or a mapping with ``gates:``. ``arms``: the names a
    gate may give (the run's); another is an error at its line, with the closest."""
    text, data = read_yaml(path, GATES_FILE)
    try:
        if isinstance(data, dict):
            gates = GatesFile.model_validate(data).gates
        elif isinstance(data, list):
            gates = TypeAdapter(list[GateSpec]).validate_python(data)
        else:
            raise ScenarioError(f"invalid gates {path}: expected a list of gates such as [{{metric: speedup, min: "
                                f"1.5}}] or a mapping with 'gates:', got {'nothing' if data is None else repr(data)} "
                                "-- fix: see docs/gates.md")
    except ValidationError as e:
        raise format_validation_error(str(path), text, e, kind=GATES_FILE, keys=GATE_KEYS) from None
    at = ("gates",) if isinstance(data, dict) else ()
    check_gate_arms(gates, arms, arms, str(path), text, at, GATES_FILE)
    return gates


def scenario_gates(data: object, path: str, text: str) -> list[GateSpec]:
    """A run's own gates (its saved scenario's ``gates:``), checked again as a gates file
    is: a folder from another speedbench or edited by hand gets the same messages."""
    try:
        return GatesFile.model_validate({"gates": data}).gates
    except ValidationError as e:
        raise format_validation_error(path, text, e, keys=GATE_KEYS) from None
