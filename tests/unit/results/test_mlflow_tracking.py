"""The scenario key ``mlflow:``: checked before a run starts; a tracking failure at the
end is a warning naming the command that retries (no server here: see
tests/integration/test_mlflow.py for the real one)."""

from __future__ import annotations

import importlib.util

import pytest

from speedbench.errors import UsageError
from speedbench.results import mlflow_export
from speedbench.scenario.tracking import MlflowSpec
from tests.helpers.runfactory import make_run


class _Sc:
    def __init__(self, spec):
        self.mlflow = spec


def test_no_uri_anywhere_is_refused_before_the_run(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(UsageError, match="tracking_uri"):
        mlflow_export.check_tracking(_Sc(MlflowSpec()))
    mlflow_export.check_tracking(_Sc(None))  # no key: nothing to check


def test_a_missing_mlflow_package_is_refused_before_the_run(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UsageError, match="speedbench\\[mlflow\\]"):
        mlflow_export.check_tracking(_Sc(MlflowSpec(tracking_uri="http://127.0.0.1:1")))


def test_a_tracking_failure_is_a_warning_with_the_retry_command(tmp_path, monkeypatch):
    rd = make_run(tmp_path / "r")

    def boom(*a, **k):
        raise ConnectionError("connection refused")

    monkeypatch.setattr(mlflow_export, "export_mlflow", boom)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://user:secret@host:5000")
    said: list[str] = []
    mlflow_export.track_finished_run(rd.path, _Sc(MlflowSpec(experiment="x")), said.append)
    assert len(said) == 1 and "ConnectionError: connection refused" in said[0]
    assert f"speedbench export {rd.path} --format mlflow --tracking-uri $MLFLOW_TRACKING_URI --experiment x" in said[0]
    assert "secret" not in said[0]  # the variable's value is named, never printed


def test_metrics_and_params_of_an_arm(tmp_path):
    from speedbench.results import load_run

    run = load_run(make_run(tmp_path / "r").path)
    m = mlflow_export.arm_metrics(run, "eagle3")
    row = run.row("eagle3", 4)
    assert row is not None and m["speedup_mean/c4"] == row.speedup_mean and m["al_tokens/c4"] == row.al_tokens
    assert not any(k.startswith(("concurrency/", "num_speculative_tokens/")) for k in m)
    p = mlflow_export.arm_params(run, "eagle3")
    assert p["k"] == "3" and p["checkpoint"] == "org/eagle3-draft" and p["concurrency_levels"] == "1,4,16"
    assert mlflow_export.arm_tags(run, "baseline")["algorithm"] == "NONE"
