"""report.md + report.html for one run, including the drift sections when available."""

from __future__ import annotations

from pathlib import Path

from speedbench.report.drift import drift_sections
from speedbench.report.html import esc, render_html
from speedbench.report.markdown import md, render_markdown
from speedbench.report.model import Report, build_report
from speedbench.results import Run, RunDir, atomic_write
from speedbench.results.loader import load_run


def _drift(run: Run) -> tuple[str, str]:
    """(markdown, html) drift sections; empty when the run has no sweep. A failure
    there must not cost us the report."""
    try:
        return drift_sections(run)  # the drift analysis runs once for both pages
    except Exception as e:  # noqa: BLE001 - reported in the page instead
        note = f"drift analysis failed: {type(e).__name__}: {e}"
        return f"## Drift\n\n{md(note)}\n", f'<h2>Drift</h2><section class="card warn"><p>{esc(note)}</p></section>'


def render_report(run: Run, report: Report | None = None) -> tuple[str, str]:
    """A loaded run -> (report.md text, report.html text), both from one report model
    (``report``: the run's, when the caller has built it already)."""
    report = build_report(run) if report is None else report
    drift_md, drift_html = _drift(run)
    return render_markdown(report, drift_md), render_html(report, drift_html)


def write_report(run_dir: RunDir | str | Path, *, run: Run | None = None,
                 report: Report | None = None) -> tuple[Path, Path]:
    """Render and write report.md and report.html into a run folder (path or RunDir).
    ``run`` / ``report``: that folder's loaded run and its report model, when the caller
    has them already (``speedbench report`` prints the same model first)."""
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir.open(run_dir)
    md_text, html_text = render_report(run or load_run(rd.path), report)
    atomic_write(rd.report_md_path, md_text)
    atomic_write(rd.report_html_path, html_text)
    return rd.report_md_path, rd.report_html_path
