"""Turn a run folder's raw files into ``summary.json``/``.csv``, Parquet and reports.

Everything is recomputed from what is on disk (records, point states, Prometheus
snapshots, provenance), so ``speedbench report`` and a resumed run produce the same
summary as the run that wrote the files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedbench.metrics.breakdown import category_rows
from speedbench.metrics.inputs import ArmInfo, PointInfo
from speedbench.metrics.conditions import conditions_block
from speedbench.metrics.controls import AA_CONTROL_FAMILY, controls_block
from speedbench.metrics.noise_floor import noise_floor
from speedbench.metrics.registry import SummaryRow
from speedbench.metrics.rows import RowExtras, summary_rows
from speedbench.metrics.stored import StopEntry
from speedbench.metrics.table import Requests
from speedbench.stopping.summary import stopping_rows
from speedbench.calibration import screen as calib_screen
from speedbench.calibration import store as calib_store
from speedbench.engine.provenance import Hardware, Provenance
from speedbench.records import PointKey
from speedbench.results.output_summary import outputs_block
from speedbench.results.files import atomic_write, run_started
from speedbench.results.rounds import PointRound
from speedbench.results.rundir import HOST_FILE, SCHEMA_VERSION, RunDir
from speedbench.results.run import RunEngine, read_provenance
from speedbench.scenario import Scenario, validate_data


def _hardware(provenance: dict[str, Provenance], host: Any = None) -> str:
    """From the arms' provenance, else from host.json (written when the run starts, so a
    run whose every server died still names its machine)."""
    for hw in [prov.hardware or None for prov in provenance.values()] + [host]:
        if isinstance(hw, dict):
            typed = Hardware.from_dict(hw)
            return str(typed.summary or typed.description or hw)
        if hw:
            return str(hw)
    return ""


def _created(run_dir: RunDir) -> str:
    """The run's start time, from its folder name (``YYYYmmddTHHMMSSZ-xxxxxx``)."""
    return run_started(run_dir.path.name, folder=run_dir.path).isoformat(timespec="seconds")


def _prom_deltas(run_dir: RunDir, points: dict, engine: RunEngine) -> dict:
    deltas = {key: run_dir.prometheus_delta(key, engine.spec_counters) for key in points}
    return {k: v for k, v in deltas.items() if v is not None}


def calibrations(run_dir: RunDir, sc: Scenario, provenance: dict[str, Provenance], engine: RunEngine,
                 write: bool) -> dict[str, Any]:
    """Arm -> the calibration its predictions use. The first summary that finds one copies
    it into the run folder (calibrations.json), so later summaries, reports and other
    machines predict from the same curves whatever the calibrations folder holds then."""
    saved = run_dir.path / "calibrations.json"
    if saved.is_file():
        return dict(json.loads(saved.read_text(encoding="utf-8")))
    folder = Path(sc.calibrations) if sc.calibrations else run_dir.path.parent.parent / calib_store.DEFAULT_FOLDER
    found = calib_store.matching(folder, sc, provenance, engine.not_system_args) if folder.is_dir() else {}
    if found and write:
        atomic_write(saved, json.dumps(found, indent=2) + "\n")
    return found


def _look_levels(stopping: list[dict[str, Any]]) -> dict[tuple[str, int, str], float]:
    """A stopped point's look level (the lowest over its stopped rounds), for the intervals
    its category rows take from the same requests."""
    out: dict[tuple[str, int, str], float] = {}
    for e in map(StopEntry.from_dict, stopping):
        key = (str(e.arm), int(e.concurrency or 0), str(e.variant or ""))
        out[key] = min(out.get(key, 1.0), float(e.level if e.level is not None else 1.0))
    return out


def _arm_infos(sc: Scenario, points: dict[PointKey, PointRound],
               provenance: dict[str, Provenance]) -> dict[str, ArmInfo]:
    """Each arm's facts for its rows: its draft's EAGLE version, and its first failure."""
    out = {}
    for arm in sc.arms:
        prov = provenance.get(arm.name)
        failed = [p for k, p in points.items() if k.arm == arm.name and p.status == "failed"]
        out[arm.name] = ArmInfo.from_arm(arm, eagle_version=prov.eagle_version if prov else "",
                                         status="failed" if failed else "ok",
                                         failure=(failed[0].failure if failed else None))
    return out


