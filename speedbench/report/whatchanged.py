"""What else changed between two nights: the provenance of the arms a figure depends on
(the arm itself, and the baseline arm for a speedup), and the run's scenario.

Only facts that describe the system under test are compared: vLLM version, target model,
draft model and the hashes of its config and weights, speculative config, hardware (GPU names with driver,
or CPU), speedbench version and commit, the workload's data hash and the resolved
scenario. Ports, process ids and paths of logs change every night and are left out.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from speedbench.results import Run

# (label, path into one arm's provenance.json entry)
ARM_FACTS: list[tuple[str, tuple[str, ...]]] = [
    ("vLLM", ("vllm_version",)),
    ("target", ("model",)),
    ("draft", ("draft", "model")),
    ("draft config sha256", ("draft", "config_sha256")),
    ("draft weights sha256", ("draft", "weights_sha256")),
    ("EAGLE version", ("eagle_version",)),
    ("speculative config", ("speculative_config",)),
    ("hardware", ("hardware", "summary")),
    ("GPUs (name, memory, driver)", ("hardware", "gpus")),
    ("CUDA", ("hardware", "cuda")),
    ("CPU flags", ("hardware", "cpu_flags")),
    ("CPU attention kernel", ("cpu_attention",)),
    ("workload data sha256", ("data", "sha256")),
    ("speedbench", ("speedbench_version",)),
    ("speedbench commit", ("git_commit",)),
]
_HASHES = {"draft config sha256", "draft weights sha256", "workload data sha256", "speedbench commit",
           "scenario sha256"}


def _get(d: Any, path: tuple[str, ...]) -> Any:
    for k in path:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


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
    prov = run.provenance.get(arm) or {}
    out = {label: _show(label, _get(prov, path)) for label, path in ARM_FACTS} if prov else {}
    return out


def draft_identity(run: Run, arm: str) -> tuple[str, ...]:
    """The arm's draft as the run loaded it: model, config and weights hashes (empty when
    the run recorded no draft: a baseline arm, an old folder)."""
    f = facts(run, arm)
    ident = tuple(f.get(k, "–") for k in ("draft", "draft config sha256", "draft weights sha256"))
    return () if all(v == "–" for v in ident) else ident


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
