"""Every terminal table, fitted to the console without splitting a word.

A log is often 80 columns wide (CI, ``> log``: rich draws 80 columns without a terminal).
Squeezed that far, rich narrows the widest column first, whatever its words, and then
breaks a word at the column border (``acceptance_leng│th``, ``--baseline-r│un``), so a
command or a number in a table can no longer be pasted. :func:`print_table` prints a
table as rich draws it when it fits; else with column widths that hold each column's
longest word (a ``no_wrap`` column: its longest line); and when even that does not fit,
as ``key: value`` lines, one record per row, with the header cells as keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderableType
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

from speedbench.report.wrap import print_wrapped

_WIDE = 10_000  # rich clamps a measurement to the width it is given: measure on a wide one


@dataclass(frozen=True)
class _Span:
    """A column's content widths (padding excluded): the least that splits no word, and
    the width that wraps nothing."""

    least: int
    most: int


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` with no word split across a column border (see the module)."""
    widths = fitted_widths(console, table)
    if widths is None:
        print_folded(console, table)
        return
    for column, width in zip(table.columns, widths):
        if width is not None:
            column.width = width
    _lift_title(console, table)
    console.print(table)


def fitted_widths(console: Console, table: Table) -> list[int | None] | None:
    """Content widths for the table's columns: all None when it fits as it is, None when
    no widths fit without splitting a word."""
    spans = [_span(console, table, c) for c in table.columns]
    pads = [_padding(table, i) for i in range(len(table.columns))]
    room = console.width - _borders(table) - sum(pads)
    if sum(s.most for s in spans) <= room:
        return [None] * len(spans)
    if sum(s.least for s in spans) > room:
        return None
    widths = [s.most for s in spans]
    while sum(widths) > room:
        # narrow the widest column that still has room to give, one cell at a time
        i = max((j for j in range(len(widths)) if widths[j] > spans[j].least), key=lambda j: widths[j])
        widths[i] -= 1
    return list(widths)


def print_folded(console: Console, table: Table) -> None:
    """The table as ``key: value`` lines: a row's first line unindented, the rest indented;
    a row whose first cell is empty continues the row above. Cells under an empty header
    share one line, joined by ": " (a stacked table's label and value)."""
    if table.title:
        console.print(_text(console, table.title))
    heads = [_text(console, c.header).plain.replace("\n", " ").strip() for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    for r in range(table.row_count):
        row = [_text(console, col[r]) if r < len(col) else Text("") for col in cells]
        for i, (text, no_wrap) in enumerate(_row_lines(heads, row, table.columns)):
            _print_line(console, Text("  " if i or not row[0].plain.strip() else "") + text, no_wrap)


def _print_line(console: Console, line: Text, no_wrap: bool) -> None:
    """A no_wrap column holds commands to paste: never wrapped. The rest wraps between
    words, continuation lines indented (report/wrap.py)."""
    if no_wrap:
        console.print(line, soft_wrap=True)
    else:
        print_wrapped(console, line)


def _lift_title(console: Console, table: Table) -> None:
    """A title is drawn as wide as its table; one with a word wider than that (a path)
    is printed on its own line instead, unwrapped."""
    if not table.title:
        return
    width = sum(_padding(table, i) + _span(console, table, c).most for i, c in enumerate(table.columns))
    title = _text(console, table.title)
    if Measurement.get(console, console.options.update_width(_WIDE), title).minimum > width + _borders(table):
        console.print(title, soft_wrap=True)
        table.title = None


def _row_lines(heads: list[str], row: list[Text], columns: list[Column]) -> list[tuple[Text, bool]]:
    """(line, never wrap) for each line of one row."""
    lines: list[tuple[Text, bool]] = []
    joined: list[Text] = []
    for head, cell, column in zip(heads, row, columns):
        if not head:
            if cell.plain.strip():
                joined.append(_stripped(cell))
            continue
        if joined:
            lines.append((Text(": ").join(joined), False))
            joined = []
        if cell.plain.strip():
            lines.append((Text(f"{head}: ") + _stripped(cell), column.no_wrap))
    if joined:
        lines.append((Text(": ").join(joined), False))
    return lines


def _stripped(cell: Text) -> Text:
    """A cell without the spaces that indent it in its column (the doctor's arm rows)."""
    cell = cell.copy()
    cell.rstrip()
    start = len(cell.plain) - len(cell.plain.lstrip())
    return cell[start:]


def _text(console: Console, renderable: RenderableType) -> Text:
    if isinstance(renderable, Text):
        return renderable
    return console.render_str(str(renderable), highlight=False)


def _span(console: Console, table: Table, column: Column) -> _Span:
    if column.width is not None:
        return _Span(column.width, column.width)
    options: ConsoleOptions = console.options.update_width(_WIDE)
    cells = ([column.header] if table.show_header else []) + list(column.cells)
    sizes = [Measurement.get(console, options, cell) for cell in cells] or [Measurement(1, 1)]
    most = max(m.maximum for m in sizes)
    return _Span(most if column.no_wrap else max(m.minimum for m in sizes), most)


def _padding(table: Table, index: int) -> int:
    """Cell padding of one column, as rich adds it (Table._get_padding_width)."""
    _, right, _, left = table.padding
    if table.collapse_padding:
        left, right = 0, abs(left - right)
    if not table.pad_edge:
        left = 0 if index == 0 else left
        right = 0 if index == len(table.columns) - 1 else right
    return left + right


def _borders(table: Table) -> int:
    """Border characters across a row, as rich draws them (Table._extra_width)."""
    if not table.box:
        return 0
    return (2 if table.show_edge else 0) + len(table.columns) - 1
