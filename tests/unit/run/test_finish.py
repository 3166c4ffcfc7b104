"""run/finish.py: the one end of a run, local or gathered. Its gates decide the exit code;
a local run shows them only when one fails (a gate on an arm --arms left out is dropped
with its arm: tests/unit/scenario/test_scenario.py)."""

from __future__ import annotations

import io

from rich.console import Console

from speedbench.results.run import open_run_dir
from speedbench.engine.vllm import VllmEngine
from speedbench.run.finish import ConsoleFinish, finish_run
from speedbench.scenario import validate_data
from tests.helpers.runfactory import make_run

NEVER = {"metric": "error_rate", "max": -1.0}  # an error rate is never below 0


def _finish(tmp_path, gates, *, every_gate, complete=True):
    rd = open_run_dir(make_run(tmp_path / "results", gates=gates).path)
    sc = validate_data(rd.load_scenario(), str(rd.scenario_path))
    text = io.StringIO()
    code = finish_run(rd, sc, VllmEngine(), ConsoleFinish(Console(file=text, width=200), every_gate=every_gate),
                      complete=complete)
    return code, text.getvalue(), sc


def test_a_failing_gate_is_the_exit_code_and_is_shown(tmp_path):
    code, out, _ = _finish(tmp_path, [NEVER], every_gate=False)
    assert code == 1 and "gate FAIL: error_rate max -1" in out and "results: " in out


def test_passing_gates_print_nothing_on_a_local_run_and_every_line_in_a_gather(tmp_path):
    ok = [{"metric": "error_rate", "max": 1.0}]
    code, out, _ = _finish(tmp_path / "local", ok, every_gate=False)
    assert code == 0 and "gate " not in out
    code, out, _ = _finish(tmp_path / "gather", ok, every_gate=True)
    assert code == 0 and "gate PASS: error_rate max 1" in out


def test_an_interrupted_run_is_summarised_but_not_gated(tmp_path):
    code, out, _ = _finish(tmp_path, [NEVER], every_gate=True, complete=False)
    assert code == 0 and "gate " not in out and "results: " in out
