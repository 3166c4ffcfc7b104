"""A stand-in engine: the project's fake OpenAI server (speedbench/testing/fake_server.py)
behind the Engine interface (speedbench/engine/base.py), written here with nothing from
engine/vllm/. A scenario picks it with ``server.engine: tests.helpers.fake_engine:FakeEngine``;
no product code names it, so a whole run through it shows that the run reaches its
engine only through the interface (tests/integration/test_stand_in_engine.py).

The fake happens to copy vLLM's wire (its counter names, its usage payload); this class
reads them with its own few lines, as a second engine would read its own.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from speedbench.client.scrape import SpecCounters, counters_of, parse_prometheus, scrape
from speedbench.engine.base import CheckFn, LaunchSpec
from speedbench.engine.preflight import Check, Context, Facts, Installed
from speedbench.engine.provenance import Provenance
from speedbench.records import RequestRecord, SpecStats
from speedbench.scenario import ArmSpec, Scenario

FAKE_CLI = [sys.executable, "-m", "speedbench.testing.fake_server"]
# the fake's counter names (speedbench/testing/fake_state.py) -> SpecCounters' fields
COUNTERS = {"vllm:spec_decode_num_drafts": "drafts", "vllm:spec_decode_num_draft_tokens": "draft_tokens",
            "vllm:spec_decode_num_accepted_tokens": "accepted",
            "vllm:spec_decode_num_accepted_tokens_per_pos": "per_position"}


class FakeEngine:
    """The fake server as an engine: every member of ``Engine``."""

    name = "fake"
    token_ids_field = "return_token_ids"
    chunk_ids_field = "token_ids"
    settle_prefixes = ("vllm:spec_decode",)
    speculative_flag = "--speculative-config"
    not_system_args = frozenset({"speculative-config", "host", "port"})
    doctor_checks: tuple[tuple[str, CheckFn], ...] = ()

    @staticmethod
    def draft_checks(ctx: Context) -> list[Check]:
        """The fake's drafts are names, not checkpoints: one row per speculative arm says so."""
        return [Check("draft", "ok", f"the fake serves draft {a.speculative_config.model!r} by name", "", a.name)
                for a in ctx.arms if a.speculative_config is not None]

    def launch_spec(self, sc: Scenario, arm: ArmSpec, gpus: list[int] | None = None) -> LaunchSpec:
        model = sc.server.model or "fake-model"
        argv = [*FAKE_CLI, "--model", model]
        for key, value in {**sc.server.args, **arm.args}.items():
            argv += [f"--{key}", str(value)]
        if arm.speculative_config is not None:
            argv += self.speculative_args(arm.speculative_config.to_dict())
        return LaunchSpec(arm=arm.name, argv=argv, host=sc.server.host, gpus=gpus, base_url=arm.base_url,
                          served_model=None if arm.base_url else model)

    def provenance(self, sc: Scenario, arm: ArmSpec, launch: LaunchSpec, argv: list[str],
                   env: Mapping[str, str], base_url: str | None = None) -> Provenance:
        return self.read_provenance({"engine": "fake", "argv": list(argv), "hardware": self.hardware()})

    def read_provenance(self, saved: Mapping[str, Any]) -> Provenance:
        hardware = saved.get("hardware")
        return Provenance(engine=self.name, engine_label="fake", engine_version="", argv=tuple(saved.get("argv") or ()),
                          hardware=hardware if isinstance(hardware, dict) else {}, saved=dict(saved))

    def hardware(self) -> dict[str, Any]:
        return {"summary": "the fake server's host"}

    def gpus_per_server(self, argv: list[str], env: Mapping[str, str]) -> int:
        return 0  # the fake runs on the CPU

    def request_fields(self, exact_length: bool, templated: bool) -> dict[str, Any]:
        # the fake copies vLLM's wire, so it is sent vLLM's fields, as a run on vLLM sends them
        fields: dict[str, Any] = {"add_special_tokens": False} if templated else {}
        return {**fields, "ignore_eos": True} if exact_length else fields

    def usage_options(self, per_chunk: bool) -> dict[str, Any]:
        return {"continuous_usage_stats": per_chunk}

    def read_usage(self, obj: dict, usage: dict, rec: RequestRecord) -> None:
        spec = (obj.get("metrics") or {}).get("speculative_decoding")
        if isinstance(spec, dict):
            rec.spec = SpecStats(num_spec_steps=int(spec["num_spec_steps"]),
                                 num_draft_tokens=int(spec["num_draft_tokens"]),
                                 num_accepted_tokens=int(spec["num_accepted_draft_tokens"]),
                                 acceptance_histogram=[int(v) for v in spec["acceptance_histogram"]])

    def read_choice(self, choice: dict, rec: RequestRecord) -> None:
        return None  # the fake's current shape puts everything beside usage

    def read_event(self, obj: dict, rec: RequestRecord) -> None:
        return None

    def margin_request(self, model: str, prompt_ids: list[int], prefix: list[int], top: int) -> None:
        return None  # no check request: its points' divergences stay "not checked"

    def read_top(self, body: object) -> None:
        return None

    async def scrape(self, base_url: str) -> str:
        return await scrape(base_url)

    def spec_counters(self, text: str) -> SpecCounters:
        return counters_of(parse_prometheus(text, keep_created=True), COUNTERS)

    def speculative_args(self, config: dict[str, Any]) -> list[str]:
        return [self.speculative_flag, json.dumps(config)]

    def installed(self, sc: Scenario, facts: Facts) -> Installed:
        return Installed(launcher=sc.server.launcher, kind="cpu", dist=None, version=None, origin="the fake server")
