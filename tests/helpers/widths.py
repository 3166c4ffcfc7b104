"""What a log at a given width may hold: no line wider than the width, except a command
or path to paste alone on its line (report/wrap.py), which a wrap would break."""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import cell_len


def too_wide(text: str, width: int, paste: Iterable[str] = ()) -> list[str]:
    """The lines of ``text`` wider than ``width`` that are not one of ``paste`` (matched
    whole, its indent aside)."""
    whole = set(paste)
    return [line for line in text.splitlines() if cell_len(line) > width and line.strip() not in whole]
