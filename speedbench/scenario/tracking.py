"""Where a finished run is also logged (``mlflow:``): an MLflow tracking server, one MLflow
run per arm, as ``speedbench export RUN --format mlflow`` logs it (docs/results.md)."""

from __future__ import annotations

from speedbench.scenario.base import Strict


class MlflowSpec(Strict):
    # The tracking server; None: $MLFLOW_TRACKING_URI when the run ends. Credentials go in
    # MLflow's own variables (MLFLOW_TRACKING_TOKEN, ...), not here: the scenario is
    # written to the run folder as it is.
    tracking_uri: str | None = None
    experiment: str | None = None  # None: speedbench/<scenario>
