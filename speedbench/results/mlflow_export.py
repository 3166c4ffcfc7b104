"""``speedbench export RUN --format mlflow --tracking-uri URI [--experiment NAME]``: one
MLflow run per arm, so a checkpoint's speedup sits beside its training run.

Logged per arm (docs/results.md, "MLflow"):

- params: scenario, run id, arm, checkpoint (the draft), the draft's config hash, the
  target, vLLM version, hardware, method, k, concurrency levels, baseline, data hash;
- metrics: every finite number of every summary row of the arm, named
  ``<key>/c<concurrency>[/<variant>]`` (a screening arm adds ``predicted_speedup...``);
- tags: ``eagle_version``, ``speedbench.kind`` (screening or measured), and the tags
  specdec_bench sets (``model``, ``algorithm``, ``engine``, ``dataset``, ``draft_model``),
  so one MLflow search finds runs of both tools;
- artifacts: summary.json, report.html (when rendered) and the arm's speculation profiles.

Re-exporting updates: the arm's MLflow run is found by the tag ``speedbench.run_arm``
(``<run id>/<arm>``) and reused. Params already logged are left alone (MLflow refuses to
change one), a metric whose latest value is unchanged is not logged again, and
artifacts are overwritten in place. mlflow is the optional extra ``speedbench[mlflow]``;
only this module imports it, and only when called.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import math
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from speedbench.errors import SpeedbenchError, UsageError
from speedbench.metrics.outputs import IDENTICAL, LOSSY, NOT_CHECKED, NUMERICS
from speedbench.results.profile import profile_dir_name, profile_rows, write_profile
from speedbench.metrics.registry import SummaryRow
from speedbench.results.mlflow_uri import artifact_location, check_uri, setup_error, shown
from speedbench.engine.provenance import Draft
from speedbench.results.run import Run

RUN_KEY_TAG = "speedbench.run_arm"
# Row keys that name the point or the arm rather than measure it.
NOT_METRICS = frozenset({"concurrency", "num_speculative_tokens", "request_rate", "burstiness"})
PARAM_MAX = 500  # MLflow's limit on a param value before 2.x raised it; the safe bound
BATCH = 100  # log_batch's per-call limit on params and tags (metrics: 1000)


def _mlflow(tracking_uri: str):
    """A client for ``tracking_uri`` and ``mlflow.entities`` (Metric, Param, RunTag for log_batch)."""
    try:
        from mlflow import MlflowClient, entities  # function-local: mlflow is optional (speedbench[mlflow])
    except ImportError as e:
        raise UsageError("--format mlflow needs the mlflow package: pip install 'speedbench[mlflow]'") from e
    return MlflowClient(tracking_uri=tracking_uri), entities


def _leaf(path: str) -> str:
    return str(path).rstrip("/").split("/")[-1] if path else ""


def arm_params(run: Run, arm: str) -> dict[str, str]:
    prov = run.provenance_of(arm)
    rows = [r for r in run.rows if r.arm == arm]
    draft = prov.draft or Draft()
    params = {
        "scenario": run.scenario_name, "run_id": run.run_id, "arm": arm,
        "checkpoint": prov.draft_model,
        "draft_config_sha256": draft.config_sha256,
        "draft_weights_sha256": draft.weights_sha256,
        "target_model": prov.target or run.stored_scenario.server.model or "",
        "target_config_sha256": prov.target_config_sha256,
        prov.version_key: prov.engine_version,  # keyed by the engine: <engine>_version
        "hardware": run.hardware or prov.hardware_summary,
        "method": (rows[0].method if rows else "") or "", "k": (rows[0].num_speculative_tokens if rows else 0) or 0,
        "concurrency_levels": ",".join(str(c) for c in sorted({int(r.concurrency) for r in rows})),
        "variants": ",".join(sorted({str(r.variant or "") for r in rows} - {""})),
        "baseline": run.baseline or "", "data_sha256": prov.data_sha256 or "",
    }
    return {k: str(v)[:PARAM_MAX] for k, v in params.items() if v not in ("", None)}


def _point_suffix(row: SummaryRow) -> str:
    return f"/c{row.concurrency}" + (f"/{row.variant}" if row.variant else "")


def arm_metrics(run: Run, arm: str) -> dict[str, float]:
    """Every finite number of the arm's summary rows, the point in the name."""
    out: dict[str, float] = {}
    for row in run.rows:
        if row.arm != arm:
            continue
        for key, v in row.to_dict().items():
            if key in NOT_METRICS or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                continue
            out[f"{key}{_point_suffix(row)}"] = float(v)
        frac = run.outputs_of(str(row.arm), int(row.concurrency), str(row.variant or "")).identical_fraction
        if isinstance(frac, (int, float)) and math.isfinite(frac):
            out[f"outputs_identical_fraction{_point_suffix(row)}"] = float(frac)
    for entry in run.screening:
        if entry.arm != arm:
            continue
        for p in entry.predicted:
            s = p.speedup
            if isinstance(s, (int, float)) and math.isfinite(s):
                out[f"predicted_speedup/c{p.concurrency}" + (f"/{entry.variant}" if entry.variant else "")] = float(s)
    return out


