"""vLLM, the one engine (the Engine interface: engine/base.py).

- command.py     the launch command and the measurement flags speedbench adds
- provenance.py  vLLM version, argv, env (redacted), draft config + EAGLE version, hardware
- checks.py      the doctor's vLLM checks (build, features, server args); doctor/ runs them

What vLLM sends back is read on the client side, where the hot path needs it without the
engine: client/spec_payload.py (per-request spec stats, the usage chunk, return_token_ids)
and client/scrape.py (its Prometheus counter names).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from speedbench.client import scrape as prometheus
from speedbench.client.scrape import SpecCounters
from speedbench.client.spec_payload import TOKEN_IDS_FIELD, parse_spec
from speedbench.engine.base import LaunchSpec
from speedbench.engine.vllm import command, provenance
from speedbench.records import SpecStats
from speedbench.scenario import ArmSpec, Scenario, ServerSpec


class VllmEngine:
    """vLLM behind the Engine interface."""

    name: str = "vllm"
    spec_metrics: tuple[str, ...] = prometheus.SPEC_METRICS
    settle_prefixes: tuple[str, ...] = prometheus.SETTLE_PREFIXES
    token_ids_field: str = TOKEN_IDS_FIELD

    def launch_spec(self, sc: Scenario, arm: ArmSpec, gpus: list[int] | None = None) -> LaunchSpec:
        return command.launch_spec(sc, arm, gpus)

    def measurement_args(self, server: ServerSpec, arm: ArmSpec) -> dict[str, Any]:
        return command.measurement_args(server, arm)

    async def scrape(self, base_url: str) -> str:
        return await prometheus.scrape(base_url)

    def spec_counters(self, text: str) -> SpecCounters:
        return prometheus.spec_counters(prometheus.parse_prometheus(text))

    def read_spec(self, payload: Any) -> SpecStats | None:
        return parse_spec(payload)

    def provenance(self, sc: Scenario, arm: ArmSpec, launch: LaunchSpec, argv: list[str],
                   env: Mapping[str, str], base_url: str | None = None) -> dict[str, Any]:
        return provenance.collect_provenance(sc, arm, launch, argv, dict(env), base_url)

    def hardware(self) -> dict[str, Any]:
        return provenance.hardware()
