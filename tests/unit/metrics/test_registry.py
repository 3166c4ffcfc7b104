"""The metric registry is the one declaration: summary rows, gates, report labels and
docs/metrics.md must agree with it."""

from __future__ import annotations

import re
from pathlib import Path

from speedbench.metrics.registry import (BY_KEY, GATE_METRICS, GATES, LATENCY, LATENCY_METRICS, ROW_KEYS,
                                         ROW_METRICS, SUMMARY_METRICS, label)
from speedbench.scenario import GateSpec

DOCS = Path(__file__).resolve().parents[3] / "docs"


def _doc_entries() -> dict[str, tuple[str, str]]:
    """key -> (unit, better) from the tables under "Per point" in docs/metrics.md.

    A names cell may list several keys; `_median` after `per_user_tps_mean` is short
    for `per_user_tps_median`, and `ttft_ms_*` names a latency family."""
    text = (DOCS / "metrics.md").read_text(encoding="utf-8")
    part = text[text.index("## Per point"):text.index("### Per category")]
    out: dict[str, tuple[str, str]] = {}
    for line in part.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        unit, better = ("" if c == "—" else c for c in cells[1:3])
        stem = ""
        for name in re.findall(r"`([^`]+)`", cells[0]):
            if name.startswith("_"):
                name = stem + name
            else:
                stem = name.rsplit("_", 1)[0]
            out[name] = (unit, better)
    return out


def test_docs_and_registry_agree():
    docs = _doc_entries()
    assert len(docs) > 40  # the parser found the tables
    declared = {m.key: (m.unit, m.better) for m in ROW_METRICS if m.section != "identity"}
    declared |= {f"{m.key}_*": (m.unit, m.better) for m in LATENCY}
    declared |= {m.key: (m.unit, m.better) for m in SUMMARY_METRICS}
    missing = sorted(set(declared) - set(docs))
    undeclared = sorted(set(docs) - set(declared))
    assert not missing, f"in the registry but not in docs/metrics.md: {missing}"
    assert not undeclared, f"in docs/metrics.md but not in speedbench/metrics/registry.py: {undeclared}"
    differ = {k: (declared[k], docs[k]) for k in declared if declared[k] != docs[k]}
    assert not differ, f"(unit, better) differ, registry vs docs: {differ}"


def test_rows_gates_and_labels_come_from_the_registry():
    assert len(set(ROW_KEYS)) == len(ROW_KEYS)
    assert tuple(m.key for m in LATENCY) == LATENCY_METRICS
    assert all(m.better in ("higher", "lower", "") for m in (*ROW_METRICS, *LATENCY))
    for g in GATES:
        assert g.column in BY_KEY and (not g.fallback or g.fallback in BY_KEY)
        assert g.better in ("higher", "lower"), f"gate metric {g.name} needs a direction"
        GateSpec(metric=g.name, min=0)  # the scenario accepts every registered gate metric
        assert f"`{g.name}`" in (DOCS / "gates.md").read_text(encoding="utf-8") or g.name in (
            DOCS / "gates.md").read_text(encoding="utf-8")
    assert not GATE_METRICS["error_rate"].higher_is_better and GATE_METRICS["speedup"].higher_is_better
    assert label("per_user_tps_mean") == "per-user TPS" and label("ttft_ms_p99_9") == "TTFT p99.9"
