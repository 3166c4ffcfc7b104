"""A run's finish builds its request table once (issue 57): the summary's rows, noise
floor, categories and stopping entries, and then the report's prompt tables, all read
the one table of the one reading of the records."""

from __future__ import annotations

from pathlib import Path

import speedbench.metrics.table as table_module
from speedbench.results.loader import engine_of
from speedbench.report.model import Report
from speedbench.run.finish import finish_run
from speedbench.scenario import validate_data
from tests.helpers.runfactory import make_run


class _Quiet:
    def summary(self, report: Report) -> None: ...
    def results(self, path: Path) -> None: ...
    def gates(self, results: list) -> None: ...
    def tracking(self, line: str) -> None: ...


def test_a_finish_builds_the_request_table_once(tmp_path, monkeypatch):
    rd = make_run(tmp_path, error_arms={"eagle3": 2})
    sc = validate_data(rd.load_scenario(), str(rd.scenario_path))
    built = []
    real = table_module.request_table
    monkeypatch.setattr(table_module, "request_table", lambda records: built.append(1) or real(records))
    assert finish_run(rd, sc, engine_of(rd), _Quiet(), complete=False) == 0
    assert (rd.path / "report.md").is_file() and (rd.path / "summary.json").is_file()
    assert len(built) == 1  # it was 3: the rows, the categories and the report's prompt tables each built one
