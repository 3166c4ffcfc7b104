"""An endpoint that is already running: health-checked like a launched server, never stopped."""

from __future__ import annotations

import time
from pathlib import Path

from speedbench.engine.local import POLL_S, ProgressFn
from speedbench.engine.probe import probe_ready, startup_phase
from speedbench.errors import ServerError


class ExternalServer:
    """Same interface as LocalServer; speedbench neither starts nor stops the process."""

    def __init__(self, base_url: str, api_key: str | None = None, *, ready_timeout_s: float = 60.0,
                 on_progress: ProgressFn | None = None, log_path: Path | None = None):
        self._base_url = base_url.rstrip("/")
        # A base_url copied from an OpenAI client config ends in /v1; the probes add it.
        if self._base_url.endswith("/v1"):
            self._base_url = self._base_url[: -len("/v1")]
        self.api_key = api_key
        self.ready_timeout_s = ready_timeout_s
        self.on_progress = on_progress
        self._log_path = log_path
        self._model_name: str | None = None

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def model_name(self) -> str | None:
        return self._model_name

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    # No process of ours: no pid, no group, no command line.
    pid = pgid = None

    @property
    def argv(self) -> list[str]:
        return []

    def __enter__(self) -> "ExternalServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "ExternalServer":
        return self

    def wait_ready(self, model_name: str | None = None, request: tuple[str, dict] | None = None) -> str:
        t0 = time.monotonic()
        deadline = t0 + self.ready_timeout_s
        while True:
            now = time.monotonic()
            name, missing = probe_ready(self._base_url, model_name, self.api_key,
                                        timeout=max(1.0, min(60.0, deadline - now)), request=request)
            if name is not None:
                self._model_name = name
                return name
            if time.monotonic() >= deadline:
                raise ServerError(
                    f"external endpoint {self._base_url} is not ready after {self.ready_timeout_s:.0f} s: "
                    f"{missing} -- fix: check that the server runs, the base_url and the API key"
                )
            if self.on_progress:
                self.on_progress(time.monotonic() - t0, startup_phase(missing))
            time.sleep(POLL_S)

    def dead(self) -> str | None:
        # Nothing cheap to watch: a dead endpoint shows up as connection errors instead.
        return None

    def stop(self) -> None:
        """Never stops someone else's server."""
