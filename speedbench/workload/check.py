"""What the doctor and provenance ask of a workload without loading it for a run: the
source checked (never raising) and a fingerprint of the data it reads."""

from __future__ import annotations

from pathlib import Path

from speedbench.errors import ScenarioError
from speedbench.scenario import WorkloadSpec
from speedbench.workload.base import DOCS, SourceCheck
from speedbench.workload.load import read_source
from speedbench.workload.select import filter_prompts
from speedbench.workload.sources import config_for, describe, source_of
from speedbench.workload.speed_bench import is_placeholder


def source_fingerprint(spec: WorkloadSpec, *, base_dir: Path | None = None) -> dict[str, object]:
    """What data a run read, for provenance: the layout and a content hash of its files.

    Covers every config the workload and its variants read. Never raises: a source that
    cannot be located is recorded with its error (the run itself fails earlier, and louder).
    """
    out: dict[str, object] = {"source": spec.source, "path": spec.path or ""}
    try:
        return {**out, **source_of(spec).fingerprint(spec, base_dir)}
    except (ScenarioError, OSError) as e:
        return {**out, "sha256": "", "error": str(e)}


def check_source(spec: WorkloadSpec, *, base_dir: Path | None = None) -> SourceCheck:
    """Pre-flight check of every config the workload (and its variants) will read.

    Reads local data only: with no ``workload.path`` the hub is not contacted (the doctor
    downloads nothing), so the rows are reported unchecked; the run itself still refuses
    placeholders before any server starts.
    """
    unchecked = source_of(spec).unchecked(spec)
    if unchecked is not None:
        return unchecked
    n_rows = n_ph = 0
    parts: list[str] = []
    ok = True
    seen: set[str] = set()
    for variant in [None, *spec.variants]:
        try:
            config = config_for(spec, variant)
            if config in seen:
                continue
            seen.add(config)
            label = describe(spec, config)
            rows, notes = read_source(spec, base_dir=base_dir, variant=variant)
            rows = filter_prompts(rows, spec.categories, spec.entropy_tiers)
        except ScenarioError as e:
            ok = False
            parts.append(str(e))
            continue
        bad = sum(1 for p in rows if is_placeholder(p))
        n_rows += len(rows)
        n_ph += bad
        if bad:
            ok = False
            parts.append(f"{label}: {len(rows)} rows, {bad} placeholders -- fix: prepare the full data (see {DOCS})")
        elif not rows:
            ok = False
            parts.append(f"{label}: no rows")
        else:
            parts.append(f"{label}: {len(rows)} rows, no placeholders")
        parts.extend(notes)
    return SourceCheck(ok=ok, n_rows=n_rows, n_placeholder=n_ph, message="; ".join(parts))
