"""speedbench export --format mlflow against a real ``mlflow server`` (SQLite backend, a
local artifact folder, a free port), read back with MLflow's own client.

One server serves the whole module: it takes tens of seconds to start on a small box.
It runs in its own process group and is stopped by its PID (that group) at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from speedbench.cli import main
from speedbench.engine.probe import free_port
from speedbench.results.loader import load_run
from speedbench.results.mlflow_export import RUN_KEY_TAG, arm_metrics, arm_params
from tests.helpers.cli_runs import fake_local, scenario, write_prompts, write_yaml
from tests.integration.test_reliability import out_of, sb, the_run

mlflow = pytest.importorskip("mlflow")

CPU_RUN = Path(__file__).parent.parent / "data" / "cpu_tiny_runs" / "float16"
OFFLINE = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
# The server's job runner (huey consumers for GenAI evaluation jobs) is not needed to log
# runs; off, the server starts in about half the time and stops at once on SIGTERM.
SERVER_ENV = {**OFFLINE, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def _mlflow_cli() -> str:
    beside = Path(sys.executable).parent / "mlflow"
    return str(beside) if beside.exists() else (shutil.which("mlflow") or "mlflow")


def _wait_healthy(proc: subprocess.Popen, url: str, log: Path, timeout: float = 240) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            pytest.fail(f"mlflow server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"mlflow server not healthy after {timeout}s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    log = tmp / "server.log"
    argv = [_mlflow_cli(), "server", "--backend-store-uri", f"sqlite:///{tmp / 'mlflow.db'}",
            "--artifacts-destination", str(tmp / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
            "--workers", "1"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=tmp, start_new_session=True,
                                env={**os.environ, **SERVER_ENV})
    url = f"http://127.0.0.1:{port}"
    with pytest.MonkeyPatch.context() as mp:
        for k, v in OFFLINE.items():
            mp.setenv(k, v)
        try:
            print(f"mlflow server healthy after {_wait_healthy(proc, url, log):.1f}s")
            yield url
        finally:
            os.killpg(proc.pid, signal.SIGTERM)  # its own group: the server and any workers it forked
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.fixture(scope="module")
def fake_run(tracking_uri, tmp_path_factory) -> tuple[Path, str]:
    """A run of the fake server launched by speedbench, as vLLM would be, whose scenario
    asks for MLflow: it logs itself when it ends."""
    tmp = tmp_path_factory.mktemp("fake")
    prompts = write_prompts(tmp / "p.jsonl", [f"prompt {i}" for i in range(4)])
    spec = {"method": "eagle3", "model": "org/draft", "num_speculative_tokens": 3}
    sc = scenario("mlflow_fake", prompts, server=fake_local(**{"t-step": "0.002", "output-tokens": "12"}),
                  arms=[{"name": "base"}, {"name": "eagle3", "speculative_config": spec}], concurrency=[1, 2],
                  mlflow={"tracking_uri": tracking_uri, "experiment": "fake"})
    res = sb(["run", str(write_yaml(tmp / "s.yaml", sc)), "-o", str(tmp / "out"), "--skip-doctor"],
             tag="mlflow", cwd=tmp, timeout=300, env=OFFLINE)
    assert res.returncode == 0, out_of(res)
    return the_run(tmp / "out"), out_of(res)


def _client(uri: str):
    return mlflow.MlflowClient(tracking_uri=uri)


def _runs(uri: str, experiment: str) -> dict[str, object]:
    c = _client(uri)
    exp = c.get_experiment_by_name(experiment)
    assert exp is not None
    found = c.search_runs([exp.experiment_id])
    return {r.data.tags["speedbench.arm"]: r for r in found}


def _artifacts(uri: str, run_id: str, path: str | None = None) -> set[str]:
    out: set[str] = set()
    for a in _client(uri).list_artifacts(run_id, path):
        out |= _artifacts(uri, run_id, a.path) if a.is_dir else {a.path}
    return out


def _check_logged(uri: str, run_path: Path, experiment: str) -> None:
    run = load_run(run_path)
    by_arm = _runs(uri, experiment)
    assert sorted(by_arm) == sorted(run.arms())
    for arm, logged in by_arm.items():
        assert logged.data.tags[RUN_KEY_TAG] == f"{run.run_id}/{arm}"
        assert logged.data.params == arm_params(run, arm)
        want = arm_metrics(run, arm)
        assert want and logged.data.metrics == pytest.approx(want, rel=1e-12)
        files = _artifacts(uri, logged.info.run_id)
        assert "summary.json" in files
        assert ("report.html" in files) == (run_path / "report.html").exists()
        spec_points = [r for r in run.rows if r.arm == arm and r.speculative]
        for r in spec_points:
            assert f"speculation_profile/{arm}__c{r.concurrency}/speculation_profile.json" in files
        assert logged.info.status == "FINISHED"


def test_cpu_run_reads_back_whole_and_a_second_export_updates(tracking_uri, tmp_path):
    run_dir = tmp_path / "cpu_tiny" / CPU_RUN.name
    shutil.copytree(CPU_RUN, run_dir)
    args = ["export", str(run_dir), "--format", "mlflow", "--tracking-uri", tracking_uri, "--experiment", "cpu"]
    assert main(args) == 0
    _check_logged(tracking_uri, run_dir, "cpu")
    first = {arm: r.info.run_id for arm, r in _runs(tracking_uri, "cpu").items()}
    params = arm_params(load_run(run_dir), "eagle3")
    assert params["k"] == "3" and params["checkpoint"].endswith("eagle3") and params["concurrency_levels"] == "1,4,16"
    assert main(args) == 0  # again: the same MLflow runs, nothing duplicated
    again = _runs(tracking_uri, "cpu")
    assert {arm: r.info.run_id for arm, r in again.items()} == first
    hist = _client(tracking_uri).get_metric_history(first["eagle3"], "al_tokens/c1")
    assert len(hist) == 1  # an unchanged value is not logged twice
    prof = json.loads(Path(_client(tracking_uri).download_artifacts(
        first["eagle3"], "speculation_profile/eagle3__c1/speculation_profile.json", str(tmp_path))).read_text())
    row = load_run(run_dir).row("eagle3", 1)
    assert row is not None and prof["conditional_accept_rates"] == row.per_position_conditional
    # a recomputed summary with a changed figure: the update is the value MLflow shows
    summary = json.loads((run_dir / "summary.json").read_text())
    changed = next(r for r in summary["rows"] if r["arm"] == "eagle3" and r["concurrency"] == 1)
    changed["al_tokens"] = 1.5
    (run_dir / "summary.json").write_text(json.dumps(summary))
    assert main(args) == 0
    assert _client(tracking_uri).get_run(first["eagle3"]).data.metrics["al_tokens/c1"] == 1.5
    assert len(_client(tracking_uri).get_metric_history(first["eagle3"], "al_tokens/c1")) == 2


def test_a_scenario_with_mlflow_logs_its_run_at_the_end(tracking_uri, fake_run):
    path, out = fake_run
    assert "mlflow: eagle3: mlflow run" in out and "(created)" in out
    assert (path / "report.html").exists()  # rendered before the logging: an artifact
    _check_logged(tracking_uri, path, "fake")
    first = {arm: r.info.run_id for arm, r in _runs(tracking_uri, "fake").items()}
    assert main(["export", str(path), "--format", "mlflow", "--tracking-uri", tracking_uri,
                 "--experiment", "fake"]) == 0
    assert {arm: r.info.run_id for arm, r in _runs(tracking_uri, "fake").items()} == first
    tags = _runs(tracking_uri, "fake")["eagle3"].data.tags
    assert tags["speedbench.kind"] == "measured" and tags["algorithm"] == "EAGLE3" and tags["draft_model"] == "draft"


def test_no_tracking_uri_is_a_usage_error(fake_run, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert main(["export", str(fake_run[0]), "--format", "mlflow"]) == 2
