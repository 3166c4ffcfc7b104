"""The scenario key ``mlflow:``: checked before a run starts; a tracking failure at the
end is a warning naming the command that retries (no server here: see
tests/integration/test_mlflow.py for the real one)."""

from __future__ import annotations

import importlib.util

import pytest

from speedbench.errors import UsageError
from speedbench.results import mlflow_export
from speedbench.results.loader import load_run
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
    mlflow_export.track_finished_run(load_run(rd.path), _Sc(MlflowSpec(experiment="x")), said.append)
    assert len(said) == 1 and "ConnectionError: connection refused" in said[0]
    assert f"speedbench export {rd.path} --format mlflow --tracking-uri $MLFLOW_TRACKING_URI --experiment x" in said[0]
    assert "secret" not in said[0]  # the variable's value is named, never printed


def test_metrics_and_params_of_an_arm(tmp_path):
    from speedbench.results.loader import load_run

    run = load_run(make_run(tmp_path / "r").path)
    m = mlflow_export.arm_metrics(run, "eagle3")
    row = run.row("eagle3", 4)
    assert row is not None and m["speedup_mean/c4"] == row.speedup_mean and m["al_tokens/c4"] == row.al_tokens
    assert not any(k.startswith(("concurrency/", "num_speculative_tokens/")) for k in m)
    p = mlflow_export.arm_params(run, "eagle3")
    assert p["k"] == "3" and p["checkpoint"] == "org/eagle3-draft" and p["concurrency_levels"] == "1,4,16"
    assert mlflow_export.arm_tags(run, "baseline")["algorithm"] == "NONE"


# ---- setup problems are the user's (exit 2 / 3), never "a bug in speedbench" ----------------


@pytest.fixture
def quick_mlflow(monkeypatch, tmp_path):
    """No MLflow retries (the old code retried a closed port for minutes), and the
    current folder empty, to see that an export writes nothing there."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


@pytest.mark.parametrize(("uri", "says"), [
    ("file:///{tmp}/store", "MLflow no longer writes a file store such as file:///"),
    ("http://127.0.0.1:1", "cannot reach the MLflow tracking server at http://127.0.0.1:1"),
    ("sqlite:///{tmp}/no/such/folder/mlflow.db", "does not exist -- fix: create it"),
])
def test_a_bad_tracking_uri_is_exit_2_with_the_fix(tmp_path, capsys, quick_mlflow, uri, says):
    from speedbench.cli import main

    rd = make_run(tmp_path / "r")
    code = main(["export", str(rd.path), "--format", "mlflow", "--tracking-uri", uri.format(tmp=tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "-- fix:" in err and "bug" not in err, err
    assert list(quick_mlflow.iterdir()) == []


def test_a_database_where_a_file_is_is_exit_3(tmp_path, capsys, quick_mlflow):
    from speedbench.cli import main

    rd = make_run(tmp_path / "r")
    (tmp_path / "afile").write_text("")
    code = main(["export", str(rd.path), "--format", "mlflow", "--tracking-uri", f"sqlite:///{tmp_path}/afile/m.db"])
    assert code == 3 and f"cannot write {tmp_path}/afile/m.db" in capsys.readouterr().err


class _Refusing:
    """An MLflow client whose server refuses: ``error`` is raised by the first call."""

    def __init__(self, error):
        self.error, self.artifacts = error, "unset"

    def get_experiment_by_name(self, name):
        if self.error is not None:
            raise self.error
        return None

    def create_experiment(self, name, artifact_location=None):
        self.artifacts = artifact_location
        raise RuntimeError("stop here")


@pytest.mark.parametrize(("code", "message", "exit_code", "says"), [
    ("PERMISSION_DENIED", "Permission denied", 3, "refused to write (PERMISSION_DENIED"),
    ("UNAUTHENTICATED", "Unauthenticated", 3, "MLFLOW_TRACKING_TOKEN"),
    ("INTERNAL_ERROR", "API request to http://x/api/2.0/mlflow/runs/create failed with exception boom", 2,
     "lost the MLflow tracking server"),
])
def test_a_server_that_refuses_or_goes_away_is_the_users(tmp_path, capsys, monkeypatch, code, message, exit_code,
                                                        says):
    from mlflow.exceptions import MlflowException
    from mlflow.protos import databricks_pb2

    from speedbench.cli import main

    rd = make_run(tmp_path / "r")
    client = _Refusing(MlflowException(message, error_code=getattr(databricks_pb2, code)))
    monkeypatch.setattr(mlflow_export, "_mlflow", lambda uri: (client, None))
    uri = f"sqlite:///{tmp_path}/m.db"  # passes the checks made before the client: the client refuses
    assert main(["export", str(rd.path), "--format", "mlflow", "--tracking-uri", uri]) == exit_code
    err = capsys.readouterr().err
    assert says in err and "-- fix:" in err and "bug" not in err, err


def test_a_database_keeps_its_artifacts_beside_it(tmp_path, monkeypatch):
    """MLflow's default for a sqlite store is ./mlruns in the current folder."""
    client = _Refusing(None)
    monkeypatch.setattr(mlflow_export, "_mlflow", lambda uri: (client, None))
    with pytest.raises(UsageError, match="does not exist"):  # refused before any client
        mlflow_export.export_mlflow(load_run(make_run(tmp_path / "r").path), f"sqlite:///{tmp_path}/db/m.db")
    assert client.artifacts == "unset"
    (tmp_path / "db").mkdir()
    with pytest.raises(RuntimeError, match="stop here"):
        mlflow_export.export_mlflow(load_run(make_run(tmp_path / "r2").path), f"sqlite:///{tmp_path}/db/m.db")
    assert client.artifacts == (tmp_path / "db" / "mlartifacts").as_uri()


def test_the_run_end_says_why_it_did_not_log(tmp_path, quick_mlflow):
    rd = make_run(tmp_path / "r")
    said: list[str] = []
    mlflow_export.track_finished_run(load_run(rd.path), _Sc(MlflowSpec(tracking_uri="http://u:pw@127.0.0.1:1")),
                                     said.append)
    assert len(said) == 1 and "not logged: cannot reach the MLflow tracking server" in said[0], said
    assert "MlflowException" not in said[0] and ":pw@" not in said[0]
    assert f"retry: speedbench export {rd.path} --format mlflow" in said[0]
