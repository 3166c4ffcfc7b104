"""Earlier runs whose baseline this run may reuse (``baseline_from:``): which ones match,
and why the others do not (docs/metrics.md, "Reused baselines").

A baseline measurement holds for another run when the same engine ran the same server
on the same hardware over the same requests. The facts compared come from two places:
the scenario (the baseline arm's settings, the server, the workload, the load shape,
rounds and the stopping schedule, all of which decide what was sent) and the provenance
the arm recorded once its server was up (vLLM version, the argv it ran, the hardware and
the data's content hash).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedbench.metrics.stored_blocks import BaselineSource
from speedbench.engine.provenance import Provenance, ProvenanceReader
from speedbench.results.files import run_started
from speedbench.results.rundir import RunDir
from speedbench.scenario import Scenario, validate_data

# argv flags whose values differ between two starts of the same server
_PER_START_FLAGS = ("--port", "--host")


def scenario_facts(sc: Scenario) -> dict[str, Any]:
    """What the scenario decides about the baseline's measurement, as plain data."""
    arm = sc.arm(sc.baseline_arm) if sc.baseline_arm else None
    server = sc.server.model_dump(mode="json", exclude={"port", "host", "ready_timeout_s", "shutdown_grace_s",
                                                         "gpus", "api_key_env"})
    return {
        "baseline_arm": arm.model_dump(mode="json", exclude={"name", "description", "base_url", "gpus"})
        if arm else None,
        "server": server,
        "workload": sc.workload.model_dump(mode="json"),
        "concurrency": sorted(sc.concurrency),
        "load": sc.load.model_dump(mode="json"),
        "repeats": sc.repeats,
        "stop": sc.stop.model_dump(mode="json", exclude={"speedup_ci_halfwidth", "al_ci_halfwidth"})
        if sc.stop else None,
    }


def provenance_facts(prov: Provenance) -> dict[str, Any]:
    """What the running baseline server says about itself (its arm's provenance); the
    engine's version keyed by the engine (``<engine>_version``)."""
    return {prov.version_key: prov.engine_version, "model": prov.target, "argv": _stable_argv(list(prov.argv)),
            "hardware": prov.machine.summary if prov.hardware else None,
            "data": prov.data_sha256 if prov.data else None}


def _stable_argv(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in _PER_START_FLAGS:
            skip = True
            continue
        if a.split("=", 1)[0] in _PER_START_FLAGS:
            continue
        out.append(a)
    return out


@dataclass
class Candidate:
    """One earlier run and whether its baseline can stand in for this run's."""

    run_dir: RunDir
    baseline: str  # the baseline arm's name in that run
    created: _dt.datetime
    mismatches: list[str] = field(default_factory=list)

    @property
    def age_days(self) -> float:
        return (_dt.datetime.now(_dt.timezone.utc) - self.created).total_seconds() / 86400


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Keys whose values differ, as ``key: old != new`` (values shortened)."""
    return [f"{k}: {_short(a.get(k))} != {_short(b.get(k))}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def find_candidates(root: str | Path, sc: Scenario, prov: Provenance, engine: ProvenanceReader, *,
                    exclude: Path | None = None) -> list[Candidate]:
    """Every finished run under ``root`` (a results folder, a scenario's folder or one run
    folder) with a baseline, newest first, each with what does not match this run. Their
    provenance is read by this run's ``engine``: a run of another engine differs in its
    scenario's ``server.engine`` already."""
    here_sc, here_prov = scenario_facts(sc), provenance_facts(prov)
    out = []
    for summary in _summaries(Path(root)):
        rd = RunDir.open(summary.parent)
        if exclude is not None and rd.path.resolve() == exclude.resolve():
            continue
        try:
            data = rd.load_summary()
            old_sc = _scenario(rd)
        except Exception:  # a damaged or foreign folder is no candidate, not an error
            continue
        base = data.get("baseline")
        if not base or old_sc is None:
            continue
        old_prov = engine.read_provenance(rd.load_provenance().get(base) or {})
        source = BaselineSource.from_dict(data.get("baseline_source") or {})
        # A baseline reused once is as old as the run that measured it, not the run that copied it.
        c = Candidate(rd, base, run_started(source.measured_utc if source.reused
                                            else data.get("created_utc"), folder=rd.path))
        c.mismatches = differences(scenario_facts(old_sc), here_sc) + differences(provenance_facts(old_prov),
                                                                                   here_prov)
        if not rd.finished_points():
            c.mismatches.append("no finished points")
        out.append(c)
    return sorted(out, key=lambda c: c.created, reverse=True)


def pick(candidates: list[Candidate], max_age_days: float) -> tuple[Candidate | None, str]:
    """The newest matching candidate young enough, or None and why none was taken."""
    if not candidates:
        return None, "no finished run found"
    for c in candidates:
        if not c.mismatches and c.age_days <= max_age_days:
            return c, ""
    fresh = [c for c in candidates if c.age_days <= max_age_days]
    if not fresh:
        return None, f"every earlier run is older than {max_age_days:g} days"
    c = fresh[0]
    return None, f"the newest run ({c.run_dir.name}) differs: " + "; ".join(c.mismatches[:3])


def _summaries(root: Path) -> list[Path]:
    if (root / "summary.json").is_file():
        return [root / "summary.json"]
    return sorted({*root.glob("*/summary.json"), *root.glob("*/*/summary.json")})


def _scenario(rd: RunDir) -> Scenario | None:
    raw = rd.load_scenario()
    return validate_data(raw, str(rd.scenario_path)) if raw else None


