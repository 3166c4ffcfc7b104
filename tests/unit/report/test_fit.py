"""Readable in an 80-column log: no table splits a word at a column border.

Every terminal table goes through report/fit.py. These tests render ``doctor``, ``gate``,
``compare`` and a run's final tables (``report``) at COLUMNS=80 on the stored real CPU run
folders and on scenarios, collect every table the command printed, and check that each
whitespace-separated word of the tables' data appears whole in the output."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from speedbench.cli import main
from speedbench.report import fit

ROOT = Path(__file__).parent.parent.parent.parent
RUNS = ROOT / "tests" / "data" / "cpu_tiny_runs"
F16, B16 = str(RUNS / "float16"), str(RUNS / "bfloat16")

COMMANDS = {
    "doctor-cpu": ["doctor", str(ROOT / "scenarios" / "cpu_tiny.yaml")],
    "doctor-gpu": ["doctor", str(ROOT / "scenarios" / "llama31_8b_eagle3.yaml")],  # fails here: fixes shown
    "gate": ["gate", F16],
    "compare-arms": ["compare", "--arms", "eagle3", "eagle3.1", F16],
    "compare-runs": ["compare", F16, B16],
    "report": ["report", "--no-files", B16],
}


def _words(console: Console, table: Table) -> set[str]:
    """Every word of a table's title, headers and cells, as the console shows them."""
    cells = [table.title or ""] + [c.header for c in table.columns] + [x for c in table.columns for x in c.cells]
    texts = [x if isinstance(x, Text) else console.render_str(str(x)) for x in cells]
    return {w for t in texts for w in t.plain.split()}


def split_words(output: str, tables: list[tuple[Console, Table]]) -> list[str]:
    """The tables' words that the output does not show whole."""
    return sorted({w for console, t in tables for w in _words(console, t) if w not in output})


def _render(argv: list[str], monkeypatch, capsys) -> tuple[str, list[tuple[Console, Table]]]:
    """Run a command at 80 columns; (its output, every table it printed)."""
    seen: list[tuple[Console, Table]] = []
    fitted = fit.fitted_widths

    def spy(console: Console, table: Table):
        seen.append((console, table))
        return fitted(console, table)

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setattr(fit, "fitted_widths", spy)
    capsys.readouterr()
    main(argv)
    return capsys.readouterr().out, seen


@pytest.mark.parametrize("name", COMMANDS)
def test_no_word_is_split_at_80_columns(name, monkeypatch, capsys):
    out, tables = _render(COMMANDS[name], monkeypatch, capsys)
    assert tables, "the command printed no table"
    assert split_words(out, tables) == []


def test_the_check_finds_rich_own_splits(monkeypatch, capsys):
    """Drawn by rich alone at 80 columns, the gate table splits words (acceptance_leng│th):
    the check above would see it."""
    monkeypatch.setattr(fit, "fitted_widths", lambda console, table: [None] * len(table.columns))
    out, _ = _render(COMMANDS["gate"], monkeypatch, capsys)
    monkeypatch.undo()
    _, tables = _render(COMMANDS["gate"], monkeypatch, capsys)
    assert "acceptance_length" in split_words(out, tables)


def _table(*rows: tuple[str, str, str]) -> Table:
    t = Table(title="gates")
    t.add_column("metric")
    t.add_column("fix", no_wrap=True)
    t.add_column("details")
    for r in rows:
        t.add_row(*r)
    return t


def _print(width: int, table: Table) -> str:
    buf = io.StringIO()
    fit.print_table(Console(file=buf, width=width, color_system=None), table)
    return buf.getvalue()


def test_narrow_columns_hold_their_longest_word():
    row = ("acceptance_length", "--baseline-run", "a long explanation that may wrap between its words")
    out = _print(60, _table(row))
    assert "│" in out  # still a table
    assert all(w in out for w in " ".join(row).split())


def test_a_table_too_wide_for_its_words_folds_into_key_value_lines():
    row = ("acceptance_length", "speedbench run --resume results/cpu_tiny/20261202T090342Z-35386c", "see there")
    out = _print(40, _table(row, ("error_rate", "", "")))
    assert "│" not in out
    assert out.splitlines() == ["gates", "metric: acceptance_length",
                                "  fix: speedbench run --resume results/cpu_tiny/20261202T090342Z-35386c",
                                "  details: see there", "metric: error_rate"]


def test_a_table_that_fits_is_drawn_as_rich_draws_it():
    t1, t2 = _table(("a", "b", "c")), _table(("a", "b", "c"))
    buf = io.StringIO()
    Console(file=buf, width=80, color_system=None).print(t1)
    assert _print(80, t2) == buf.getvalue()
