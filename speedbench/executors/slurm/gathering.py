"""The gather: what ends a run whose arms ran as Slurm jobs (``speedbench gather RUN``,
the job submitted with ``--dependency=afterany`` on every arm job; its state is states.py's).

It merges every job's records and points and ends the run through run/finish.py, the one
ending a local run has too (summary, reports, gates, MLflow), so the same scenario exits
with the same code in either place; points left unfinished by a job make it exit 1.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from speedbench.results import RunDir
from speedbench.run.finish import ConsoleFinish, finish_run
from speedbench.run.plan import build_plan
from speedbench.scenario import validate_data


class _GatherConsole(ConsoleFinish):
    """Every gate's line; the folder is named last ("gathered: RUN"), not after the summary."""

    def results(self, path: Path) -> None:
        return None


def gather_run(run_dir: RunDir, console: Console, *, junit: Path | None = None) -> int:
    """End the run: 0 when every point is finished and every gate passes; 1 otherwise."""
    sc = validate_data(run_dir.load_scenario(), str(run_dir.scenario_path))
    plan = build_plan(sc)
    code = finish_run(run_dir, sc, plan.engine, _GatherConsole(console), junit=junit)
    unfinished = plan.unfinished(run_dir.finished_rounds())
    if unfinished:
        code = max(code, 1)
        console.print(f"[red]{len(unfinished)} points unfinished or failed[/red]: "
                      + escape(", ".join(k.label for k in unfinished[:8])) + (" ..." if len(unfinished) > 8 else ""))
        console.print(f"  `speedbench status {run_dir.path}` shows the jobs; `speedbench run --resume {run_dir.path}` "
                      "submits the unfinished arms again", soft_wrap=True)  # commands to paste: never wrapped
    console.print(f"gathered: {run_dir.path}", markup=False, soft_wrap=True)
    return code
