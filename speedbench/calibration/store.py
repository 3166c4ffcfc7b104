"""Calibration files: one JSON per system, keyed by provenance, in a calibrations folder.

A calibration holds for the system it was measured on and no other: the same vLLM
version, target, draft method and architecture, k, hardware and server args. The key is
those facts as data; its digest names the file, and a run finds its calibration by
computing the same key from its own provenance and scenario.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from speedbench.calibration.fit import Curve
from speedbench.engine.provenance import Hardware, Provenance
from speedbench.records import PointKey
from speedbench.scenario import Scenario

SCHEMA = 1
DEFAULT_FOLDER = "calibrations"  # under the results root: results/calibrations
def system_args(server_args: dict[str, Any], arm_args: dict[str, Any], ignore: Collection[str]) -> dict[str, Any]:
    """The server args that shape step cost, with the keys spelled one way (dashes).
    ``ignore``: the engine's args that do not (its ``not_system_args``: reporting flags,
    the port, the draft)."""
    merged = {str(k).lstrip("-").replace("_", "-"): v for k, v in {**server_args, **arm_args}.items()}
    return {k: merged[k] for k in sorted(merged) if k not in ignore}


def calibration_key(prov: Provenance, args: dict[str, Any]) -> dict[str, Any]:
    """The facts a calibration is valid for, from one arm's provenance and its
    :func:`system_args`. The draft's architecture comes from its config.json when there is
    one (EAGLE 3 and 3.1 share ``LlamaForCausalLMEagle3``), else from the method. The
    engine's version is keyed by the engine (``<engine>_version``), as saved files hold it."""
    arch = ",".join(prov.draft.architectures if prov.draft else ()) or prov.method
    return {
        prov.version_key: prov.engine_version,
        "target": prov.target,
        "method": prov.method,
        "draft_architecture": arch,
        "k": prov.k,
        "hardware": str(_hardware_key(prov.machine, prov.hardware) if prov.hardware else ""),
        "server_args": json.loads(json.dumps(args, sort_keys=True, default=str)),
    }



def _hardware_key(hw: Hardware, whole: Mapping[str, Any]) -> Any:
    # the summary where the record has one, else the whole record: keys saved before a
    # summary existed were made so, and a calibration's key must not change under it
    return hw.summary if "summary" in hw.stored else dict(whole)

def key_digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def file_name(key: dict[str, Any]) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in f"{key['method']}-k{key['k']}")
    return f"{safe}-{key_digest(key)}.json"


def document(key: dict[str, Any], curves: list[Curve], meta: dict[str, Any]) -> dict[str, Any]:
    """The calibration file of ``key`` (run/calibrate.py writes it); ``meta`` says how it was measured."""
    return {"schema": SCHEMA, "key": key, "digest": key_digest(key), **meta, "curves": [c.to_dict() for c in curves]}


def load(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def find(folder: Path, key: dict[str, Any]) -> Path | None:
    """The calibration file for exactly this key, if the folder holds one."""
    path = Path(folder) / file_name(key)
    if path.is_file():
        try:
            if Calibration.from_dict(load(path)).key == key:
                return path
        except (OSError, ValueError):
            return None
    return None


@dataclass(frozen=True)
class Calibration:
    """A calibration file (or its copy in a run folder's calibrations.json), typed: the key
    it holds for, the file it was found in, its curves by (concurrency, variant), parsed
    when first asked for (finding a file reads only its key). The document itself stays
    a dict: it is copied into the run folder as it was."""

    document: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        return cls(document=data)

    @property
    def key(self) -> Any:
        return self.document.get("key")

    @property
    def file(self) -> str | None:
        return self.document.get("file")

    @cached_property
    def curves(self) -> dict[tuple[int, str], Curve]:
        curves = (Curve.from_dict(d) for d in self.document.get("curves", []))
        return {(c.concurrency, c.variant): c for c in curves}

    def predict(self, concurrency: int, al: Any, variant: str = "") -> tuple[float, float, float]:
        """(speedup, low, high) the calibration predicts at this concurrency, workload
        variant and AL; NaN when it has no curve there (no interpolation between levels:
        the step cost's dependence on the batch is not known between them)."""
        curve = self.curves.get((int(concurrency), variant or ""))
        if curve is None or not isinstance(al, (int, float)) or not math.isfinite(al):
            return (math.nan, math.nan, math.nan)
        return curve.predict(float(al))


def matching(folder: Path, sc: Scenario, provenance: dict[str, Provenance],
             ignore: Collection[str]) -> dict[str, dict[str, Any]]:
    """Arm -> its calibration, for each speculative arm whose system ``folder`` holds one
    (``ignore``: as in :func:`system_args`)."""
    out: dict[str, dict[str, Any]] = {}
    for arm in sc.arms:
        prov = provenance.get(arm.name)
        if not arm.is_speculative or prov is None:
            continue
        path = find(folder, calibration_key(prov, system_args(sc.server.args, arm.args, ignore)))
        if path is not None:
            out[arm.name] = {**load(path), "file": str(path)}
    return out


def predictor(calibrations: dict[str, dict[str, Any]]) -> Callable[[PointKey, Any], tuple[float, float, float]]:
    """``(point, AL) -> (speedup, low, high)`` for summary rows: the point's arm's
    calibration at its concurrency and variant; NaN where the arm has none."""
    typed = {arm: Calibration.from_dict(cal) for arm, cal in calibrations.items()}

    def predict_point(key: PointKey, al: Any) -> tuple[float, float, float]:
        cal = typed.get(key.arm)
        if cal is None:
            return (math.nan, math.nan, math.nan)
        return cal.predict(key.concurrency, al, str(key.variant or ""))
    return predict_point
