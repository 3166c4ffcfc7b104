"""The doctor's checks as one rich table (``speedbench doctor`` and ``speedbench run``)."""

from __future__ import annotations

from types import MappingProxyType

from rich.console import Console
from rich.table import Table
from rich.text import Text

from speedbench.doctor.base import Check
from speedbench.report.fit import print_table

_STYLE = MappingProxyType({"ok": "green", "warn": "yellow", "fail": "bold red"})


def print_checks(checks: list[Check], console: Console) -> None:
    """One table: scenario-wide checks first, then one section per arm."""
    table = Table(show_lines=False, expand=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail", overflow="fold")
    table.add_column("fix", no_wrap=True)  # a command to paste: never wrapped (report/fit.py folds the table)
    groups: dict[str | None, list[Check]] = {}
    for c in checks:
        groups.setdefault(c.arm, []).append(c)
    first = True
    for arm, items in groups.items():
        if not first:
            table.add_section()
        first = False
        if arm is not None:
            table.add_row(Text(f"arm {arm}", style="bold"), "", "", "")
        for c in items:
            # Text, not markup: details quote YAML lists such as [python, -m, ...].
            table.add_row(("  " if arm is not None else "") + c.name, Text(c.status, style=_STYLE[c.status]),
                          Text(c.detail), Text(c.fix))
    print_table(console, table)
