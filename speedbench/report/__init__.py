"""Everything that turns run folders into something to read: the terminal table,
report.md / report.html, comparisons, CI gates and the static dashboard. It only reads
run folders; the live view during a run is :mod:`speedbench.run.live`.

Submodules import matplotlib and rich lazily where they can, so ``speedbench run``
pays for them only when the run ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def render_report(run: Any) -> tuple[str, str]:
    """A loaded :class:`speedbench.results.Run` -> (report.md text, report.html text)."""
    from speedbench.report.render import render_report as _render

    return _render(run)


def write_report(run_dir: Any) -> tuple[Path, Path]:
    """Render and write report.md and report.html into a run folder (path or RunDir)."""
    from speedbench.report.render import write_report as _write

    return _write(run_dir)
