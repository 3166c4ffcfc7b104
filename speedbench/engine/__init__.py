"""Starting, watching and stopping inference servers (local process, docker, external
endpoint), and the engine a scenario runs (the Engine interface: engine/base.py)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from speedbench.engine.base import Engine, LaunchSpec
from speedbench.engine.docker import DockerServer
from speedbench.engine.external import ExternalServer
from speedbench.engine.local import LocalServer, ProgressFn
from speedbench.engine.vllm import VllmEngine
from speedbench.errors import ScenarioError
from speedbench.scenario import Scenario

# Engines by name (``server.engine``); SGLang would be "sglang": SglangEngine() (engine/sglang/).
ENGINES: dict[str, Engine] = {"vllm": VllmEngine()}
DEFAULT_ENGINE = "vllm"


def engine_named(name: str | None) -> Engine:
    """The engine ``server.engine`` names: a key of :data:`ENGINES` (None: vLLM), or
    ``package.module:Class``, an Engine class outside speedbench (a stand-in in tests, a
    plugin), built with no arguments."""
    name = name or DEFAULT_ENGINE
    if name in ENGINES:
        return ENGINES[name]
    module, _, cls = name.partition(":")
    try:
        engine: Engine = getattr(importlib.import_module(module), cls)()
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        raise ScenarioError(f"server.engine: cannot load {name!r} ({type(e).__name__}: {e}); "
                            f"use one of {sorted(ENGINES)} or 'package.module:Class'") from None
    return engine


def engine_for(scenario: Scenario) -> Engine:
    """The engine that serves ``scenario`` (its ``server.engine``)."""
    return engine_named(scenario.server.engine)


def engine_for_saved(scenario: Mapping[str, Any] | None) -> Engine:
    """The engine of a run folder's saved scenario (plain data; older folders name none: vLLM)."""
    server = (scenario or {}).get("server") or {}
    return engine_named(server.get("engine") if isinstance(server, dict) else None)


class Server(Protocol):
    """What a run needs from a server, whoever started it. Use it as a context manager
    (leaving stops what we started), then ``wait_ready()``."""

    api_key: str | None

    @property
    def base_url(self) -> str: ...
    @property
    def model_name(self) -> str | None: ...  # the served name, known once ready
    @property
    def argv(self) -> list[str]: ...  # [] for an endpoint we did not start
    @property
    def pid(self) -> int | None: ...
    @property
    def pgid(self) -> int | None: ...

    def __enter__(self) -> Server: ...
    def __exit__(self, *exc: object) -> None: ...
    def wait_ready(self, model_name: str | None = None, request: tuple[str, dict] | None = None) -> str: ...
    def dead(self) -> str | None: ...  # why the server is gone, or None while it lives
    def stop(self) -> None: ...


def api_key_for(scenario: Scenario, launch_spec: LaunchSpec | None = None) -> str | None:
    """The key the client sends: the one named by ``server.api_key_env`` (the scenario
    holds only the name), else the key speedbench gives the server it launches (what its
    engine read from the launch: vLLM's ``--api-key`` or its key variable), so a scenario
    that protects its server still measures it. Never written anywhere (secrets.py)."""
    name = scenario.server.api_key_env
    if name:
        return os.environ.get(name)
    if launch_spec is None or launch_spec.base_url or scenario.server.launcher == "external":
        return None
    return launch_spec.server_key


def expected_model(scenario: Scenario, launch_spec: LaunchSpec) -> str | None:
    """The model name a server we launch must serve (what its engine read from the launch:
    vLLM's ``--served-model-name``, else the model as passed); None for an endpoint we did
    not start, which serves what it serves."""
    if launch_spec.base_url or scenario.server.launcher == "external":
        return None
    return launch_spec.served_model


def make_server(scenario: Scenario, launch_spec: LaunchSpec, log_path: Path,
                on_progress: ProgressFn | None = None) -> Server:
    """The server object for one arm; use it as a context manager, then ``wait_ready()``."""
    server = scenario.server
    key = api_key_for(scenario, launch_spec)
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


__all__ = ["ENGINES", "DockerServer", "Engine", "ExternalServer", "LaunchSpec", "LocalServer", "Server", "engine_for",
           "engine_for_saved", "engine_named", "make_server"]
