"""What else changed between two nights: the provenance of the arms a figure depends on
(the arm itself, and the baseline arm for a speedup), and the run's scenario.

Only facts that describe the system under test are compared: the engine's version, target model,
draft model and the hashes of its config and weights, speculative config, hardware (GPU names with driver,
or CPU), speedbench version and commit, the workload's data hash and the resolved
scenario. Ports, process ids and paths of logs change every night and are left out.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from speedbench.engine.provenance import Provenance
from speedbench.results import Run


def _arm_facts(prov: Provenance) -> list[tuple[str, Any]]:
    """(label, value) of one arm's provenance, in the order the lines are shown; the
    engine adds its own facts (vLLM: its CPU attention kernel) after the hardware's."""
    draft, hw = prov.draft, prov.machine
    spec = prov.speculative_config
    return [
        (prov.engine_label, prov.engine_version),
        ("target", prov.target),
        ("draft", draft.model if draft else None),
        ("draft config sha256", draft.config_sha256 if draft else None),
        ("draft weights sha256", draft.weights_sha256 if draft else None),
        ("EAGLE version", prov.eagle_version),
        ("speculative config", dict(spec) if spec is not None else None),
        ("hardware", hw.summary),
        ("GPUs (name, memory, driver)", hw.gpus),
        ("CUDA", hw.cuda),
        ("CPU flags", hw.cpu_flags),
        *prov.facts,
        ("workload data sha256", prov.data_sha256),
        ("speedbench", prov.speedbench_version),
        ("speedbench commit", prov.git_commit),
    ]


_HASHES = {"draft config sha256", "draft weights sha256", "workload data sha256", "speedbench commit",
           "scenario sha256"}


def _show(label: str, v: Any) -> str:
    if v is None or v == "":
        return "–"
    if isinstance(v, (dict, list)):
        v = json.dumps(v, sort_keys=True, separators=(",", ":"))
    s = str(v)
    if label in _HASHES and len(s) > 12:
        s = s[:12]  # enough to tell two hashes apart on one line
    return s if len(s) <= 120 else s[:119] + "…"


def scenario_hash(run: Run) -> str:
    """sha256 of the resolved scenario (what the run was asked to do), key order ignored."""
    sc = run.scenario
    if not sc:
        return ""
    return hashlib.sha256(json.dumps(sc, sort_keys=True, default=str).encode()).hexdigest()


def facts(run: Run, arm: str) -> dict[str, str]:
    prov = run.provenance.get(arm)
    return {label: _show(label, v) for label, v in _arm_facts(prov)} if prov else {}


def draft_identity(run: Run, arm: str) -> tuple[str, ...]:
    """The arm's draft as the run loaded it: model, config and weights hashes (empty when
    the run recorded no draft: a baseline arm, an old folder)."""
    prov = run.provenance.get(arm)
    d = prov.draft if prov else None
    ident = (d.model, d.config_sha256, d.weights_sha256) if d else ()
    return ident if any(ident) else ()


def diff(before: Run, after: Run, arms: tuple[str, ...]) -> list[str]:
    """One line per fact that differs, e.g. ``eagle3.1 vLLM: 0.32.0 → 0.33.0``; facts of
    the whole run (scenario, hardware when every arm agrees) are named once."""
    lines: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for arm in dict.fromkeys(a for a in arms if a):
        a, b = facts(before, arm), facts(after, arm)
        for label in dict.fromkeys([*a, *b]):
            old, new = a.get(label, "–"), b.get(label, "–")
            if old == new or (label, old, new) in seen:
                continue
            seen.add((label, old, new))
            lines.append(f"{arm} {label}: {old} → {new}")
    old_sc, new_sc = scenario_hash(before), scenario_hash(after)
    if old_sc and new_sc and old_sc != new_sc:
        lines.append(f"scenario sha256: {old_sc[:12]} → {new_sc[:12]}")
    return lines
