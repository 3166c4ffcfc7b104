"""The one loader of a finished run folder with the engine that ran it: the engine its
saved scenario names (``server.engine``; older folders name none: vLLM), looked up here
and nowhere else, so every reader of the folder (summary, report, export, calibration,
drift) takes the engine from the :class:`Run` it is handed."""

from __future__ import annotations

from pathlib import Path

from speedbench.engine import Engine, engine_for_saved
from speedbench.metrics.table import Requests
from speedbench.results.run import Run, RunEngine, open_run_dir
from speedbench.results.rundir import RunDir


def engine_of(run_dir: RunDir) -> Engine:
    """The engine that ran the folder's scenario."""
    return engine_for_saved(run_dir.load_scenario())


def load_run(path: str | Path, engine: RunEngine | None = None, requests: Requests | None = None) -> Run:
    """A run folder (or its summary.json) -> :class:`Run` with its engine (``engine``: the
    run's own, when the caller holds it); UsageError when unreadable. ``requests``: its
    records, read already (their request table is then shared)."""
    rd = open_run_dir(path)
    return Run(rd, rd.load_summary(), engine if engine is not None else engine_of(rd), requests)
