"""Starting, watching and stopping vLLM servers (local process, docker, external endpoint)."""

from __future__ import annotations

import os
from pathlib import Path

from speedbench.engine.command import LaunchSpec
from speedbench.engine.docker import DockerServer
from speedbench.engine.external import ExternalServer
from speedbench.engine.local import LocalServer, ProgressFn
from speedbench.scenario import Scenario

Server = LocalServer | DockerServer | ExternalServer


def api_key_for(scenario: Scenario) -> str | None:
    """The API key named by ``server.api_key_env`` (the scenario holds only the name)."""
    name = scenario.server.api_key_env
    return os.environ.get(name) if name else None


def make_server(scenario: Scenario, launch_spec: LaunchSpec, log_path: Path,
                on_progress: ProgressFn | None = None) -> Server:
    """The server object for one arm; use it as a context manager, then ``wait_ready()``."""
    server = scenario.server
    key = api_key_for(scenario)
    if launch_spec.base_url or server.launcher == "external":
        if not launch_spec.base_url:
            raise ValueError(f"arm '{launch_spec.arm}': launcher 'external' needs a base_url")
        return ExternalServer(launch_spec.base_url, key, ready_timeout_s=server.ready_timeout_s,
                              on_progress=on_progress, log_path=Path(log_path))
    if server.launcher == "docker":
        return DockerServer(launch_spec, server.docker, Path(log_path), scenario=scenario.name,
                            ready_timeout_s=server.ready_timeout_s, grace_s=server.shutdown_grace_s,
                            on_progress=on_progress, api_key=key)
    return LocalServer(launch_spec, Path(log_path), ready_timeout_s=server.ready_timeout_s,
                       grace_s=server.shutdown_grace_s, on_progress=on_progress, api_key=key)


__all__ = ["DockerServer", "ExternalServer", "LaunchSpec", "LocalServer", "Server", "make_server"]