def arm_tags(run: Run, arm: str) -> dict[str, str]:
    prov = run.provenance_of(arm)
    rows = [r for r in run.rows if r.arm == arm]
    method = str(rows[0].method or "") if rows else ""
    screened = any(e.arm == arm for e in run.screening)
    workload = run.stored_scenario.workload
    tags = {RUN_KEY_TAG: f"{run.run_id}/{arm}", "speedbench.run_id": run.run_id, "speedbench.scenario":
            run.scenario_name, "speedbench.arm": arm, "speedbench.kind": "screening" if screened else "measured",
            "eagle_version": str(prov.eagle_version or (rows[0].eagle_version if rows else "") or ""),
            # specdec_bench's tags: same names, so a search across both tools lines up
            "model": _leaf(prov.target), "algorithm": method.upper() or "NONE", "engine": prov.engine.upper(),
            "dataset": workload.dataset if workload else "", "draft_model": _leaf(prov.spec_model)}
    return {k: v for k, v in {**tags, **outputs_tags(run, arm)}.items() if v}


# Worst first: the arm's tag is its worst point's verdict, so one search finds a lossy arm.
_VERDICT_ORDER = (LOSSY, NOT_CHECKED, NUMERICS, IDENTICAL)


def outputs_tags(run: Run, arm: str) -> dict[str, str]:
    """Each point's outputs verdict and reason as tags (``outputs_verdict/c<C>[/<variant>]``,
    ``outputs_reason/...``), and ``speedbench.outputs``: the arm's worst verdict. Tags, not
    params: a verdict can change when a run is summarised again, and MLflow keeps params."""
    out: dict[str, str] = {}
    seen: list[str] = []
    for row in run.rows:
        if row.arm != arm:
            continue
        e = run.outputs_of(arm, int(row.concurrency), str(row.variant or ""))
        out[f"outputs_verdict{_point_suffix(row)}"] = e.verdict_text
        out[f"outputs_reason{_point_suffix(row)}"] = e.reason_text[:PARAM_MAX]
        seen.append(e.verdict_text)
    if seen:
        out["speedbench.outputs"] = min(seen, key=lambda v: _VERDICT_ORDER.index(v) if v in _VERDICT_ORDER else 1)
    return out


def experiment_id(client, name: str, artifacts: str | None = None) -> str:
    """``artifacts``: where a new experiment keeps its artifacts (mlflow_uri.artifact_location)."""
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            client.restore_experiment(exp.experiment_id)
        return exp.experiment_id
    return client.create_experiment(name, artifact_location=artifacts)


def find_run(client, exp_id: str, key: str):
    """The MLflow run already holding this (run id, arm), or None."""
    quoted = key.replace("\\", "\\\\").replace("'", "\\'")
    found = client.search_runs([exp_id], filter_string=f"tags.`{RUN_KEY_TAG}` = '{quoted}'", max_results=2)
    return found[0] if found else None


def _batches(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _log_values(client, entities, run_id: str, existing, params: dict[str, str], metrics: dict[str, float],
                tags: dict[str, str]) -> None:
    # Now, not the run's start: MLflow shows the value with the latest timestamp, so a
    # changed value logged on a re-export must be the later one.
    ts = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)

    old_params = existing.data.params if existing is not None else {}
    old_metrics = existing.data.metrics if existing is not None else {}
    for k, v in params.items():
        if k in old_params and old_params[k] != v:
            print(f"mlflow: param {k!r} of {run_id} stays {old_params[k]!r} (MLflow keeps params; now {v!r})",
                  file=sys.stderr)
    new_params = [entities.Param(k, v) for k, v in params.items() if k not in old_params]
    new_metrics = [entities.Metric(k, v, ts, 0) for k, v in metrics.items() if old_metrics.get(k) != v]
    for chunk in _batches(new_params, BATCH):
        client.log_batch(run_id, params=chunk)
    for chunk in _batches(new_metrics, 1000):
        client.log_batch(run_id, metrics=chunk)
    for chunk in _batches([entities.RunTag(k, v) for k, v in tags.items()], BATCH):
        client.log_batch(run_id, tags=chunk)


