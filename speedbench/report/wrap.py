"""Every line of prose on the console, wrapped to its width between words.

A log is often 80 columns wide (CI, ``> log``: rich draws 80 columns without a terminal,
or ``COLUMNS``). Left to itself a long line is split by the terminal, or by rich, in the
middle of a word. :func:`print_wrapped` breaks a line only at spaces and indents its
continuation lines under it; a word wider than the line (a path) stands alone on its own
line, whole. A command to paste is never wrapped (:func:`print_paste`): it gets a line of
its own, which may run past the width. report/fit.py folds tables through the same two.
"""

from __future__ import annotations

import re

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

HANG = "    "  # continuation lines sit this much deeper than the line they continue
# a `quoted command` is one word: it is to be pasted, so it is never broken (it may then
# run past the width, as a command on its own line may)
_WORD = re.compile(r"\S*`[^`]*`\S*|\S+")


def wrap(line: Text, width: int, hang: str = HANG) -> list[Text]:
    """``line`` (newlines included) as lines of at most ``width`` cells, broken at spaces,
    styles kept; only a word wider than its line makes a longer one."""
    out: list[Text] = []
    for part in line.split("\n", allow_blank=True):
        out += _wrap_one(part, width, hang)
    return out


def _wrap_one(line: Text, width: int, hang: str) -> list[Text]:
    plain = line.plain.rstrip()
    indent = plain[: len(plain) - len(plain.lstrip(" "))]
    lead = indent + hang
    pieces: list[list[int]] = []  # [start, end] in ``plain`` of each output line
    for m in _WORD.finditer(plain):
        if pieces:
            start = pieces[-1][0]
            prefix = "" if len(pieces) == 1 else lead  # the first line's indent is in its slice
            if cell_len(prefix) + cell_len(plain[start:m.end()]) <= width:
                pieces[-1][1] = m.end()
                continue
        pieces.append([m.start() if pieces else 0, m.end()])
    if not pieces:
        return [Text()]
    return [line[s:e] if i == 0 else Text(lead) + line[s:e] for i, (s, e) in enumerate(pieces)]


def print_wrapped(console: Console, line: Text | str, hang: str = HANG) -> None:
    """Print ``line`` wrapped to the console's width (a str is read as rich markup)."""
    text = console.render_str(line, highlight=False) if isinstance(line, str) else line
    for part in wrap(text, console.width, hang):
        console.print(part, soft_wrap=True)  # soft_wrap: rich must not wrap (nor cut) it again


def print_paste(console: Console, command: str, indent: str = "    ") -> None:
    """A command (or path) to paste, alone on its line and never wrapped: a shell reads a
    line broken by a log as two commands."""
    console.print(Text(indent + command), soft_wrap=True)
