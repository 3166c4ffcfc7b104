"""vLLM, the one engine (the Engine interface: engine/base.py).

- command.py     the launch command and the measurement flags speedbench adds
- payload.py     the per-request fields and stream: return_token_ids, ignore_eos, engine timing, spec stats
- prometheus.py  its Prometheus counter names, one scrape -> spec-decode totals
- provenance.py  vLLM version, argv, env (redacted), draft config + EAGLE version, hardware
- record.py      provenance.json's vLLM entry read as the typed record (speedbench/engine/provenance.py)
- checks.py      the doctor's vLLM checks (build, features, server args)
- drafts.py      the doctor's draft checks (EAGLE version from config.json, what it needs)
- host_checks.py the doctor's hardware rules: the CPU attention kernel (AMX fault), NVFP4 on the GPUs
- support.py     what each vLLM release supports; which vLLM is installed, its backend / parser names
- host_cpu.py    the host CPU's kernel flags; vLLM's CPU attention kernel for a dtype
- diagnose.py    why a vLLM server died, read from its log (the launch's ``diagnose``)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from speedbench.client.scrape import SpecCounters
from speedbench.client.scrape import scrape as scrape_metrics
from speedbench.engine.base import CheckFn, LaunchSpec
from speedbench.engine.preflight import Facts, Installed
from speedbench.engine.vllm import (checks, command, drafts, host_checks, logprobs, payload, prometheus, provenance,
                                   record)
from speedbench.engine.provenance import Provenance
from speedbench.records import RequestRecord
from speedbench.scenario import ArmSpec, Scenario


class VllmEngine:
    """vLLM behind the Engine interface."""

    name: str = record.NAME

    token_ids_field: str = payload.TOKEN_IDS_FIELD
    chunk_ids_field: str = payload.CHUNK_IDS_FIELD
    settle_prefixes: tuple[str, ...] = prometheus.SETTLE_PREFIXES
    speculative_flag: str = "--" + command.SPECULATIVE_CONFIG
    not_system_args: frozenset[str] = command.NOT_SYSTEM_ARGS
    # the doctor runs those named after its rows in them ("cpu kernel", "quantization"), the others first
    doctor_checks: tuple[tuple[str, CheckFn], ...] = (("vllm", checks.check_vllm),
                                                      ("server args", checks.check_server_args),
                                                      ("cpu kernel", host_checks.check_cpu),
                                                      ("quantization", host_checks.check_quantization))
    draft_checks: CheckFn = staticmethod(drafts.check_drafts)  # type: ignore[assignment]

    def launch_spec(self, sc: Scenario, arm: ArmSpec, gpus: list[int] | None = None) -> LaunchSpec:
        return command.launch_spec(sc, arm, gpus)

    def provenance(self, sc: Scenario, arm: ArmSpec, launch: LaunchSpec, argv: list[str],
                   env: Mapping[str, str], base_url: str | None = None) -> Provenance:
        return record.read(provenance.collect_provenance(sc, arm, launch, argv, dict(env), base_url))

    def read_provenance(self, saved: Mapping[str, Any]) -> Provenance:
        return record.read(saved)

    def hardware(self) -> dict[str, Any]:
        return provenance.hardware()

    def gpus_per_server(self, argv: list[str], env: Mapping[str, str]) -> int:
        return command.gpus_per_server(argv, env)

    def request_fields(self, exact_length: bool, templated: bool) -> dict[str, Any]:
        return payload.request_fields(exact_length, templated)

    def usage_options(self, per_chunk: bool) -> dict[str, Any]:
        return payload.usage_options(per_chunk)

    def read_usage(self, obj: dict, usage: dict, rec: RequestRecord) -> None:
        payload.read_usage(obj, usage, rec)

    def read_choice(self, choice: dict, rec: RequestRecord) -> None:
        payload.read_choice(choice, rec)

    def read_event(self, obj: dict, rec: RequestRecord) -> None:
        payload.read_event(obj, rec)

    def margin_request(self, model: str, prompt_ids: list[int], prefix: list[int], top: int) -> tuple[str, dict]:
        return logprobs.margin_request(model, prompt_ids, prefix, top)

    def read_top(self, body: Any) -> dict[int, float] | None:
        return logprobs.read_top(body)

    async def scrape(self, base_url: str) -> str:
        return await scrape_metrics(base_url)

    def spec_counters(self, text: str) -> SpecCounters:
        return prometheus.read_counters(text)

    def speculative_args(self, config: dict[str, Any]) -> list[str]:
        # the JSON vLLM's --speculative-config takes, compact as the launch command writes it
        return [self.speculative_flag, json.dumps(config, separators=(",", ":"))]

    def installed(self, sc: Scenario, facts: Facts) -> Installed:
        return checks.resolve_engine(sc, facts)