def _trust(run_dir: RunDir, sc: Scenario, records: Requests, rows: list, floor: list) -> dict[str, Any]:
    """summary.json's ``conditions``, ``controls`` and ``outputs`` (docs/metrics.md, "Trust"). The A/A
    control is judged at a 99% family level: a correct run fails it far less often than
    the noise floor's 95% verdict, which stays a note (metrics/controls.py)."""
    aa_control = noise_floor(records, sc.baseline_arm, sc.aa_arm, family=AA_CONTROL_FAMILY) if floor else []
    arms = {"server": {"model": sc.server.model}, "arms": [a.model_dump(mode="json") for a in sc.arms]}
    return {"conditions": conditions_block(run_dir.point_rounds(), sc.baseline_arm),
            "controls": controls_block(arms, rows, aa_control, sc.aa_arm),
            "outputs": outputs_block(run_dir, sc.baseline_arm, sc.workload.temperature, sc.aa_arm)}


def summarize_run_dir(run_dir: RunDir, engine: RunEngine, *, write: bool = True,
                      requests: Requests | None = None) -> dict[str, Any]:
    """Compute the summary of a run folder that ``engine`` ran and (by default) write
    summary.json/csv and records.parquet. The reports are report/'s job (``report.render.write_report``).
    ``requests``: the folder's records, whose request table every part of the summary
    shares (read here when not given; run/finish.py hands the report the same)."""
    sc: Scenario = validate_data(run_dir.load_scenario(), str(run_dir.scenario_path))
    records = requests if requests is not None else Requests(run_dir.load_records())
    provenance = read_provenance(run_dir, engine)
    stopping: list[dict[str, Any]] = []
    if sc.stop is not None:  # intervals of stopped points are taken at the look level
        stopping = stopping_rows(records, run_dir.rounds(), sc.baseline_arm, sc.stop.alpha)
    cals = calibrations(run_dir, sc, provenance, engine, write)
    given = _Inputs(engine, provenance, stopping, cals)
    summary = _document(run_dir, sc, records, given, _rows(run_dir, sc, records, given))
    if write:
        run_dir.write_summary(summary)
        if records:
            run_dir.write_parquet(records.records)
    return summary


@dataclass(frozen=True)
class _Inputs:
    """What the rows and the document share besides the records: the engine, the arms'
    provenance, sequential stopping's entries and the calibrations found."""

    engine: RunEngine
    provenance: dict[str, Provenance]
    stopping: list[dict[str, Any]]
    calibrations: dict[str, Any]


def _rows(run_dir: RunDir, sc: Scenario, records: Requests, given: _Inputs) -> list[SummaryRow]:
    """The summary rows, each point's inputs read from the folder."""
    points = run_dir.all_points()
    arm_info = _arm_infos(sc, {k: PointRound.from_dict(p) for k, p in points.items()}, given.provenance)
    deltas = _prom_deltas(run_dir, points, given.engine)
    infos = {key: PointInfo.from_point(p) for key, p in points.items()}
    return summary_rows(records, deltas, sc.baseline_arm, arm_info, infos,
                        percentiles=sc.percentiles, slo=sc.slo.model_dump() if sc.slo.given else None,
                        extra=RowExtras(given.stopping, calib_store.predictor(given.calibrations)))


def _document(run_dir: RunDir, sc: Scenario, records: Requests, given: _Inputs,
              rows: list[SummaryRow]) -> dict[str, Any]:
    """summary.json, in its order (docs/architecture.md, "Summary rows")."""
    screening, promoted = calib_screen.screening_block(rows, sc, given.calibrations)
    floor = noise_floor(records, sc.baseline_arm, sc.aa_arm)
    return {
        "schema_version": SCHEMA_VERSION,
        "scenario": sc.name,
        "run_id": run_dir.path.name,
        "created_utc": _created(run_dir),
        "hardware": _hardware(given.provenance, run_dir.read_json(HOST_FILE)),
        "baseline": sc.baseline_arm,
        "reference": sc.reference.model_dump(mode="json"),
        "percentiles": list(sc.percentiles),
        "load": sc.load.model_dump(mode="json"),
        "slo": sc.slo.model_dump(mode="json"),
        "noise_floor": floor,
        **_trust(run_dir, sc, records, rows, floor),
        "screening": screening,
        "promoted": promoted,
        "arms": run_dir.arm_costs(),
        "stopping": given.stopping,
        "baseline_source": run_dir.read_json("baseline.json") or {"reused": False},
        "rows": [r.to_dict() for r in rows],
        "categories": category_rows(records, sc.baseline_arm, [a.name for a in sc.arms],
                                    levels=_look_levels(given.stopping)),
    }
