"""The metric registry is the one declaration: summary rows, gates and report labels come
from it, and docs/metrics.md's tables are rendered from it (metrics/doc_tables.py)."""

from __future__ import annotations

import pytest

from speedbench.metrics.doc_tables import COMMAND, DOC, END, main, render, sections, table
from speedbench.metrics.gates import GATE_METRICS, GATES
from speedbench.metrics.registry import BY_KEY, LATENCY, LATENCY_METRICS, ROW_KEYS, ROW_METRICS, SUMMARY_METRICS, label
from speedbench.scenario import GateSpec

DOCS = DOC.parent


def test_docs_metrics_md_is_generated_from_the_registry():
    text = DOC.read_text(encoding="utf-8")
    assert render(text) == text, (f"docs/metrics.md's tables are not what metrics/registry.py declares: "
                                  f"run `{COMMAND}` (`python -m speedbench.metrics.doc_tables` prints the diff)")


def test_every_documented_key_is_in_a_table():
    documented = "\n".join(table(s) for s in sections())
    for m in ROW_METRICS:
        assert (m.section == "identity") != (f"`{m.key}`" in documented), m.key
    assert all(f"`{m.key}_*`" in documented for m in LATENCY)
    assert all(f"`{m.key}`" in documented for m in SUMMARY_METRICS)


def test_the_check_prints_a_diff_and_write_fixes_it(tmp_path, capsys):
    stale = tmp_path / "metrics.md"
    row = "| `n_ok` | count | — | measured"
    stale.write_text(DOC.read_text(encoding="utf-8").replace(row, row.replace("count", "ratio")), encoding="utf-8")
    assert main(["--check", str(stale)]) == 1
    out = capsys.readouterr()
    assert "+| `n_ok` | count |" in out.out and COMMAND in out.err
    assert main(["--write", str(stale)]) == 0 and main([str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == DOC.read_text(encoding="utf-8")


def test_a_section_without_its_table_is_an_error():
    text = DOC.read_text(encoding="utf-8")
    start = text.index('<!-- generated table "rate"')
    with pytest.raises(ValueError, match="rate"):
        render(text[:start] + text[text.index(END, start) + len(END):])


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
