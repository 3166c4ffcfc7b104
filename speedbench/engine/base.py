"""The engine interface: what speedbench needs from an inference engine, and the launch
spec every launcher (local process, docker, external endpoint) starts from.

vLLM is the one engine (engine/vllm/). A second one (SGLang, TensorRT-LLM) would be a
sibling package, ``engine/sglang/``, with its own command, provenance and doctor checks,
its wire parsers beside client/'s vLLM ones (client/scrape.py, client/spec_payload.py),
and one more entry in ``speedbench.engine.ENGINES``; callers get theirs from
:func:`speedbench.engine.engine_for` (scenario -> engine).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from speedbench.client.scrape import SpecCounters
from speedbench.records import SpecStats
from speedbench.scenario import ArmSpec, Scenario, ServerSpec


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value given to ``flag`` in ``argv`` (``--flag v`` or ``--flag=v``), or None."""
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None



@dataclass
class LaunchSpec:
    """Everything needed to start one arm's server, before a port is chosen."""

    arm: str
    argv: list[str]  # without --host/--port; the measurement flags come last
    env: dict[str, str] = field(default_factory=dict)  # only what the scenario sets
    host: str = "127.0.0.1"
    port: int | None = None
    gpus: list[int] | None = None
    base_url: str | None = None  # external endpoint: nothing to launch
    measurement: list[str] = field(default_factory=list)  # the measurement flags at argv's end
    measurement_env: dict[str, str] = field(default_factory=dict)  # speedbench's, apart from env
    # variables naming a folder the server keeps its sockets and temporary files in: a
    # local launcher points each at a fresh folder of the server's own, removed when it stops
    scratch_env: tuple[str, ...] = ()

    def argv_with_port(self, port: int) -> list[str]:
        return [*self.argv, "--host", self.host, "--port", str(port)]

    def env_with_gpus(self) -> dict[str, str]:
        env = {**self.measurement_env, **self.env}
        if self.gpus is not None and "CUDA_VISIBLE_DEVICES" not in env:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpus)
        return env

    def shell(self, port: int | None = None) -> str:
        argv = self.argv_with_port(port) if port is not None else self.argv
        return shlex.join(argv)


class Engine(Protocol):
    """One inference engine: how to start it, what it reports and how to read it."""

    name: str  # the engine's name, as a scenario would give it ("vllm")
    spec_metrics: tuple[str, ...]  # the Prometheus counters its spec-decode totals come from
    settle_prefixes: tuple[str, ...]  # the Prometheus lines two scrapes must agree on to be settled
    token_ids_field: str  # the request field asking for per-chunk token ids ("" if it has none)

    def launch_spec(self, sc: Scenario, arm: ArmSpec, gpus: list[int] | None = None) -> LaunchSpec:
        """The argv and environment that start this arm's server (measurement flags last)."""
        ...

    def measurement_args(self, server: ServerSpec, arm: ArmSpec) -> dict[str, Any]:
        """The flags speedbench adds so the server reports what a measurement needs."""
        ...

    async def scrape(self, base_url: str) -> str:
        """The server's Prometheus text."""
        ...

    def spec_counters(self, text: str) -> SpecCounters:
        """Spec-decode counter totals from one scrape."""
        ...

    def read_spec(self, payload: Any) -> SpecStats | None:
        """One request's spec-decode stats from the engine's per-request payload."""
        ...

    def provenance(self, sc: Scenario, arm: ArmSpec, launch: LaunchSpec, argv: list[str],
                   env: Mapping[str, str], base_url: str | None = None) -> dict[str, Any]:
        """The provenance block saved with the arm (engine version, argv, env redacted, draft, hardware)."""
        ...

    def hardware(self) -> dict[str, Any]:
        """The machine this process runs on, as provenance records it."""
        ...
