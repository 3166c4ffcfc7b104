"""Run discovery: every run under a results folder, found in one place (the dashboard,
``speedbench changes`` and ``gate --history`` read it), each run once.

A summary.json is not enough to be a run: ``export --format json`` writes one under
``RUN/export/json/``, and copies of a run folder share its ``run_id``. Counted as runs,
the first made one run look like two, and the second made identical nights look like a
change with no spread at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from speedbench.errors import SpeedbenchError, UsageError
from speedbench.results.run import Run


@dataclass
class Found:
    runs: list[Run] = field(default_factory=list)  # path order; one per run_id
    problems: list[str] = field(default_factory=list)  # folders skipped, and why


def _inside_a_run(folder: Path, root: Path) -> bool:
    """A folder below another folder holding summary.json (an export, a report's assets)."""
    return any((p / "summary.json").is_file() for p in folder.parents if p == root or root in p.parents)


def discover_runs(results_dir: str | Path, load: Callable[[Path], Run], skip: Path | None = None) -> Found:
    """Every run folder under ``results_dir`` (itself included), skipping folders inside a
    run (``export/``) and ``skip`` (the dashboard's own site); a second folder with a
    run_id already seen is a copy and is skipped, with a note. ``load``: results/loader.py's
    load_run (each run with its engine)."""
    root = Path(results_dir)
    if not root.is_dir():
        raise UsageError(f"{root}: {'is a file' if root.exists() else 'not found'} -- expected a folder of run "
                         "folders, such as results/")
    found, seen = Found(), dict[str, Path]()
    for summary in sorted(root.rglob("summary.json")):
        folder = summary.parent
        if (skip is not None and (folder == skip or skip in folder.parents)) or _inside_a_run(folder, root):
            continue
        try:
            run = load(folder)
        except SpeedbenchError as e:
            found.problems.append(f"skipped {folder}: {e}")
            continue
        if run.run_id in seen:
            found.problems.append(f"skipped {folder}: a copy of run {run.run_id} ({seen[run.run_id]})")
            continue
        seen[run.run_id] = folder
        found.runs.append(run)
    return found


def require_runs(found: Found, results_dir: str | Path) -> Found:
    """No run at all is bad input (exit 2): an alert pointed at the wrong folder must not
    pass every night."""
    if not found.runs:
        why = f" ({len(found.problems)} folders skipped: {found.problems[0]})" if found.problems else ""
        raise UsageError(f"{results_dir}: no run folders (summary.json) found{why} -- expected a folder of runs, "
                         "such as results/ or results/<scenario>/")
    return found