def _log_artifacts(client, run_id: str, run: Run, arm: str) -> None:
    if run.dir is not None:
        for p in (run.dir.summary_path, run.dir.report_html_path):
            if p.exists():
                client.log_artifact(run_id, str(p))
    rows = [r for r in profile_rows(run) if r.arm == arm]
    if rows:
        with tempfile.TemporaryDirectory(prefix="speedbench-profile-") as tmp:
            for row in rows:
                p = write_profile(run, row, Path(tmp))
                client.log_artifact(run_id, str(p), f"speculation_profile/{profile_dir_name(row)}")


def export_mlflow(run: Run, tracking_uri: str, experiment: str | None = None) -> list[str]:
    """Log each arm of ``run``; returns one line per arm: its MLflow run id and what happened.
    A problem with the URI, the connection or permissions is exit 2 or 3 (mlflow_uri.py)."""
    check_uri(tracking_uri)
    try:
        return _export(run, tracking_uri, experiment)
    except Exception as e:
        err = setup_error(e, tracking_uri)
        if err is None:
            raise
        raise err from e


def _export(run: Run, tracking_uri: str, experiment: str | None) -> list[str]:
    client, entities = _mlflow(tracking_uri)
    exp_id = experiment_id(client, experiment or f"speedbench/{run.scenario_name}", artifact_location(tracking_uri))
    start, lines = int(run.started.timestamp() * 1000), []
    for arm in run.arms():
        if not isinstance(arm, str):
            continue  # a malformed row; nothing to name the MLflow run by
        tags = arm_tags(run, arm)
        existing = find_run(client, exp_id, tags[RUN_KEY_TAG])
        run_id = existing.info.run_id if existing is not None else \
            client.create_run(exp_id, start_time=start, tags=tags, run_name=f"{arm} @ {run.run_id}").info.run_id
        _log_values(client, entities, run_id, existing, arm_params(run, arm), arm_metrics(run, arm), tags)
        _log_artifacts(client, run_id, run, arm)
        client.set_terminated(run_id, "FINISHED")
        lines.append(f"{arm}: mlflow run {run_id} ({'updated' if existing is not None else 'created'}) "
                     f"in experiment {exp_id}")
    return lines


# ---- at the end of a run (scenario key `mlflow:`) ----------------------------------------


def scenario_tracking_uri(spec) -> str | None:
    return spec.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or None


def check_tracking(sc) -> None:
    """Before anything starts: a scenario that asks for MLflow needs mlflow and a URI.
    Found now (exit 2), not after hours of measuring."""
    if sc.mlflow is None:
        return
    if not scenario_tracking_uri(sc.mlflow):
        raise UsageError("scenario key mlflow: needs tracking_uri (or $MLFLOW_TRACKING_URI)")
    if importlib.util.find_spec("mlflow") is None:
        raise UsageError("scenario key mlflow: needs the mlflow package: pip install 'speedbench[mlflow]'")


def track_finished_run(run: Run, sc, say) -> None:
    """Log a finished run (read with its engine) when its scenario says so. A failure is a warning naming the
    command that retries it: the results are on disk either way, and the run's exit code
    is about the measurement, not the tracking server."""
    if sc.mlflow is None:
        return
    uri = scenario_tracking_uri(sc.mlflow)
    run_path = run.path
    # the variable's value may carry credentials: name it rather than print it
    named = shown(sc.mlflow.tracking_uri) if sc.mlflow.tracking_uri else "$MLFLOW_TRACKING_URI"
    retry = f"speedbench export {run_path} --format mlflow --tracking-uri {named}" + (
        f" --experiment {sc.mlflow.experiment}" if sc.mlflow.experiment else "")
    try:
        if not uri:
            raise UsageError("no tracking_uri and no $MLFLOW_TRACKING_URI")
        for line in export_mlflow(run, uri, sc.mlflow.experiment):
            say(f"mlflow: {line}")
    except SpeedbenchError as e:  # the URI, the server or permissions (mlflow_uri.py): its own words and fix
        say(f"mlflow: not logged: {e}; retry: {retry}")
    except Exception as e:  # any other failure of the server or the client: the run itself stands
        say(f"mlflow: not logged ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); retry: {retry}")
